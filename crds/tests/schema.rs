//! Properties of the generated schemas the API server relies on, checked without one: bounded
//! CEL inputs, structural shape, descriptions for `kubectl explain`, size, and drift of the
//! committed YAML.

mod common;

use herd_crds::generate::{
    CHART_CRDS_DIR, CRDS_CHART_TEMPLATES_DIR, SCHEMA_REVISION, crds, to_helm_template, to_yaml,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

const KINDS: [&str; 5] = ["Agent", "Skill", "Run", "Schedule", "Budget"];

/// Calls `visit(path, node)` for every schema node under `node`.
fn walk(path: &str, node: &Value, visit: &mut dyn FnMut(&str, &Value)) {
    visit(path, node);
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            walk(&format!("{path}.{name}"), child, visit);
        }
    }
    if let Some(items) = node.get("items") {
        walk(&format!("{path}[]"), items, visit);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        walk(&format!("{path}{{}}"), values, visit);
    }
}

/// Every string, list and map in the subtree has a size bound (or is an enum).
fn unbounded_in(path: &str, node: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(path, node, &mut |path, node| {
        let bounded = match node.get("type").and_then(Value::as_str) {
            Some("string") => node.get("maxLength").is_some() || node.get("enum").is_some(),
            Some("array") => node.get("maxItems").is_some(),
            Some("object") if node.get("additionalProperties").is_some() => {
                node.get("maxProperties").is_some()
            }
            _ => true,
        };
        if !bounded {
            found.push(path.to_owned());
        }
    });
    found
}

/// The fields a rule reads: `self` itself when it uses `self` as a whole, and each
/// `self.<field>` it names (`metadata` is the server's own, bounded schema).
fn touched_fields(rule: &str) -> (bool, Vec<String>) {
    let mut whole = false;
    let mut fields = Vec::new();
    for (i, _) in rule.match_indices("self") {
        let before_ok = i == 0 || !rule.as_bytes()[i - 1].is_ascii_alphanumeric();
        if !before_ok {
            continue;
        }
        let rest = &rule[i + 4..];
        if let Some(field) = rest.strip_prefix('.') {
            let name: String = field
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            // A method call (`self.matches(...)`, `self.startsWith(...)`) reads `self` whole.
            if field[name.len()..].starts_with('(') {
                whole = true;
            } else if name != "metadata" {
                fields.push(name);
            }
        } else {
            whole = true;
        }
    }
    (whole, fields)
}

#[test]
fn every_field_a_rule_touches_is_size_bounded() {
    let mut rules_seen = 0;
    for kind in KINDS {
        let schema = common::schema(kind);
        let mut problems = Vec::new();
        walk(kind, &schema, &mut |path, node| {
            let Some(rules) = node
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
            else {
                return;
            };
            for rule in rules {
                rules_seen += 1;
                let text = rule["rule"].as_str().unwrap();
                assert!(
                    rule.get("optionalOldSelf").is_none(),
                    "{path}: optionalOldSelf"
                );
                assert!(
                    rule.get("message").is_some() || rule.get("messageExpression").is_some(),
                    "{path}: rule {text} has no message"
                );
                let (whole, fields) = touched_fields(text);
                if whole && path != kind {
                    problems.extend(unbounded_in(path, node));
                }
                for field in fields {
                    let child = &node["properties"][&field];
                    assert!(!child.is_null(), "{path}: rule names unknown field {field}");
                    problems.extend(unbounded_in(&format!("{path}.{field}"), child));
                }
            }
        });
        assert_eq!(
            problems,
            Vec::<String>::new(),
            "unbounded fields read by rules"
        );
    }
    assert!(rules_seen >= 20, "only {rules_seen} rules found");
}

#[test]
fn the_bound_check_finds_unbounded_fields() {
    let node = serde_json::json!({"type": "object", "properties": {
        "s": {"type": "string"},
        "e": {"type": "string", "enum": ["a"]},
        "l": {"type": "array", "items": {"type": "string", "maxLength": 3}},
        "m": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 1}},
    }});
    assert_eq!(unbounded_in("x", &node), vec!["x.l", "x.m", "x.s"]);
    assert_eq!(
        touched_fields("has(self.soul) && self.mode == oldSelf.mode"),
        (false, vec!["soul".to_owned(), "mode".to_owned()])
    );
    assert_eq!(
        touched_fields("oldSelf.all(o, self.exists(n, n.id == o.id))"),
        (true, vec![])
    );
}

