//! The sandbox: virtual paths, the sandbox tools, and the executors that reach them.

pub mod executor;
pub mod paths;
pub mod protocol;
mod realpath;
