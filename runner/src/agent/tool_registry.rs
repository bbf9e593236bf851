//! The tools of one run, filtered by the Agent's `toolGroups`, with their schemas computed once.

use std::collections::HashSet;
use std::sync::Arc;

use crate::model::ToolSchema;
use crate::thread::ToolCall;
use crate::tools::{Tool, ToolContext, ToolGroup, ToolOutput};

/// The tools available to one agent.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    schemas: Arc<[ToolSchema]>,
}

impl ToolRegistry {
    /// Keeps the tools whose group is enabled (`Builtin` always is) and not `denied`;
    /// the first tool of a name wins.
    pub fn new(
        candidates: Vec<Arc<dyn Tool>>,
        groups: Option<&[ToolGroup]>,
        denied: &[&str],
    ) -> Self {
        let mut seen = HashSet::new();
        let tools: Vec<Arc<dyn Tool>> = candidates
            .into_iter()
            .filter(|tool| {
                tool.group()
                    .is_none_or(|group| groups.is_none_or(|enabled| enabled.contains(&group)))
            })
            .filter(|tool| !denied.contains(&tool.name()))
            .filter(|tool| seen.insert(tool.name().to_owned()))
            .collect();
        let schemas = tools.iter().map(|tool| tool.schema()).collect();
        ToolRegistry { tools, schemas }
    }

    /// Schemas in registration order (stable, so the request prefix caches).
    pub fn schemas(&self) -> &[ToolSchema] {
        &self.schemas
    }

    /// The schemas as a shared list, for model requests (no copy per call).
    pub fn shared_schemas(&self) -> Arc<[ToolSchema]> {
        self.schemas.clone()
    }

    /// Names of the available tools.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|tool| tool.name())
    }

    /// Whether a tool of this name is available.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.iter().any(|tool| tool.name() == name)
    }

    /// Runs a call: unknown tools and unparsable arguments become error results for the model.
    pub async fn execute(&self, call: &ToolCall, ctx: &ToolContext) -> ToolOutput {
        let Some(tool) = self.tools.iter().find(|tool| tool.name() == call.name) else {
            let available: Vec<&str> = self.names().collect();
            return ToolOutput::error(format!(
                "Error: there is no tool named '{}'. Available tools: {}.",
                call.name,
                available.join(", ")
            ));
        };
        match call.parse_arguments() {
            Ok(arguments) => tool.call(arguments, ctx).await,
            Err(error) => ToolOutput::error(format!(
                "Error: the arguments of {} are not valid JSON ({error}). Send a JSON object.",
                call.name
            )),
        }
    }
}
