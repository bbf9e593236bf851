//! Herd's runner: the lead agent loop, its middleware chain, models and tools.
//!
//! `herd-runner run` runs an agent on a laptop; `herd-runner pod` and `herd-runner sandbox`
//! are the two containers of a Run's pod (the sandbox itself is `herd_sandbox`). The agent
//! code is the same everywhere: the `ControlPlane` and `ToolExecutor` traits are the seams.

pub mod agent;
pub mod cli;
pub mod control;
pub(crate) mod mcp;
pub(crate) mod memory;
pub(crate) mod middleware;
pub mod model;
pub mod plan;
pub mod pod;
pub(crate) mod prompt;
pub mod runtime;
pub(crate) mod skills;
pub(crate) mod tag_escaping;
pub mod telemetry;
pub mod thread;
pub mod tools;

#[cfg(test)]
pub(crate) mod test_doubles;