#[test]
fn schemas_are_structural_and_explained() {
    for kind in KINDS {
        let schema = common::schema(kind);
        let mut problems = Vec::new();
        walk(kind, &schema, &mut |path, node| {
            for forbidden in [
                "$ref",
                "anyOf",
                "oneOf",
                "allOf",
                "not",
                "definitions",
                "$defs",
            ] {
                if node.get(forbidden).is_some() {
                    problems.push(format!("{path}: has {forbidden}"));
                }
            }
            let int_or_string = node.get("x-kubernetes-int-or-string").is_some();
            if node.get("type").is_none() && !int_or_string {
                problems.push(format!("{path}: no type"));
            }
            let field = !path.ends_with("[]") && !path.ends_with("{}");
            if field && node.get("description").is_none() && path != kind {
                problems.push(format!("{path}: no description for kubectl explain"));
            }
            if let Some(values) = node.get("enum").and_then(Value::as_array)
                && values.iter().any(Value::is_null)
            {
                problems.push(format!("{path}: null in enum"));
            }
            if node.get("default").is_some() && node.get("nullable").is_some() {
                problems.push(format!("{path}: nullable with a default"));
            }
            let object_items = node
                .get("items")
                .is_some_and(|items| items["type"] == "object");
            if object_items && node.get("x-kubernetes-list-type").is_none() {
                problems.push(format!("{path}: list of objects without a list type"));
            }
        });
        assert_eq!(problems, Vec::<String>::new());
    }
}

#[test]
fn defaulted_objects_default_to_empty() {
    let agent = common::schema("Agent");
    for field in [
        "subagents",
        "runDefaults",
        "memory",
        "summarization",
        "sandbox",
    ] {
        assert_eq!(
            agent["properties"]["spec"]["properties"][field]["default"],
            serde_json::json!({}),
            "{field}"
        );
    }
    let run = common::schema("Run");
    let spec = &run["properties"]["spec"]["properties"];
    assert_eq!(spec["cancel"]["default"], serde_json::json!(false));
    assert_eq!(spec["responses"]["default"], serde_json::json!([]));
}

