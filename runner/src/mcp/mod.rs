//! Model Context Protocol tools, as DeerFlow and kagent use them: the Agent's servers
//! (`spec.mcp`) started at the run's start with the official SDK, their tools named
//! `<server>__<tool>`. HTTP servers are called from this process, which holds their headers'
//! secrets; stdio servers run in the sandbox, which holds none. With many tools they are
//! deferred: the prompt names them, and `tool_search` loads the schemas the agent needs.

pub(crate) mod catalog;
mod connect;
pub(crate) mod names;
mod result;
mod schema;
mod tool;
pub(crate) mod tool_search;
mod toolset;

pub use toolset::{McpToolset, deferral};
