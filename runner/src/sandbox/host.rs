//! The sandbox itself: answers every `SandboxRequest` against the host directories behind the
//! virtual roots. `herd-runner run` calls it in-process; `herd-runner sandbox` serves it on a
//! unix socket in the pod's `sandbox` container.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use herd_crds::report::SandboxLayer;

use super::file_services;
use super::inputs::install_inputs;
use super::paths::{SandboxPaths, SandboxRoots};
use super::process_groups::ProcessGroups;
use super::protocol::{PROTOCOL_VERSION, RUNNER_VERSION, SandboxRequest, SandboxResponse};
use super::saved_files;
use super::stderr_tail::StderrTails;
use super::tools::{self, BASH};

/// DeerFlow's `bash_command_timeout`.
pub const DEFAULT_BASH_TIMEOUT: Duration = Duration::from_secs(600);

/// How long `StdioStderr` waits for a program's standard error to end: a program that just
/// exited may still have lines in its pipe.
const STDERR_WAIT: Duration = Duration::from_secs(2);

/// Executes sandbox requests. Cheap to clone.
#[derive(Clone, Debug)]
pub struct SandboxHost {
    paths: Arc<SandboxPaths>,
    bash_timeout: Duration,
    home: PathBuf,
    /// Where the Run's inputs are mounted (`$HERD_ROOT/inputs`), in a pod's sandbox.
    inputs: Option<PathBuf>,
    /// What the stdio programs started here wrote to their standard error, lately.
    stderr_tails: StderrTails,
    /// The process groups of the commands and programs started here, ended when the
    /// sandbox stops.
    process_groups: ProcessGroups,
    /// The layers of isolation around this sandbox, told in `Hello`.
    layers: Arc<Vec<SandboxLayer>>,
}

impl SandboxHost {
    /// A sandbox over `roots`, with DeerFlow's bash timeout and `HOME` in the temp directory
    /// (in a pod `/tmp`, an emptyDir: git and pip need a writable home).
    pub fn new(roots: &SandboxRoots) -> io::Result<Self> {
        Ok(SandboxHost {
            paths: Arc::new(SandboxPaths::new(roots)?),
            bash_timeout: DEFAULT_BASH_TIMEOUT,
            home: std::env::temp_dir(),
            inputs: None,
            stderr_tails: StderrTails::default(),
            process_groups: ProcessGroups::default(),
            layers: Arc::default(),
        })
    }

    /// Sets how long one `bash` command may run before it is killed.
    pub fn with_bash_timeout(mut self, timeout: Duration) -> Self {
        self.bash_timeout = timeout;
        self
    }

    /// Sets `HOME` for `bash` commands.
    pub fn with_home(mut self, home: PathBuf) -> Self {
        self.home = home;
        self
    }

    /// Sets where the Run's inputs are mounted, one folder per input (`<dir>/<i>`).
    pub fn with_inputs(mut self, dir: PathBuf) -> Self {
        self.inputs = Some(dir);
        self
    }

    /// Sets the layers of isolation this sandbox tells in its `Hello` answer.
    pub fn with_layers(mut self, layers: Vec<SandboxLayer>) -> Self {
        self.layers = Arc::new(layers);
        self
    }

    /// The path mapping.
    pub fn paths(&self) -> &SandboxPaths {
        &self.paths
    }

    /// How long one `bash` command may run.
    pub fn bash_timeout(&self) -> Duration {
        self.bash_timeout
    }

    /// `HOME` for `bash` commands.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The standard error tails of the stdio programs started here.
    pub fn stderr_tails(&self) -> &StderrTails {
        &self.stderr_tails
    }

    /// The process groups started here (shared by every clone).
    pub fn process_groups(&self) -> &ProcessGroups {
        &self.process_groups
    }

    /// Answers one request. Never panics; failures are `Error` or error `ToolResult`s.
    pub async fn handle(&self, request: SandboxRequest) -> SandboxResponse {
        if let SandboxRequest::Tool { name, arguments } = &request
            && name == BASH
        {
            return tools::bash::run(self, arguments.clone())
                .await
                .into_response(self);
        }
        if let SandboxRequest::StdioStderr { handle } = request {
            let lines = self.stderr_tails.lines(handle, STDERR_WAIT).await;
            return SandboxResponse::StdioStderr { lines };
        }
        // File system work blocks; keep it off the runtime's worker threads so parallel tool
        // calls and the socket server stay responsive.
        let sandbox = self.clone();
        tokio::task::spawn_blocking(move || sandbox.handle_blocking(request))
            .await
            .unwrap_or_else(|_| SandboxResponse::Error {
                message: "Error: the sandbox failed while handling this request".to_owned(),
            })
    }

    fn handle_blocking(&self, request: SandboxRequest) -> SandboxResponse {
        match request {
            SandboxRequest::Hello { .. } => SandboxResponse::Hello {
                protocol: PROTOCOL_VERSION,
                runner: RUNNER_VERSION.to_owned(),
                layers: self.layers.to_vec(),
            },
            SandboxRequest::Prepare => file_services::prepare(self.paths()),
            SandboxRequest::Tool { name, arguments } => {
                tools::run_file_tool(self, &name, arguments).into_response(self)
            }
            SandboxRequest::ListSkills => file_services::list_skills(self.paths()),
            SandboxRequest::ListUploads => file_services::list_uploads(self.paths()),
            SandboxRequest::ListOutputs => file_services::list_outputs(self.paths()),
            SandboxRequest::InstallInputs { inputs } => {
                install_inputs(self.paths(), self.inputs.as_deref(), &inputs)
            }
            SandboxRequest::ReadFile { path, max_bytes } => {
                file_services::read_file(self.paths(), &path, max_bytes)
            }
            SandboxRequest::FileInfo { path } => file_services::file_info(self.paths(), &path),
            SandboxRequest::WriteOutput { path, content } => {
                file_services::write_output(self.paths(), &path, content.as_bytes())
            }
            SandboxRequest::WriteOutputBytes { path, data_base64 } => {
                file_services::write_output_base64(self.paths(), &path, &data_base64)
            }
            SandboxRequest::SaveFiles { max_bytes } => {
                saved_files::save_files(self.paths(), max_bytes)
            }
            SandboxRequest::RestoreFiles { files } => {
                saved_files::restore_files(self.paths(), &files)
            }
            // Only a connection can be handed over to a program (`socket::server`).
            SandboxRequest::SpawnStdio { .. } => SandboxResponse::Error {
                message: "Error: SpawnStdio must be the first request on its own connection"
                    .to_owned(),
            },
            // Answered in `handle`, which may wait for the program's stream to end.
            SandboxRequest::StdioStderr { .. } => {
                SandboxResponse::StdioStderr { lines: Vec::new() }
            }
        }
    }
}
