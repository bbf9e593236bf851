//! `TypedTool`: a tool whose arguments are one typed struct. Its name is written once; the
//! schema comes from the arguments type and bad arguments are answered for it, so every
//! `TypedTool` is a `Tool` without writing those parts again.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use super::{Tool, ToolContext, ToolGroup, ToolOutput, parse_args, schema_for};
use crate::model::ToolSchema;

/// A tool with a fixed name, group and description and typed arguments.
#[async_trait]
pub trait TypedTool: Send + Sync {
    /// The name the model calls it by.
    const NAME: &'static str;
    /// The Agent `toolGroups` entry that enables it; `None` (the default) for the built-in
    /// tools, which every agent has.
    const GROUP: Option<ToolGroup> = None;
    /// What the model reads about it.
    const DESCRIPTION: &'static str;
    /// Its arguments; their JSON Schema is the tool's parameters.
    type Args: DeserializeOwned + JsonSchema + Send;

    /// Runs a call whose arguments parsed. Failures come back as error results, never panics.
    async fn run(&self, args: Self::Args, ctx: &ToolContext) -> ToolOutput;
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn group(&self) -> Option<ToolGroup> {
        T::GROUP
    }

    fn schema(&self) -> ToolSchema {
        schema_for::<T::Args>(T::NAME, T::DESCRIPTION)
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        match parse_args(T::NAME, arguments) {
            Ok(args) => self.run(args, ctx).await,
            Err(output) => output,
        }
    }
}
