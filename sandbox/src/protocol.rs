//! What the `agent` side asks of the sandbox, and what it gets back.
//!
//! The same enum travels in-process (`herd-runner run`) and as JSON lines over the unix socket
//! between the pod's `agent` and `sandbox` containers, so both paths run the same code. The
//! records the requests and answers carry (an upload, an input to copy, a saved file, a stdio
//! program) are here too: both sides speak them, and nothing else defines them.

use herd_crds::report::SandboxLayer;
use serde::{Deserialize, Serialize};

/// The version of these requests and answers. A custom `sandbox.image` carries its own
/// `herd-runner`, maybe another version: the socket client checks this first (`Hello`) and
/// refuses a sandbox that speaks another one. Raise it with every change to the enums below.
pub const PROTOCOL_VERSION: u32 = 6;

/// This build's version, named when the protocols differ.
pub const RUNNER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A request to the sandbox.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SandboxRequest {
    /// The handshake: the versions the agent side speaks; answered with the sandbox's.
    Hello { protocol: u32, runner: String },
    /// Creates `workspace/`, `uploads/` and `outputs/` if missing.
    Prepare,
    /// Runs one sandbox tool (`bash`, `ls`, `read_file`, `write_file`, `str_replace`, `glob`,
    /// `grep`) with the model's arguments.
    Tool {
        name: String,
        arguments: serde_json::Value,
    },
    /// Lists every `SKILL.md` under `/mnt/skills/{public,custom}/*/`.
    ListSkills,
    /// Lists the files in `uploads/`.
    ListUploads,
    /// Lists every file under `outputs/` (hidden ones left out): what a child Run hands back.
    ListOutputs,
    /// Copies the Run's inputs from their mounts (`/mnt/inputs/<i>`) into `uploads/`.
    InstallInputs { inputs: Vec<InputCopy> },
    /// Reads a whole file (presented files, images), refusing files over `max_bytes`.
    ReadFile { path: String, max_bytes: u64 },
    /// Size and SHA-256 of a file, or that it does not exist.
    FileInfo { path: String },
    /// Writes a file the framework produced (e.g. an externalized tool result) under
    /// `outputs/`, creating folders; returns its virtual path.
    WriteOutput { path: String, content: String },
    /// Writes bytes (binary allowed) under `outputs/` as `WriteOutput` does: the files a child
    /// Run presented, which the parent's runner fetched from the run API.
    WriteOutputBytes { path: String, data_base64: String },
    /// Reads every file under `workspace/` and `outputs/` (a Pod that suspends saves them
    /// with its checkpoint), refused over `max_bytes` in all.
    SaveFiles { max_bytes: u64 },
    /// Writes saved files back (the attempt that resumes a suspended Run).
    RestoreFiles { files: Vec<SavedFile> },
    /// Starts a stdio program (an MCP server). Only as the first request after `Hello` on a
    /// connection: answered with `StdioStarted`, after which the connection carries the
    /// program's standard input and output, byte for byte, until either side closes it.
    SpawnStdio { command: StdioCommand },
    /// The last lines a program started by `SpawnStdio` wrote to its standard error, once it
    /// ended or after a moment (`stderr` of its `StdioStarted`).
    StdioStderr { handle: u64 },
}

impl SandboxRequest {
    /// The request's `op`, as on the wire (`tool`, `read_file`...), for its span.
    pub fn op(&self) -> &'static str {
        match self {
            SandboxRequest::Hello { .. } => "hello",
            SandboxRequest::Prepare => "prepare",
            SandboxRequest::Tool { .. } => "tool",
            SandboxRequest::ListSkills => "list_skills",
            SandboxRequest::ListUploads => "list_uploads",
            SandboxRequest::ListOutputs => "list_outputs",
            SandboxRequest::InstallInputs { .. } => "install_inputs",
            SandboxRequest::ReadFile { .. } => "read_file",
            SandboxRequest::FileInfo { .. } => "file_info",
            SandboxRequest::WriteOutput { .. } => "write_output",
            SandboxRequest::WriteOutputBytes { .. } => "write_output_bytes",
            SandboxRequest::SaveFiles { .. } => "save_files",
            SandboxRequest::RestoreFiles { .. } => "restore_files",
            SandboxRequest::SpawnStdio { .. } => "spawn_stdio",
            SandboxRequest::StdioStderr { .. } => "stdio_stderr",
        }
    }
}

