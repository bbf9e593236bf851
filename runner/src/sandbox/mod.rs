//! The sandbox: virtual paths, the sandbox tools, and the executors that reach them.

pub mod args;
#[cfg(target_os = "linux")]
pub mod confine;
pub mod confined;
pub mod executor;
mod framework;
pub mod in_process;
pub mod local;
mod mask;
pub mod paths;
pub mod protocol;
mod realpath;
pub mod socket;
pub mod tools;
mod walk;

pub use in_process::InProcessExecutor;
pub use local::Sandbox;
pub use paths::SandboxRoots;
pub use socket::{UnixSocketExecutor, serve};
