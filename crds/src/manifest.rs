//! Reading Agent, Skill and Run manifests without an API server (`herd-runner run -f`).
//!
//! [`parse_manifests`] reads multi-document YAML, picks the type from `apiVersion` and `kind`,
//! refuses unknown fields (as `kubectl` does with strict field validation), applies the serde
//! defaults (the same as the schema defaults) and runs each resource's `validate()`, so a local
//! run fails where and how the API server would, in the API server's words where it can.

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::agent::Agent;
use crate::run::Run;
use crate::skill::Skill;
use crate::validation::{FieldError, FieldErrors};

/// The `apiVersion` of every Herd resource.
pub const API_VERSION: &str = "herd.dev/v1alpha1";

/// One resource read from a manifest.
#[derive(Debug, Clone, PartialEq)]
pub enum Manifest {
    /// An `Agent`.
    Agent(Agent),
    /// A `Skill`.
    Skill(Skill),
    /// A `Run`.
    Run(Run),
}

impl Manifest {
    /// The resource's kind, e.g. `Agent`.
    pub fn kind(&self) -> &'static str {
        match self {
            Manifest::Agent(_) => "Agent",
            Manifest::Skill(_) => "Skill",
            Manifest::Run(_) => "Run",
        }
    }

    /// The resource's `metadata.name` (empty when the manifest has none).
    pub fn name(&self) -> &str {
        let metadata = match self {
            Manifest::Agent(agent) => &agent.metadata,
            Manifest::Skill(skill) => &skill.metadata,
            Manifest::Run(run) => &run.metadata,
        };
        metadata.name.as_deref().unwrap_or_default()
    }
}

/// Why a manifest was refused: which document, which object, and every field error found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// 1-based position of the document in the text; `None` when the YAML itself is broken.
    pub document: Option<usize>,
    /// `Kind/name` of the object, when the document got that far.
    pub object: Option<String>,
    /// The errors, each with its field path (empty for whole-document errors).
    pub errors: Vec<FieldError>,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.document, &self.object) {
            (Some(n), Some(object)) => write!(f, "document {n} ({object}): ")?,
            (Some(n), None) => write!(f, "document {n}: ")?,
            (None, _) => {}
        }
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            if error.path.is_empty() {
                f.write_str(&error.message)?;
            } else {
                write!(f, "{error}")?;
            }
        }
        Ok(())
    }
}

/// Parses every document of a multi-document YAML text into Herd resources, validated.
///
/// Empty documents are skipped. The first document that fails stops the parse; its error lists
/// every problem found in it.
pub fn parse_manifests(text: &str) -> Result<Vec<Manifest>, ManifestError> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| ManifestError {
        document: None,
        object: None,
        errors: vec![whole(format!("invalid YAML: {e}"))],
    })?;
    documents
        .into_iter()
        .enumerate()
        .map(|(i, document)| parse_document(i + 1, document))
        .collect()
}

fn whole(message: String) -> FieldError {
    FieldError {
        path: String::new(),
        message,
    }
}

/// The kinds of Herd's own API group, by API version.
pub const HERD_KINDS: &[(&str, &[&str])] = &[(API_VERSION, &["Agent", "Skill", "Run"])];

