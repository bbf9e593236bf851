//! Herd's sandbox: where a Run's tools execute, and the seam the agent reaches it through.
//!
//! The agent side sees a [`ToolExecutor`] (one request, one answer: [`SandboxRequest`],
//! [`SandboxResponse`]) and its typed view [`SandboxClient`]. Behind it the sandbox runs in
//! the same process ([`InProcessExecutor`] over a [`SandboxHost`]), in a pod's `sandbox`
//! container reached over a unix socket ([`UnixSocketExecutor`]; the container runs
//! [`serve`]), or in a confined child of a local run ([`ConfinedSandbox`]). The same requests
//! and the same code answer them everywhere. See `docs/runner.md`.
//!
//! Everything else (virtual paths, the tools, file services, uploads and their conversion,
//! confinement) is this crate's own: the public items are the ones re-exported below, and the
//! lint keeps every other `pub` from leaking out.

#![warn(unreachable_pub)]

mod args;
mod client;
#[cfg(target_os = "linux")]
mod confine;
mod confined;
mod convert;
mod dispatch;
mod executor;
mod file_services;
mod host;
mod in_process;
mod inputs;
mod io_error;
mod mask;
mod paths;
mod process_groups;
mod protocol;
mod realpath;
mod saved_files;
mod serve;
mod socket;
mod stderr_tail;
mod stdio;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
mod tools;
pub mod truncation;
mod walk;

// What the agent side and the sandbox say to each other.
pub use protocol::{
    InputCopy, PROTOCOL_VERSION, RUNNER_VERSION, SandboxRequest, SandboxResponse, SavedFile,
    SkillFile, StdioCommand, UploadedFile,
};

// The agent side: the executor seam, its typed view, and what it hands back.
pub use client::{FileContent, FileInfo, SandboxClient, SandboxError};
pub use executor::{ExecutorError, ToolExecutor};
pub use stdio::{StdioError, StdioPipe};
pub use tools::{ToolReply, names as tool_names};

// The model-facing tools' arguments (their schemas are what the model sees).
pub use args::{BashArgs, GlobArgs, GrepArgs, LsArgs, ReadFileArgs, StrReplaceArgs, WriteFileArgs};

// The virtual paths the model and the framework name.
pub use paths::{
    OUTPUTS, PathError, SKILLS_CUSTOM, SKILLS_PUBLIC, SandboxRoots, UPLOADS, WORKSPACE,
    below_outputs,
};

// Uploads converted to Markdown, and the record of it the agent side reads.
pub use convert::uploads::{Conversions, MAX_SIDECAR_BYTES, Outcome, SIDECAR, convert_uploads};

// Where the sandbox runs: in this process, over a socket, or in a confined child.
pub use confined::{ConfinedSandbox, Unavailable, View};
pub use host::SandboxHost;
pub use in_process::InProcessExecutor;
pub use process_groups::{ProcessGroups, TOOL_GRACE};
pub use socket::{SocketOptions, UnixSocketExecutor, bind_listener};

// `herd-runner sandbox`.
pub use serve::{Listener, restrict_pod_sandbox, serve};

// A confined child's entry, called first thing in `main`.
#[cfg(target_os = "linux")]
pub use confine::{Entry, enter_if_requested};

// A Pod's containers as the e2e suite's kubelet runs them.
#[cfg(target_os = "linux")]
pub use confine::{
    Bind, ConfineError, ContainerRoot, ProcView, Symlink, Tmpfs, init_container, join_container,
};
