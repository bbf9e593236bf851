//! `tool_search`: loads the schemas of deferred tools (DeerFlow's tool). The model finds
//! tools by exact names (`select:A,B`), keywords, or `+required` terms; what it finds is
//! returned as function schemas and promoted: the schemas are in every request from then on.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::catalog::{DeferredCatalog, MAX_RESULTS};
use crate::tools::{ToolContext, ToolOutput, TypedTool};

/// The tool's name.
pub const TOOL_SEARCH: &str = "tool_search";

/// The tool's argument.
#[derive(Deserialize, JsonSchema)]
pub struct ToolSearchArgs {
    /// `select:A,B`, or keywords, optionally with `+required` words.
    query: String,
}

/// Searches one agent's deferred tools.
pub struct ToolSearch {
    catalog: Arc<DeferredCatalog>,
}

impl ToolSearch {
    pub fn new(catalog: Arc<DeferredCatalog>) -> Self {
        ToolSearch { catalog }
    }
}

#[async_trait]
impl TypedTool for ToolSearch {
    const NAME: &'static str = TOOL_SEARCH;
    const DESCRIPTION: &'static str = "Load deferred tools (listed by name in <available-deferred-tools>) so you can call them. Query forms: \"select:name_a,name_b\" loads those exactly; keywords (e.g. \"current time\") return the best matches; \"+word\" requires a word. Loaded tools stay available for the rest of the run.";
    type Args = ToolSearchArgs;

    async fn run(&self, args: ToolSearchArgs, _ctx: &ToolContext) -> ToolOutput {
        let found = self.catalog.search(&args.query);
        let mut notes = Vec::new();
        if !found.unknown.is_empty() {
            notes.push(format!(
                "Not deferred tools (check the names in <available-deferred-tools>): {}.",
                found.unknown.join(", ")
            ));
        }
        if found.schemas.is_empty() {
            notes.push(format!(
                "No deferred tool matches \"{}\". Try other keywords or select: with names \
                 from <available-deferred-tools>.",
                args.query
            ));
            return ToolOutput::ok(notes.join("\n"));
        }
        let functions: Vec<serde_json::Value> = found
            .schemas
            .iter()
            .map(|schema| {
                json!({"type": "function", "function": {
                    "name": schema.name,
                    "description": schema.description,
                    "parameters": schema.parameters,
                }})
            })
            .collect();
        let names: Vec<String> = found.schemas.iter().map(|s| s.name.clone()).collect();
        let mut text = format!(
            "Loaded {} tool(s); call them directly from now on (at most {MAX_RESULTS} per \
             keyword search):\n{}",
            names.len(),
            serde_json::to_string_pretty(&functions).unwrap_or_default()
        );
        for note in notes {
            text.push('\n');
            text.push_str(&note);
        }
        let mut output = ToolOutput::ok(text);
        output.effect.promoted = names;
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolSchema;
    use crate::tools::Tool;
    use crate::tools::web::test_context::context;

    fn catalog() -> Arc<DeferredCatalog> {
        Arc::new(DeferredCatalog::new(vec![
            ToolSchema {
                name: "time__get_current_time".into(),
                description: "Get the current time in a timezone.".into(),
                parameters: json!({"type": "object", "properties": {"timezone": {"type": "string"}}}),
            },
            ToolSchema {
                name: "time__convert_time".into(),
                description: "Convert a time between timezones.".into(),
                parameters: json!({"type": "object"}),
            },
        ]))
    }

    #[tokio::test]
    async fn found_tools_come_back_as_functions_and_are_promoted() {
        let tool = ToolSearch::new(catalog());
        let output = tool
            .call(
                json!({"query": "select:time__get_current_time,nope"}),
                &context(),
            )
            .await;
        assert_eq!(output.effect.promoted, ["time__get_current_time"]);
        assert!(
            output
                .content
                .contains("\"name\": \"time__get_current_time\""),
            "{}",
            output.content
        );
        assert!(
            output.content.contains("\"timezone\""),
            "{}",
            output.content
        );
        assert!(
            output.content.contains(
                "Not deferred tools (check the names in <available-deferred-tools>): nope."
            )
        );
        let keyword = tool.call(json!({"query": "convert"}), &context()).await;
        assert_eq!(keyword.effect.promoted, ["time__convert_time"]);
        let none = tool.call(json!({"query": "weather"}), &context()).await;
        assert!(none.effect.promoted.is_empty());
        assert!(
            none.content
                .starts_with("No deferred tool matches \"weather\"")
        );
        let bad = tool.call(json!({"q": 1}), &context()).await;
        assert_eq!(bad.status, crate::thread::ToolStatus::Error);
    }
}
