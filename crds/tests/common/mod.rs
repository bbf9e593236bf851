//! Helpers shared by the CRD tests: the generated schemas and an offline CEL evaluator.
//!
//! The evaluator (kube's `cel` feature) proves what the rules mean; it is not the API server,
//! so the cost and structural checks live in their own tests.

// Test support: a failed unwrap here is a failed test, and not every test file uses every helper.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use herd_crds::generate::crds;
use kube::core::cel::Validator;
use serde_json::Value;

/// The repository root (the crate's parent folder).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The `openAPIV3Schema` of the CRD of `kind`, as JSON.
pub fn schema(kind: &str) -> Value {
    let (_, crd) = crds()
        .unwrap()
        .into_iter()
        .find(|(_, crd)| crd.spec.names.kind == kind)
        .unwrap();
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    serde_json::to_value(schema).unwrap()
}

/// The messages of every rule `object` breaks on create (empty when it is accepted).
pub fn cel_create(object: &Value) -> Vec<String> {
    cel(object, None)
}

/// The messages of every rule `new` breaks when it replaces `old`.
pub fn cel_update(old: &Value, new: &Value) -> Vec<String> {
    cel(new, Some(old))
}

fn cel(object: &Value, old: Option<&Value>) -> Vec<String> {
    let kind = object["kind"].as_str().unwrap();
    match Validator::new().validate(&schema(kind), object, old) {
        Ok(()) => vec![],
        Err(errors) => errors.iter().map(|e| e.to_string()).collect(),
    }
}

/// Applies a JSON merge patch (RFC 7386), as `kubectl patch --type merge` does.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(fields) => {
            if !target.is_object() {
                *target = Value::Object(Default::default());
            }
            for (key, value) in fields {
                if value.is_null() {
                    if let Some(map) = target.as_object_mut() {
                        map.remove(key);
                    }
                } else {
                    merge_patch(&mut target[key], value);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// Parses one YAML document into JSON.
pub fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap()
}

/// The `# expect: <message>` comment of a fixture.
pub fn expected_message(text: &str) -> String {
    text.lines()
        .find_map(|line| line.trim().strip_prefix("# expect:"))
        .map(|m| m.trim().to_owned())
        .unwrap_or_else(|| panic!("no `# expect:` comment in\n{text}"))
}

/// Every `.yaml` file directly in `dir`, sorted.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}
