//! Tool schemas as small as a model can still use them.
//!
//! Every request carries every schema, and a 4k-context model has no tokens to spare: as
//! schemars emits them the lead's thirteen schemas took 2,356 of llama.cpp's tokens, more than
//! half the window. What a model needs is the shape (types, required fields, enum values) and
//! one line per top-level field where the name does not say it all; bounds, formats, `null`
//! variants, `$ref` indirections, nested fields' prose and per-variant prose are dropped here,
//! and arguments are still validated in full when a call is parsed.

use serde_json::{Map, Value};

/// Keywords that only restate what parsing enforces, or cost tokens without guiding a model.
const DROPPED: [&str; 12] = [
    "$schema",
    "title",
    "format",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "default",
    "additionalProperties",
    "examples",
];

/// Compacts a schemars parameter schema in place (see the module docs). The top-level
/// description goes too: the tool's own description says it.
pub fn compact(schema: &mut Value) {
    let defs = schema
        .as_object_mut()
        .and_then(|object| object.remove("$defs"))
        .unwrap_or(Value::Null);
    if let Some(object) = schema.as_object_mut() {
        object.remove("description");
    }
    compact_node(schema, &defs, 0);
}

/// How deep `$ref`s are followed: our argument types nest two levels at most.
const MAX_DEPTH: usize = 8;

fn compact_node(node: &mut Value, defs: &Value, depth: usize) {
    let Some(object) = node.as_object_mut() else {
        return;
    };
    if let Some(Value::String(reference)) = object.remove("$ref") {
        let name = reference.trim_start_matches("#/$defs/");
        if let (Some(Value::Object(target)), true) = (defs.get(name), depth < MAX_DEPTH) {
            // The property's own description says what it is for; the type's adds nothing.
            for (key, value) in target {
                if key != "description" {
                    object.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
        }
    }
    for key in DROPPED {
        object.remove(key);
    }
    // Fields of nested objects (a todo's `content`) are named well enough.
    if depth >= 2 {
        object.remove("description");
    }
    strip_null(object);
    constants_to_enum(object);
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            compact_node(property, defs, depth + 1);
            // A `description` argument explains itself.
            if name == "description"
                && let Some(property) = property.as_object_mut()
            {
                property.remove("description");
            }
        }
    }
    if let Some(items) = object.get_mut("items") {
        compact_node(items, defs, depth + 1);
    }
}

/// `"type": ["string", "null"]` becomes `"type": "string"`: leaving a field out is how a
/// model says "none".
fn strip_null(object: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = object.get("type") {
        let kept: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        let kept = match <[Value; 1]>::try_from(kept) {
            Ok([only]) => only,
            Err(many) => Value::Array(many),
        };
        object.insert("type".to_owned(), kept);
    }
}

/// schemars writes a documented enum as `oneOf` of `{const, description}`; a model needs only
/// `{"type": "string", "enum": [...]}`.
fn constants_to_enum(object: &mut Map<String, Value>) {
    let Some(Value::Array(variants)) = object.get("oneOf") else {
        return;
    };
    let constants: Option<Vec<Value>> = variants
        .iter()
        .map(|variant| variant.get("const").cloned())
        .collect();
    if let Some(constants) = constants {
        object.remove("oneOf");
        object.insert("type".to_owned(), Value::from("string"));
        object.insert("enum".to_owned(), Value::Array(constants));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn inlines_enums_and_drops_noise() {
        let mut schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args",
            "description": "Arguments.",
            "type": "object",
            "$defs": {
                "Kind": {
                    "description": "The kind.",
                    "oneOf": [
                        {"const": "a", "description": "First.", "type": "string"},
                        {"const": "b", "description": "Second.", "type": "string"}
                    ]
                },
                "Item": {
                    "type": "object",
                    "properties": {"kind": {"$ref": "#/$defs/Kind"}, "n": {"type": "integer", "format": "uint", "minimum": 0}},
                    "required": ["kind"]
                }
            },
            "properties": {
                "description": {"description": "Why, briefly.", "type": "string"},
                "kind": {"$ref": "#/$defs/Kind", "description": "Which one."},
                "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "maxItems": 3},
                "limit": {"type": ["integer", "null"], "default": null, "maximum": 10, "description": "At most 10."}
            },
            "required": ["description", "kind"]
        });
        compact(&mut schema);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string"},
                    "kind": {"description": "Which one.", "type": "string", "enum": ["a", "b"]},
                    "items": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"kind": {"type": "string", "enum": ["a", "b"]}, "n": {"type": "integer"}},
                        "required": ["kind"]
                    }},
                    "limit": {"type": "integer", "description": "At most 10."}
                },
                "required": ["description", "kind"]
            })
        );
    }

    #[test]
    fn a_reference_cycle_stops() {
        let mut schema = json!({
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
            "properties": {"root": {"$ref": "#/$defs/Node"}}
        });
        compact(&mut schema);
        let text = schema.to_string();
        assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
    }
}
