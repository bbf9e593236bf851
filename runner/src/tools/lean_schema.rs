//! Lean tool schemas for small context windows: only the required arguments, no prose but
//! the tool's description. A 4k-token model cannot afford the optional knobs (line ranges,
//! result limits, search flags); it can still pass them, and they are still parsed.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{Tool, ToolContext, ToolGroup, ToolOutput};
use crate::model::ToolSchema;

/// `tool` with a lean schema.
pub struct Lean(pub Arc<dyn Tool>);

#[async_trait]
impl Tool for Lean {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn group(&self) -> Option<ToolGroup> {
        self.0.group()
    }

    fn schema(&self) -> ToolSchema {
        lean_schema(self.0.schema())
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> ToolOutput {
        self.0.call(arguments, ctx).await
    }
}

/// `schema` with only its required top-level properties, none of them described, and the
/// tool's description cut to its first clause.
pub fn lean_schema(mut schema: ToolSchema) -> ToolSchema {
    if let Some(end) = schema.description.find([';', '.']) {
        schema.description.truncate(end);
    }
    let required: Vec<String> = schema.parameters["required"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .filter_map(|name| name.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = schema.parameters.get_mut("properties") {
        properties.retain(|name, _| required.contains(name));
        for property in properties.values_mut() {
            strip_descriptions(property);
        }
    }
    schema
}

fn strip_descriptions(node: &mut Value) {
    if let Some(object) = node.as_object_mut() {
        object.remove("description");
        for key in ["items", "properties"] {
            if let Some(child) = object.get_mut(key) {
                match child {
                    Value::Object(map) if key == "properties" => {
                        map.values_mut().for_each(strip_descriptions);
                    }
                    other => strip_descriptions(other),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::ask_clarification::AskClarification;
    use crate::tools::sandbox_tools::sandbox_tools;

    #[test]
    fn keeps_required_arguments_only() {
        let ask = Lean(Arc::new(AskClarification));
        assert_eq!(ask.name(), "ask_clarification");
        assert_eq!(
            ask.schema().parameters,
            json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "clarification_type": {
                        "type": "string",
                        "enum": ["missing_info", "ambiguous_requirement", "approach_choice", "risk_confirmation", "suggestion"]
                    }
                },
                "required": ["question", "clarification_type"]
            })
        );
    }

    #[test]
    fn every_lean_schema_is_smaller_and_keeps_what_is_required() {
        for tool in sandbox_tools() {
            let full = tool.schema();
            let lean = Lean(tool.clone()).schema();
            assert!(full.description.starts_with(&lean.description));
            assert_eq!(lean.parameters["required"], full.parameters["required"]);
            let size = |s: &ToolSchema| serde_json::to_string(s).map(|t| t.len()).unwrap_or(0);
            assert!(size(&lean) <= size(&full), "{}", full.name);
        }
    }
}
