//! Tools the model can call: each a `Tool` with a JSON Schema, filtered by the Agent's
//! `toolGroups`. Sandbox tools forward to the `ToolExecutor`; the rest run on the agent side.

pub(crate) mod ask_clarification;
pub(crate) mod lean_schema;
pub(crate) mod present_files;
pub mod sandbox_tools;
pub(crate) mod schema;
pub(crate) mod task;
mod typed_tool;
pub(crate) mod view_image;
pub(crate) mod web;
pub(crate) mod web_fetch;
pub(crate) mod web_search;
pub(crate) mod write_todos;

use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::report::{Clarification, Todo, UsageTotals};
use herd_sandbox::{SandboxError, ToolExecutor, ToolReply};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::control::{Budget, ControlPlane};
use crate::model::ToolSchema;
use crate::thread::state::{Delegation, ViewedImage};
use crate::thread::{ImagePart, ToolStatus};
pub use herd_crds::agent::ToolGroup;
pub use typed_tool::TypedTool;

/// What a tool needs from the run.
#[derive(Clone)]
pub struct ToolContext {
    /// The id of the call being executed.
    pub call_id: String,
    pub executor: Arc<dyn ToolExecutor>,
    pub control: Arc<dyn ControlPlane>,
    /// The Run's attempt (reports carry it).
    pub attempt: u32,
    /// What the calling agent has left; a subagent never gets more.
    pub budget: Budget,
}

/// A change a tool makes to the thread besides its result message.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolEffect {
    /// `write_todos`: the new list.
    pub todos: Option<Vec<Todo>>,
    /// `present_files`: virtual paths to add to the artifacts.
    pub artifacts: Vec<String>,
    /// `view_image`: the image (metadata persisted; bytes shown to the model once).
    pub viewed_image: Option<(String, ViewedImage, ImagePart)>,
    /// `task`: the delegation ledger entry.
    pub delegation: Option<Delegation>,
    /// `task`: what the child used, its own children included.
    pub child_usage: Option<UsageTotals>,
    /// `ask_clarification`: the question; the loop stops for an answer.
    pub interrupt: Option<Clarification>,
    /// A call that needs a person's approval (`ToolApproval`): it did not run; the loop asks
    /// for all of the turn's together and runs or denies each.
    pub approval: Option<herd_crds::approval::ApprovalRequest>,
    /// Images of an MCP tool's result, shown to the model once after the turn's results.
    pub images: Vec<ImagePart>,
    /// `tool_search`: deferred tools whose schemas the model gets from now on.
    pub promoted: Vec<String>,
}

/// The result of one tool call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    pub content: String,
    pub status: ToolStatus,
    pub effect: ToolEffect,
    /// Facts for middlewares, stored on the result message (`read_file`'s `sha256`...).
    pub meta: serde_json::Map<String, serde_json::Value>,
}

impl ToolOutput {
    /// What the model reads of the sandbox tool `tool`'s reply (the one place a sandbox
    /// answer becomes a tool result).
    pub fn from_sandbox(tool: &str, reply: Result<ToolReply, SandboxError>) -> Self {
        match reply {
            Ok(reply) => ToolOutput {
                content: reply.content,
                status: if reply.is_error {
                    ToolStatus::Error
                } else {
                    ToolStatus::Success
                },
                meta: reply.meta,
                ..ToolOutput::default()
            },
            Err(SandboxError::Refused(message)) => ToolOutput::error(message),
            Err(odd @ SandboxError::Unexpected { .. }) => {
                ToolOutput::error(format!("Error: {odd}"))
            }
            Err(SandboxError::Unavailable(error)) => ToolOutput::error(format!(
                "Error: {error}. The sandbox could not run {tool}; try again shortly."
            )),
        }
    }

    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            ..ToolOutput::default()
        }
    }

    /// An error result: the model sees it and can try something else.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            status: ToolStatus::Error,
            ..ToolOutput::default()
        }
    }
}

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// The Agent `toolGroups` entry that enables it; `None` for the built-in tools, which
    /// every agent has.
    fn group(&self) -> Option<ToolGroup>;
    /// Description and argument schema, as sent to the model.
    fn schema(&self) -> ToolSchema;
    /// Runs the call. Bad arguments and failures come back as error results, never panics.
    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput;
}

/// Builds a tool schema from an arguments type, compacted (see `schema::compact`).
pub fn schema_for<T: JsonSchema>(name: &str, description: &str) -> ToolSchema {
    let mut parameters = serde_json::to_value(schemars::schema_for!(T))
        .unwrap_or_else(|_| serde_json::json!({"type": "object"}));
    schema::compact(&mut parameters);
    ToolSchema {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    }
}

/// Parses a tool's arguments, or explains to the model what was wrong with them.
// The error is the tool's whole answer; boxing it would only move the allocation.
#[allow(clippy::result_large_err)]
pub fn parse_args<T: DeserializeOwned>(
    tool: &str,
    arguments: serde_json::Value,
) -> Result<T, ToolOutput> {
    serde_json::from_value(arguments).map_err(|error| {
        ToolOutput::error(format!(
            "Error: invalid arguments for {tool}: {error}. Check the tool's schema and call it again."
        ))
    })
}
