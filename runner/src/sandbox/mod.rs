//! The sandbox: virtual paths, the sandbox tools, and the executors that reach them.

pub(crate) mod args;
#[cfg(target_os = "linux")]
pub mod confine;
pub(crate) mod confined;
pub(crate) mod executor;
mod framework;
pub mod in_process;
pub(crate) mod local;
mod mask;
pub(crate) mod paths;
pub(crate) mod protocol;
mod realpath;
pub(crate) mod socket;
pub(crate) mod tools;
mod walk;

pub use in_process::InProcessExecutor;
pub use local::Sandbox;
pub use paths::SandboxRoots;
pub use socket::{UnixSocketExecutor, serve};
