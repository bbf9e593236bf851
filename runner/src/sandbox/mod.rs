//! The sandbox: virtual paths, the sandbox tools, and the executors that reach them.

pub(crate) mod args;
pub(crate) mod client;
#[cfg(target_os = "linux")]
pub mod confine;
pub(crate) mod confined;
pub(crate) mod executor;
mod file_services;
pub(crate) mod host;
pub mod in_process;
pub(crate) mod inputs;
mod mask;
pub(crate) mod paths;
pub(crate) mod process_groups;
pub(crate) mod protocol;
mod realpath;
pub(crate) mod saved_files;
pub(crate) mod socket;
pub(crate) mod stderr_tail;
pub(crate) mod stdio;
pub(crate) mod tools;
mod walk;

pub use host::SandboxHost;
pub use in_process::InProcessExecutor;
pub use paths::SandboxRoots;
pub use socket::{SocketOptions, UnixSocketExecutor, serve};