fn committed(dir: &str, file: &str) -> String {
    let path = common::repo_root().join(dir).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn committed_crds_match_the_types() {
    for (file, crd) in crds().unwrap() {
        assert!(
            committed(CHART_CRDS_DIR, file) == to_yaml(&crd).unwrap(),
            "{CHART_CRDS_DIR}/{file} is stale: run `cargo run -p herd-crds --bin crdgen`"
        );
        assert!(
            committed(CRDS_CHART_TEMPLATES_DIR, file) == to_helm_template(&crd).unwrap(),
            "{CRDS_CHART_TEMPLATES_DIR}/{file} is stale: run `cargo run -p herd-crds --bin crdgen`"
        );
    }
}

/// The schema revision and the digest of the schemas it names. When the schemas change, this
/// test fails until `SCHEMA_REVISION` grows and the new digest is recorded here, so the
/// `herd.dev/api-version` annotation the operator compares always moves with the schema.
const RECORDED_REVISION: (&str, &str) = (
    "v1alpha1.14",
    "85ef3220ccb0e407e36fb1ecb16e84bd341dc232ac367c16df9dcd72e2ad7486",
);

#[test]
fn the_schema_revision_moves_with_the_schema() {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for (_, crd) in crds().unwrap() {
        hasher.update(serde_json::to_vec(&crd.spec).unwrap());
    }
    let digest = hex::encode(hasher.finalize());
    assert_eq!(
        (SCHEMA_REVISION, digest.as_str()),
        RECORDED_REVISION,
        "the CRD schemas changed: bump SCHEMA_REVISION in crds/src/generate.rs and record \
         ({SCHEMA_REVISION:?}, {digest:?}) in RECORDED_REVISION"
    );
}

#[test]
fn committed_crds_read_back_unchanged_and_stay_small() {
    for (file, crd) in crds().unwrap() {
        let text = committed(CHART_CRDS_DIR, file);
        // 64 KiB: a guard against runaway growth (the Agent CRD passed 50 KiB with
        // `model.pricing` and `approval`), far below the API server's and client-side apply's
        // limits.
        assert!(text.len() < 65_536, "{file} is {} bytes", text.len());
        let parsed: CustomResourceDefinition = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(
            parsed, crd,
            "{file} does not read back as the generated CRD"
        );
    }
}

#[test]
fn names_columns_and_selectable_fields() {
    let crds = crds().unwrap();
    let by_kind = |kind: &str| {
        crds.iter()
            .map(|(_, crd)| crd)
            .find(|crd| crd.spec.names.kind == kind)
            .unwrap()
            .clone()
    };
    let mut short_names = Vec::new();
    for kind in KINDS {
        let crd = by_kind(kind);
        assert_eq!(crd.spec.group, "herd.dev");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.categories, Some(vec!["herd".to_owned()]));
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        short_names.extend(crd.spec.names.short_names.clone().unwrap());
    }
    assert_eq!(short_names, ["hag", "hskill", "hrun", "hsched", "hbudget"]);

    let columns = |kind: &str| -> Vec<(String, i32)> {
        by_kind(kind).spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.priority.unwrap_or(0)))
            .collect()
    };
    let named = |names: &[(&str, i32)]| -> Vec<(String, i32)> {
        names.iter().map(|(n, p)| ((*n).to_owned(), *p)).collect()
    };
    assert_eq!(
        columns("Run"),
        named(&[
            ("Agent", 0),
            ("Succeeded", 0),
            ("Reason", 0),
            ("Title", 0),
            ("StartTime", 0),
            ("CompletionTime", 0),
            ("Age", 0),
            ("Parent", 1),
        ])
    );
    assert_eq!(
        columns("Agent"),
        named(&[("Model", 0), ("Ready", 0), ("Reason", 0), ("Age", 0)])
    );
    assert_eq!(
        columns("Skill"),
        named(&[("Ready", 0), ("Age", 0), ("Description", 1)])
    );
    assert_eq!(
        columns("Schedule"),
        named(&[
            ("Schedule", 0),
            ("TimeZone", 0),
            ("Suspend", 0),
            ("Active", 0),
            ("Last", 0),
            ("Next", 0),
            ("Age", 0),
            ("Ready", 1),
            ("At", 1),
        ])
    );
    assert_eq!(
        columns("Budget"),
        named(&[
            ("Window", 0),
            ("Used", 0),
            ("Limit", 0),
            ("Exceeded", 0),
            ("Resets", 0),
            ("Age", 0),
            ("OnExceeded", 1),
        ])
    );
    let selectable: Vec<String> = by_kind("Run").spec.versions[0]
        .selectable_fields
        .clone()
        .unwrap()
        .into_iter()
        .map(|f| f.json_path)
        .collect();
    assert_eq!(selectable, [".spec.agentRef.name", ".spec.parentRef.name"]);
}

#[test]
fn optional_enums_keep_the_field_description_and_are_not_nullable() {
    let agent = common::schema("Agent");
    let spec = &agent["properties"]["spec"]["properties"];
    let effort = &spec["model"]["properties"]["reasoningEffort"];
    assert_eq!(effort["enum"], serde_json::json!(["low", "medium", "high"]));
    assert!(
        effort["description"]
            .as_str()
            .unwrap()
            .starts_with("Reasoning effort")
    );
    assert!(effort.get("nullable").is_none());
    let mode = &spec["sandbox"]["properties"]["egress"]["properties"]["mode"];
    assert_eq!(
        mode["enum"],
        serde_json::json!(["None", "Internet", "CIDRs"])
    );
    assert!(mode["description"].as_str().unwrap().starts_with("`None`"));
    let run = common::schema("Run");
    let phase = &run["properties"]["status"]["properties"]["phase"];
    assert!(
        phase["description"]
            .as_str()
            .unwrap()
            .starts_with("A one-word summary")
    );
}

#[test]
fn a_run_template_is_a_run_spec_without_the_run_only_fields_and_transition_rules() {
    let schedule = common::schema("Schedule");
    let template =
        &schedule["properties"]["spec"]["properties"]["runTemplate"]["properties"]["spec"];
    let run = common::schema("Run");
    let run_spec = &run["properties"]["spec"];
    let fields = |node: &Value| -> Vec<String> {
        node["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let mut expected = fields(run_spec);
    expected
        .retain(|f| !["responses", "cancel", "parentRef", "subagentType"].contains(&f.as_str()));
    assert_eq!(fields(template), expected);
    for field in &expected {
        assert_eq!(
            template["properties"][field], run_spec["properties"][field],
            "{field}"
        );
    }
    let text = serde_json::to_string(template).unwrap();
    assert!(!text.contains("oldSelf"), "a template may change: {text}");
}
