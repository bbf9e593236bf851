//! The confined sandbox of `herd-runner run`: a `herd-runner sandbox` child confined like a
//! Run's `sandbox` container (see `confine`), reached through the same unix-socket executor
//! as in a pod. The runner binds the socket on the host and hands it over as the child's
//! standard input; the child lives as long as this value (and dies with the runner).

use std::path::Path;
use std::sync::Arc;

use super::executor::ToolExecutor;
use super::socket::UnixSocketExecutor;

/// Confinement does not work here, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// A running confined sandbox.
#[derive(Debug)]
pub struct ConfinedSandbox {
    executor: Arc<UnixSocketExecutor>,
    #[cfg(target_os = "linux")]
    _child: tokio::process::Child,
    #[cfg(target_os = "linux")]
    _socket_dir: tempfile::TempDir,
}

impl ConfinedSandbox {
    /// Probes confinement with `exe` (a `herd-runner` binary), then starts the sandbox over
    /// `user_data` (at `/mnt/user-data`) and `skills` (at `/mnt/skills`, read-only), and
    /// waits for its first answer.
    #[cfg(target_os = "linux")]
    pub async fn start(exe: &Path, user_data: &Path, skills: &Path) -> Result<Self, Unavailable> {
        use std::os::fd::OwnedFd;
        use std::process::Stdio;
        use std::time::Duration;

        use super::client::SandboxClient;
        use super::confine::{self, Confinement};

        let probe_exe = exe.to_path_buf();
        tokio::task::spawn_blocking(move || confine::probe(&probe_exe))
            .await
            .map_err(|error| Unavailable(format!("the probe failed: {error}")))??;

        let failed = |what: &str, error: &dyn std::fmt::Display| {
            Unavailable(format!(
                "cannot start the confined sandbox: {what}: {error}"
            ))
        };
        let socket_dir = tempfile::Builder::new()
            .prefix("herd-sandbox-")
            .tempdir()
            .map_err(|e| failed("creating the socket folder", &e))?;
        let socket = socket_dir.path().join("sandbox.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket)
            .map_err(|e| failed("binding the socket", &e))?;
        let spec = Confinement::sandbox_container(user_data, skills);
        let mut command = tokio::process::Command::from(
            spec.command(exe)
                .map_err(|e| failed("describing the confinement", &e))?,
        );
        command
            .args(["sandbox", "--listen-stdin", "--root", "/mnt"])
            .stdin(Stdio::from(OwnedFd::from(listener)))
            .stdout(Stdio::null())
            .kill_on_drop(true);
        let spawned = command.spawn();
        // The command holds this process's copy of the listener; without it, the socket
        // closes when the child dies instead of leaving requests unanswered.
        drop(command);
        let mut child = spawned.map_err(|e| failed(&exe.display().to_string(), &e))?;
        let executor = UnixSocketExecutor::connect(&socket)
            .await
            .map_err(|e| failed("connecting", &e))?;
        let first_answer = async {
            tokio::select! {
                answer = executor.prepare() => {
                    answer.map_err(|error| failed("preparing the work folder", &error))
                }
                status = child.wait() => Err(match status {
                    Ok(status) => failed("the sandbox exited", &status),
                    Err(error) => failed("the sandbox exited", &error),
                }),
            }
        };
        tokio::time::timeout(Duration::from_secs(30), first_answer)
            .await
            .map_err(|e| failed("waiting for the sandbox", &e))??;
        Ok(ConfinedSandbox {
            executor: Arc::new(executor),
            _child: child,
            _socket_dir: socket_dir,
        })
    }

    /// Elsewhere there are no namespaces and no Landlock.
    #[cfg(not(target_os = "linux"))]
    pub async fn start(
        _exe: &Path,
        _user_data: &Path,
        _skills: &Path,
    ) -> Result<Self, Unavailable> {
        Err(Unavailable(
            "confinement needs Linux (user namespaces and Landlock)".to_owned(),
        ))
    }

    /// The executor that reaches it.
    pub fn executor(&self) -> Arc<dyn ToolExecutor> {
        self.executor.clone()
    }
}
