//! The agent side's typed view of the sandbox: one method per request, each answer checked
//! here once instead of by every caller. Every `ToolExecutor` (in-process, the unix socket,
//! test doubles) has these methods.

use async_trait::async_trait;
use base64::Engine as _;

use super::executor::ToolExecutor;
use super::protocol::{
    InputCopy, SandboxRequest, SandboxResponse, SavedFile, SkillFile, UploadedFile,
};
use super::tools::ToolReply;

/// Why a sandbox request gave no answer of the kind it asks for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The sandbox could not be reached or broke off (socket gone, crashed, another
    /// protocol version).
    #[error("{0}")]
    Unavailable(String),
    /// The sandbox refused or failed the request (bad path, file too large...): its message,
    /// fit for the model.
    #[error("{0}")]
    Refused(String),
    /// An answer of another kind than the request calls for.
    #[error("the sandbox gave an unexpected answer to {request}: {answer}")]
    Unexpected { request: String, answer: String },
}

/// A whole file read from the sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileContent {
    /// Base64 of the bytes.
    pub data_base64: String,
    pub size: u64,
}

/// What the sandbox knows about a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    pub exists: bool,
    pub size: u64,
    /// Of a regular file's bytes.
    pub sha256: Option<String>,
}

/// Typed requests to the sandbox.
#[async_trait]
pub trait SandboxClient: ToolExecutor {
    /// Creates `workspace/`, `uploads/` and `outputs/`.
    async fn prepare(&self) -> Result<(), SandboxError> {
        match ask(self, SandboxRequest::Prepare, "prepare").await? {
            SandboxResponse::Done { .. } => Ok(()),
            other => Err(unexpected("prepare", &other)),
        }
    }

    /// Every `SKILL.md` under `/mnt/skills/{public,custom}/*/`.
    async fn list_skills(&self) -> Result<Vec<SkillFile>, SandboxError> {
        match ask(self, SandboxRequest::ListSkills, "list_skills").await? {
            SandboxResponse::Skills { skills } => Ok(skills),
            other => Err(unexpected("list_skills", &other)),
        }
    }

    /// The files in `uploads/`.
    async fn list_uploads(&self) -> Result<Vec<UploadedFile>, SandboxError> {
        match ask(self, SandboxRequest::ListUploads, "list_uploads").await? {
            SandboxResponse::Uploads { files } => Ok(files),
            other => Err(unexpected("list_uploads", &other)),
        }
    }

    /// The virtual paths of the files under `outputs/` (hidden ones left out), sorted.
    async fn list_outputs(&self) -> Result<Vec<String>, SandboxError> {
        match ask(self, SandboxRequest::ListOutputs, "list_outputs").await? {
            SandboxResponse::Outputs { paths } => Ok(paths),
            other => Err(unexpected("list_outputs", &other)),
        }
    }

    /// Copies the Run's inputs into `uploads/`.
    async fn install_inputs(&self, inputs: Vec<InputCopy>) -> Result<(), SandboxError> {
        let request = SandboxRequest::InstallInputs { inputs };
        match ask(self, request, "install_inputs").await? {
            SandboxResponse::Done { .. } => Ok(()),
            other => Err(unexpected("install_inputs", &other)),
        }
    }

    /// A whole file, refused when it is larger than `max_bytes`.
    async fn read_file(&self, path: &str, max_bytes: u64) -> Result<FileContent, SandboxError> {
        let request = SandboxRequest::ReadFile {
            path: path.to_owned(),
            max_bytes,
        };
        match ask(self, request, "read_file").await? {
            SandboxResponse::File { data_base64, size } => Ok(FileContent { data_base64, size }),
            other => Err(unexpected("read_file", &other)),
        }
    }

    /// Whether `path` exists, its size and hash.
    async fn file_info(&self, path: &str) -> Result<FileInfo, SandboxError> {
        let request = SandboxRequest::FileInfo {
            path: path.to_owned(),
        };
        match ask(self, request, "file_info").await? {
            SandboxResponse::FileInfo {
                exists,
                size,
                sha256,
            } => Ok(FileInfo {
                exists,
                size,
                sha256,
            }),
            other => Err(unexpected("file_info", &other)),
        }
    }

    /// Writes a file the runner produced under `outputs/`; the virtual path written.
    async fn write_output(&self, path: &str, content: String) -> Result<String, SandboxError> {
        let request = SandboxRequest::WriteOutput {
            path: path.to_owned(),
            content,
        };
        match ask(self, request, "write_output").await? {
            SandboxResponse::Done { path: written } => {
                Ok(written.unwrap_or_else(|| path.to_owned()))
            }
            other => Err(unexpected("write_output", &other)),
        }
    }

    /// Writes `bytes` (binary allowed) under `outputs/`; the virtual path written.
    async fn write_output_bytes(&self, path: &str, bytes: &[u8]) -> Result<String, SandboxError> {
        let request = SandboxRequest::WriteOutputBytes {
            path: path.to_owned(),
            data_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
        };
        match ask(self, request, "write_output_bytes").await? {
            SandboxResponse::Done { path: written } => {
                Ok(written.unwrap_or_else(|| path.to_owned()))
            }
            other => Err(unexpected("write_output_bytes", &other)),
        }
    }