/// A SKILL.md found in the sandbox, unparsed (the agent side validates the frontmatter).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SkillFile {
    /// `public` or `custom`.
    pub category: String,
    /// The skill's folder name.
    pub dir_name: String,
    /// Virtual path of the SKILL.md, e.g. `/mnt/skills/public/research/SKILL.md`.
    pub path: String,
    pub content: String,
}

/// The sandbox's answer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SandboxResponse {
    /// The versions the sandbox speaks, and the layers of isolation it holds (see
    /// `confine::layers`; none from a sandbox that cannot say, e.g. in-process).
    Hello {
        protocol: u32,
        runner: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        layers: Vec<SandboxLayer>,
    },
    /// `Prepare`, `WriteOutput` and `WriteOutputBytes` done; `path` is the virtual path written, if any.
    Done {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// A tool ran. `is_error` results go back to the model as error results.
    ToolResult {
        content: String,
        is_error: bool,
        /// Facts the middlewares use, e.g. `sha256` of a file `read_file` read.
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        meta: serde_json::Map<String, serde_json::Value>,
    },
    Skills {
        skills: Vec<SkillFile>,
    },
    Uploads {
        files: Vec<UploadedFile>,
    },
    /// The virtual paths of the files under `outputs/`, sorted.
    Outputs {
        paths: Vec<String>,
    },
    File {
        /// Base64 of the file's bytes.
        data_base64: String,
        size: u64,
    },
    FileInfo {
        exists: bool,
        #[serde(default)]
        size: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
    },
    /// `SaveFiles`: the files, sorted by folder then path.
    SavedFiles {
        files: Vec<SavedFile>,
    },
    /// `SpawnStdio` started the program; the connection is its pipe from now on. `stderr`
    /// names the program in a later `StdioStderr`.
    StdioStarted {
        stderr: u64,
    },
    /// The last lines of a program's standard error (see `stderr_tail` for the limits).
    StdioStderr {
        lines: Vec<String>,
    },
    /// The request was refused or failed (bad path, file too large...): a message for the model.
    Error {
        message: String,
    },
}

/// A file placed in `uploads/` for the run (Run `inputs`, or `--input` locally).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct UploadedFile {
    /// File name inside `uploads/`.
    pub filename: String,
    /// Virtual path, `/mnt/user-data/uploads/<filename>`.
    pub path: String,
    pub size: u64,
}

/// One input to copy: the files of `/mnt/inputs/<index>` into `uploads/<path>` (`uploads/`
/// itself without a path).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct InputCopy {
    /// The input's index in `spec.inputs` (its mount `/mnt/inputs/<index>`).
    pub index: usize,
    /// The folder under `uploads/` (`spec.inputs[].path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// One file of the workspace as a suspended Run keeps it (see `saved_files`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SavedFile {
    /// Its virtual path, under `/mnt/user-data/workspace/` or `/mnt/user-data/outputs/`.
    pub path: String,
    /// Base64 of its bytes.
    pub data_base64: String,
    /// Whether it was executable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub executable: bool,
}

/// A stdio program to start (an MCP server): its argv (virtual paths allowed) and extra
/// environment variables.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct StdioCommand {
    /// Names the program in the sandbox's log, e.g. the MCP server's name.
    pub label: String,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl StdioCommand {
    /// The program's name, for messages.
    pub fn program(&self) -> String {
        self.argv.first().cloned().unwrap_or_default()
    }
}