/// `Kind/name` of a document, for messages.
fn object_name(document: &Value) -> String {
    let text_of = |key: &str| {
        document
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let name = document
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    format!("{}/{name}", text_of("kind"))
}

/// Refuses a document (1-based `number`) whose kind is not among `accepted` (API version,
/// kinds), naming every accepted kind, or whose `apiVersion` is not its kind's, naming that.
pub fn check_kind(
    number: usize,
    document: &Value,
    accepted: &[(&str, &[&str])],
) -> Result<(), ManifestError> {
    let text_of = |key: &str| {
        document
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let (api_version, kind) = (text_of("apiVersion"), text_of("kind"));
    let refuse = |path: &str, message: String| ManifestError {
        document: Some(number),
        object: Some(object_name(document)),
        errors: vec![FieldError {
            path: path.to_owned(),
            message,
        }],
    };
    let versions: Vec<&str> = accepted
        .iter()
        .filter(|(_, kinds)| kinds.contains(&kind))
        .map(|(version, _)| *version)
        .collect();
    if versions.is_empty() {
        let kinds: Vec<&str> = accepted
            .iter()
            .flat_map(|(_, kinds)| kinds.iter().copied())
            .collect();
        return Err(refuse("kind", unsupported(kind, &kinds)));
    }
    if !versions.contains(&api_version) {
        return Err(refuse("apiVersion", unsupported(api_version, &versions)));
    }
    Ok(())
}

/// Parses one already-decoded document (1-based `number`, for messages). Callers that read
/// other kinds from the same files (the runner's ConfigMaps) dispatch those first.
pub fn parse_document(number: usize, document: Value) -> Result<Manifest, ManifestError> {
    let fail = |object: Option<String>, errors: Vec<FieldError>| ManifestError {
        document: Some(number),
        object,
        errors,
    };
    let Value::Object(fields) = &document else {
        return Err(fail(
            None,
            vec![whole("a manifest must be a YAML mapping".into())],
        ));
    };
    check_kind(number, &document, HERD_KINDS)?;
    let kind = fields
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let object = Some(object_name(&document));
    let parsed = match kind {
        "Agent" => typed::<Agent>(&document).and_then(|agent| {
            agent.validate()?;
            Ok(Manifest::Agent(agent))
        }),
        "Skill" => typed::<Skill>(&document).and_then(|skill| {
            skill.validate()?;
            Ok(Manifest::Skill(skill))
        }),
        "Run" => typed::<Run>(&document).and_then(|run| {
            run.validate()?;
            Ok(Manifest::Run(run))
        }),
        other => Err(FieldErrors(vec![FieldError {
            path: "kind".into(),
            message: unsupported(other, HERD_KINDS[0].1),
        }])),
    };
    parsed.map_err(|errors| fail(object, errors.0))
}

/// Deserializes one document into `T`, then refuses fields `T` does not know.
fn typed<T: DeserializeOwned + Serialize>(document: &Value) -> Result<T, FieldErrors> {
    let value: T = serde_path_to_error::deserialize(document).map_err(|e| {
        let path = e.path().to_string();
        FieldErrors(vec![serde_error(&path, &e.into_inner().to_string())])
    })?;
    let known =
        serde_json::to_value(&value).map_err(|e| FieldErrors(vec![whole(e.to_string())]))?;
    let mut unknown = Vec::new();
    unknown_fields(document, &known, "", &mut unknown);
    if unknown.is_empty() {
        Ok(value)
    } else {
        Err(FieldErrors(
            unknown
                .into_iter()
                .map(|path| whole(format!("unknown field \"{path}\"")))
                .collect(),
        ))
    }
}

/// Paths present in `input` but gone after the round trip through the Rust type: fields the
/// type does not have. Empty values may be dropped by the round trip and are not reported.
fn unknown_fields(input: &Value, known: &Value, path: &str, out: &mut Vec<String>) {
    match (input, known) {
        (Value::Object(input), Value::Object(known)) => {
            for (key, value) in input {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match known.get(key) {
                    Some(known_value) => unknown_fields(value, known_value, &child, out),
                    None if is_empty(value) => {}
                    None => out.push(child),
                }
            }
        }
        (Value::Array(input), Value::Array(known)) => {
            for (i, (value, known_value)) in input.iter().zip(known).enumerate() {
                unknown_fields(value, known_value, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// Turns a serde message into the API server's wording where there is one.
fn serde_error(path: &str, message: &str) -> FieldError {
    let path = if path == "." { "" } else { path };
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((value, expected)) = rest.split_once("`, expected ")
    {
        let supported: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        return FieldError {
            path: path.to_owned(),
            message: unsupported(value, &supported),
        };
    }
    if let Some(rest) = message.strip_prefix("missing field `")
        && let Some(field) = rest.strip_suffix('`')
    {
        let path = if path.is_empty() {
            field.to_owned()
        } else {
            format!("{path}.{field}")
        };
        return FieldError {
            path,
            message: "Required value".into(),
        };
    }
    FieldError {
        path: path.to_owned(),
        message: message.to_owned(),
    }
}

/// The API server's message for a value outside an enum.
fn unsupported(value: &str, supported: &[&str]) -> String {
    let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    format!(
        "Unsupported value: {value:?}: supported values: {}",
        quoted.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGENT: &str =
        "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata:\n  name: a\nspec: {}\n";

    fn error_of(text: &str) -> String {
        parse_manifests(text).unwrap_err().to_string()
    }

    #[test]
    fn reads_several_documents_and_applies_defaults() {
        let text = format!(
            "{AGENT}---\napiVersion: herd.dev/v1alpha1\nkind: Run\nmetadata:\n  name: r\nspec:\n  agentRef: {{name: a}}\n  task: hello\n---\n"
        );
        let manifests = parse_manifests(&text).unwrap();
        assert_eq!(manifests.len(), 2);
        let Manifest::Agent(agent) = &manifests[0] else {
            panic!("not an agent")
        };
        assert_eq!(agent.spec.subagents.max_concurrent, 3);
        assert_eq!(agent.spec.run_defaults.timeout, "30m");
        assert_eq!((manifests[1].kind(), manifests[1].name()), ("Run", "r"));
        let Manifest::Run(run) = &manifests[1] else {
            panic!("not a run")
        };
        assert!(!run.spec.cancel);
        assert!(run.spec.responses.is_empty());
    }

    #[test]
    fn names_document_field_and_rule() {
        let text = format!(
            "{AGENT}---\n{}",
            AGENT.replace("spec: {}", "spec:\n  subagents:\n    maxConcurrent: 9")
        );
        assert_eq!(
            error_of(&text),
            "document 2 (Agent/a): spec.subagents.maxConcurrent: must be between 1 and 4"
        );
    }

    #[test]
    fn enum_errors_use_the_api_server_wording() {
        let text = AGENT.replace("spec: {}", "spec:\n  model: {provider: gemini, name: x}");
        assert_eq!(
            error_of(&text),
            "document 1 (Agent/a): spec.model.provider: Unsupported value: \"gemini\": supported values: \"openai\", \"anthropic\", \"scripted\""
        );
    }

    #[test]
    fn unknown_fields_are_refused_like_strict_field_validation() {
        let text = AGENT.replace("spec: {}", "spec:\n  modle: {name: x}\n  sandbox:\n    tolerations: [{key: a, colour: red}]\n  skills: []");
        assert_eq!(
            error_of(&text),
            "document 1 (Agent/a): unknown field \"spec.modle\"; unknown field \"spec.sandbox.tolerations[0].colour\""
        );
    }

    #[test]
    fn missing_fields_are_required_values() {
        let text = "apiVersion: herd.dev/v1alpha1\nkind: Run\nmetadata: {name: r}\nspec:\n  agentRef: {name: a}\n";
        assert_eq!(
            error_of(text),
            "document 1 (Run/r): spec.task: Required value"
        );
    }

    #[test]
    fn foreign_kinds_and_versions_are_refused() {
        assert_eq!(
            error_of(&AGENT.replace("kind: Agent", "kind: Pod")),
            "document 1 (Pod/a): kind: Unsupported value: \"Pod\": supported values: \"Agent\", \"Skill\", \"Run\""
        );
        assert_eq!(
            error_of(&AGENT.replace("herd.dev/v1alpha1", "v1")),
            "document 1 (Agent/a): apiVersion: Unsupported value: \"v1\": supported values: \"herd.dev/v1alpha1\""
        );
        assert_eq!(
            error_of("- a\n- b\n"),
            "document 1: a manifest must be a YAML mapping"
        );
        assert!(error_of("a: [").starts_with("invalid YAML"));
    }
}