    /// Every file under `workspace/` and `outputs/`, refused over `max_bytes` in all.
    async fn save_files(&self, max_bytes: u64) -> Result<Vec<SavedFile>, SandboxError> {
        match ask(self, SandboxRequest::SaveFiles { max_bytes }, "save_files").await? {
            SandboxResponse::SavedFiles { files } => Ok(files),
            other => Err(unexpected("save_files", &other)),
        }
    }

    /// Writes saved files back.
    async fn restore_files(&self, files: Vec<SavedFile>) -> Result<(), SandboxError> {
        match ask(
            self,
            SandboxRequest::RestoreFiles { files },
            "restore_files",
        )
        .await?
        {
            SandboxResponse::Done { .. } => Ok(()),
            other => Err(unexpected("restore_files", &other)),
        }
    }

    /// Runs the sandbox tool `name` with the model's arguments.
    async fn run_tool(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<ToolReply, SandboxError> {
        let request = SandboxRequest::Tool {
            name: name.to_owned(),
            arguments,
        };
        match ask(self, request, name).await? {
            SandboxResponse::ToolResult {
                content,
                is_error,
                meta,
            } => Ok(ToolReply {
                content,
                is_error,
                meta,
            }),
            other => Err(unexpected(name, &other)),
        }
    }
}

impl<E: ToolExecutor + ?Sized> SandboxClient for E {}

/// Sends `request`; an executor failure is `Unavailable`, a refusal `Refused`.
async fn ask<E: ToolExecutor + ?Sized>(
    executor: &E,
    request: SandboxRequest,
    what: &str,
) -> Result<SandboxResponse, SandboxError> {
    match executor.execute(request).await {
        Ok(SandboxResponse::Error { message }) => Err(SandboxError::Refused(message)),
        Ok(answer) => Ok(answer),
        Err(error) => {
            tracing::debug!(request = what, %error, "the sandbox did not answer");
            Err(SandboxError::Unavailable(error.to_string()))
        }
    }
}

fn unexpected(request: &str, answer: &SandboxResponse) -> SandboxError {
    SandboxError::Unexpected {
        request: request.to_owned(),
        answer: format!("{answer:?}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::in_process::InProcessExecutor;
    use crate::testing::FakeExecutor;
    use crate::{SandboxHost, SandboxRoots};

    #[tokio::test]
    async fn answers_of_the_right_kind_come_back_typed() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let roots = SandboxRoots::under(dir.path());
        std::fs::create_dir_all(roots.skills_public.join("research"))?;
        std::fs::write(
            roots.skills_public.join("research/SKILL.md"),
            "---\nname: research\n---\n",
        )?;
        let sandbox = InProcessExecutor(Arc::new(SandboxHost::new(&roots)?));
        sandbox.prepare().await?;
        assert_eq!(sandbox.list_skills().await?.len(), 1);
        assert!(sandbox.list_uploads().await?.is_empty());
        let written = sandbox.write_output("notes/a.txt", "hello".into()).await?;
        assert_eq!(written, "/mnt/user-data/outputs/notes/a.txt");
        let binary = sandbox
            .write_output_bytes("child/chart.png", b"\x89PNG\0")
            .await?;
        assert_eq!(binary, "/mnt/user-data/outputs/child/chart.png");
        assert_eq!(
            std::fs::read(roots.user_data.join("outputs/child/chart.png"))?,
            b"\x89PNG\0"
        );
        let info = sandbox.file_info(&written).await?;
        assert!(info.exists && info.size == 5 && info.sha256.is_some());
        assert_eq!(sandbox.read_file(&written, 100).await?.size, 5);
        let reply = sandbox
            .run_tool(
                "ls",
                serde_json::json!({"description": "d", "path": "/mnt/user-data"}),
            )
            .await?;
        assert!(
            !reply.is_error && reply.content.contains("outputs"),
            "{reply:?}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn refusals_outages_and_odd_answers_are_told_apart() {
        let refusing = FakeExecutor::answering(SandboxResponse::Error {
            message: "Error: too large".into(),
        });
        assert_eq!(
            refusing.read_file("/x", 1).await,
            Err(SandboxError::Refused("Error: too large".into()))
        );
        let error = FakeExecutor::down("connection refused")
            .list_skills()
            .await
            .unwrap_err();
        assert_eq!(
            error,
            SandboxError::Unavailable("sandbox unavailable: connection refused".into())
        );
        let odd = FakeExecutor::answering(SandboxResponse::Done { path: None });
        let error = odd.list_uploads().await.unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("the sandbox gave an unexpected answer to list_uploads: Done"),
            "{error}"
        );
        let error = odd
            .run_tool("bash", serde_json::json!({}))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("answer to bash"), "{error}");
    }
}
