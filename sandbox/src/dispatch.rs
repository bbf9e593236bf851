//! Answers every `SandboxRequest` against a [`SandboxHost`]: the tools, the framework's file
//! requests, the inputs' copy, saving and restoring files, and the tails of stdio programs'
//! standard error.

use std::time::Duration;

use super::file_services;
use super::host::SandboxHost;
use super::inputs::install_inputs;
use super::protocol::{PROTOCOL_VERSION, RUNNER_VERSION, SandboxRequest, SandboxResponse};
use super::saved_files;
use super::tools;
use super::tools::names::BASH;

/// How long `StdioStderr` waits for a program's standard error to end: a program that just
/// exited may still have lines in its pipe.
const STDERR_WAIT: Duration = Duration::from_secs(2);

impl SandboxHost {
    /// Answers one request. Never panics; failures are `Error` or error `ToolResult`s.
    pub(crate) async fn handle(&self, request: SandboxRequest) -> SandboxResponse {
        if let SandboxRequest::Tool { name, arguments } = &request
            && name == BASH
        {
            return tools::bash::run(self, arguments.clone())
                .await
                .into_response(self.paths());
        }
        if let SandboxRequest::StdioStderr { handle } = request {
            let lines = self.stderr_tails().lines(handle, STDERR_WAIT).await;
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
                layers: self.layers().to_vec(),
            },
            SandboxRequest::Prepare => file_services::prepare(self.paths()),
            SandboxRequest::Tool { name, arguments } => {
                tools::run_file_tool(self, &name, arguments).into_response(self.paths())
            }
            SandboxRequest::ListSkills => file_services::list_skills(self.paths()),
            SandboxRequest::ListUploads => file_services::list_uploads(self.paths()),
            SandboxRequest::ListOutputs => file_services::list_outputs(self.paths()),
            SandboxRequest::InstallInputs { inputs } => {
                install_inputs(self.paths(), self.inputs(), &inputs)
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
