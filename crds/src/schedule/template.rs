//! A Schedule's `runTemplate`: the Run spec, minus what only a running Run has (answers,
//! cancellation, a parent), plus labels and annotations for each Run.

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::run::RunSpec;

/// Run spec fields a template cannot set: they belong to a Run while it goes.
const RUN_ONLY_FIELDS: [&str; 4] = ["responses", "cancel", "parentRef", "subagentType"];

/// The Run each slot creates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunTemplate {
    /// Labels and annotations put on each Run.
    #[serde(default)]
    pub metadata: RunTemplateMetadata,
    /// The Run's spec: the fields of a Run's `spec` except `responses`, `cancel`, `parentRef`
    /// and `subagentType`.
    #[schemars(schema_with = "run_template_spec")]
    pub spec: RunSpec,
}

/// Labels and annotations of the Runs a Schedule creates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunTemplateMetadata {
    /// Labels of each Run (the operator adds `herd.dev/schedule`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32, "additionalProperties" = {"type": "string", "maxLength": 63}))]
    pub labels: BTreeMap<String, String>,
    /// Annotations of each Run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32, "additionalProperties" = {"type": "string", "maxLength": 4096}))]
    pub annotations: BTreeMap<String, String>,
}

/// The Run spec's own schema without the run-only fields and without the rules that compare a
/// Run with its previous version (a template may change) or name a removed field.
fn run_template_spec(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = RunSpec::json_schema(generator);
    if let Some(object) = schema.as_object_mut() {
        if let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) {
            for field in RUN_ONLY_FIELDS {
                properties.remove(field);
            }
        }
        if let Some(required) = object.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|name| {
                name.as_str()
                    .is_none_or(|name| !RUN_ONLY_FIELDS.contains(&name))
            });
        }
        if let Some(rules) = object
            .get_mut("x-kubernetes-validations")
            .and_then(Value::as_array_mut)
        {
            rules.retain(|rule| {
                let text = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
                !text.contains("oldSelf") && !RUN_ONLY_FIELDS.iter().any(|f| text.contains(f))
            });
            if rules.is_empty() {
                object.remove("x-kubernetes-validations");
            }
        }
        object.insert(
            "description".into(),
            "The Run's spec: the fields of a Run's `spec` except `responses`, `cancel`, `parentRef` and `subagentType`.".into(),
        );
    }
    schema
}
