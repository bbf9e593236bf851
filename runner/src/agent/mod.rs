//! The lead agent: the loop, the middleware hook points, and the tools of a run.

pub(crate) mod events;
pub(crate) mod middleware;
pub(crate) mod run_loop;
pub(crate) mod run_resources;
pub(crate) mod tool_calls;
pub(crate) mod tool_registry;

pub use events::{AgentEvent, NoObserver, Observer, SideCallKind};
pub use middleware::{Flow, Middleware, ModelCall, ModelNext, ModelResult, ToolNext, ToolRequest};
pub use run_loop::{Agent, Limits, RunEnv, RunError, RunOutcome};
pub use run_resources::RunResources;
pub use tool_registry::ToolRegistry;
