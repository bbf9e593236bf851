//! Schema helpers for shapes the derives do not produce the way the API server wants them.

use schemars::{JsonSchema, Schema, SchemaGenerator};

/// Schema of an optional enum field: the enum's values without `null`.
///
/// The derive would wrap `Option<E>` in `anyOf` and kube's rewrite hoists the enum's own
/// description over the field's, so `kubectl explain` would describe the type instead of the
/// field. `None` is never serialized (every such field skips it), so `null` need not validate.
pub(crate) fn optional_enum<E: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = E::json_schema(generator);
    if let Some(object) = schema.as_object_mut() {
        object.remove("description");
    }
    schema
}
