//! Schema helpers for shapes the derives do not produce the way the API server wants them.

use k8s_openapi::api::core::v1::Toleration;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Value, json};

/// Schema of an optional enum field: the enum's values without `null`.
///
/// The derive would wrap `Option<E>` in `anyOf` and kube's rewrite hoists the enum's own
/// description over the field's, so `kubectl explain` would describe the type instead of the
/// field. `None` is never serialized (every such field skips it), so `null` need not validate.
///
/// Such a field keeps `#[serde(default)]`: behind `schema_with` schemars no longer sees the
/// `Option`, and without `default` it would list the field as required.
pub(crate) fn optional_enum<E: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = E::json_schema(generator);
    if let Some(object) = schema.as_object_mut() {
        object.remove("description");
    }
    schema
}

/// Schema of `sandbox.tolerations`: Pod tolerations (at most 32, atomic) with bounded strings
/// and the operator rule on each item, where its message can quote the operator within the
/// CEL cost budget.
pub(crate) fn tolerations(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = <Vec<Toleration>>::json_schema(generator);
    if let Some(list) = schema.as_object_mut() {
        list.insert("maxItems".into(), json!(32));
        list.insert("x-kubernetes-list-type".into(), json!("atomic"));
        if let Some(item) = list.get_mut("items").and_then(Value::as_object_mut) {
            if let Some(fields) = item.get_mut("properties").and_then(Value::as_object_mut) {
                for (field, max) in [
                    ("key", 317),
                    ("operator", 16),
                    ("value", 63),
                    ("effect", 32),
                ] {
                    if let Some(field) = fields.get_mut(field).and_then(Value::as_object_mut) {
                        field.insert("maxLength".into(), json!(max));
                    }
                }
            }
            item.insert(
                "x-kubernetes-validations".into(),
                json!([{
                    "rule": crate::rules::TOLERATION_OPERATOR,
                    "messageExpression": crate::rules::TOLERATION_OPERATOR_MESSAGE,
                }]),
            );
        }
    }
    schema
}
