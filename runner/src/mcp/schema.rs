//! A server's tool schema as the model gets it: the description and the argument schema
//! passed through, within size caps (a server can describe a tool at any length, and every
//! schema is resent with every request).

use herd_sandbox::truncation::truncate_chars;
use serde_json::{Value, json};

use crate::model::ToolSchema;

/// Longest description passed on, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Largest argument schema passed on whole, in bytes of JSON; larger ones lose their
/// descriptions, and if still too large, become a bare object schema.
pub const MAX_PARAMETERS_BYTES: usize = 8 * 1024;

/// The schema of `name` from the server's `description` and `input_schema`, and a warning
/// when it had to be cut.
pub fn capped(name: &str, description: &str, input_schema: Value) -> (ToolSchema, Option<String>) {
    let mut description = truncate_chars(description.trim(), MAX_DESCRIPTION_CHARS - 1);
    let mut parameters = match input_schema {
        Value::Object(mut map) => {
            map.entry("type").or_insert_with(|| json!("object"));
            Value::Object(map)
        }
        _ => json!({"type": "object"}),
    };
    let mut warning = None;
    if size(&parameters) > MAX_PARAMETERS_BYTES {
        strip_descriptions(&mut parameters);
    }
    if size(&parameters) > MAX_PARAMETERS_BYTES {
        warning = Some(format!(
            "the argument schema of {name} is over {MAX_PARAMETERS_BYTES} bytes; the model \
             gets it as a bare object"
        ));
        parameters = json!({"type": "object"});
        description.push_str(" (Its argument schema was too large to show.)");
    }
    (
        ToolSchema {
            name: name.to_owned(),
            description,
            parameters,
        },
        warning,
    )
}

fn size(value: &Value) -> usize {
    serde_json::to_string(value)
        .map(|s| s.len())
        .unwrap_or(usize::MAX)
}

fn strip_descriptions(node: &mut Value) {
    match node {
        Value::Object(map) => {
            map.remove("description");
            map.remove("examples");
            map.remove("title");
            map.values_mut().for_each(strip_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_schemas_pass_through_and_get_an_object_type() {
        let input = json!({"properties": {"tz": {"type": "string", "description": "IANA"}}});
        let (schema, warning) = capped("time__now", "  Current time.  ", input);
        assert_eq!(schema.description, "Current time.");
        assert_eq!(
            schema.parameters,
            json!({"type": "object", "properties": {"tz": {"type": "string", "description": "IANA"}}})
        );
        assert_eq!(warning, None);
        let (odd, _) = capped("x__y", "", json!(["not", "an", "object"]));
        assert_eq!(odd.parameters, json!({"type": "object"}));
    }

    #[test]
    fn large_ones_lose_descriptions_then_their_shape() {
        let wordy: serde_json::Map<String, Value> = (0..40)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"type": "string", "description": "d".repeat(300)}),
                )
            })
            .collect();
        let (schema, warning) = capped(
            "x__y",
            &"long ".repeat(500),
            json!({"type": "object", "properties": wordy}),
        );
        assert_eq!(warning, None);
        assert!(
            schema.parameters["properties"]["p0"]
                .get("description")
                .is_none()
        );
        assert_eq!(schema.parameters["properties"]["p39"]["type"], "string");
        assert!(schema.description.chars().count() <= MAX_DESCRIPTION_CHARS);
        let huge: serde_json::Map<String, Value> = (0..2000)
            .map(|i| (format!("property_{i}"), json!({"type": "string"})))
            .collect();
        let (schema, warning) = capped("x__y", "Y.", json!({"properties": huge}));
        assert_eq!(schema.parameters, json!({"type": "object"}));
        assert!(warning.is_some_and(|w| w.contains("bare object")));
        assert!(schema.description.ends_with("too large to show.)"));
    }
}
