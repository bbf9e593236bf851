//! The confined sandbox of `herd-runner run`: a `herd-runner sandbox` child confined like a
//! Run's `sandbox` container (see `confine`), reached through the same unix-socket executor
//! as in a pod. The runner binds the socket on the host and hands it over as the child's
//! standard input; the child lives as long as this value (and dies with the runner).
//!
//! Two views ([`View`]): private namespaces plus Landlock (the pod's paths, the home folders
//! hidden), or Landlock alone where user namespaces are refused (inside a container): the
//! host's own paths, mapped like the in-process sandbox's, the home folder readable.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::executor::ToolExecutor;
use super::socket::UnixSocketExecutor;

/// Confinement does not work here, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// How a local sandbox is confined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Private user and mount namespaces, then Landlock: the pod's view.
    Namespaces,
    /// Landlock alone over the host's tree: writes only to the work folder and `/tmp`.
    LandlockOnly,
}

/// Where writes are allowed with Landlock alone, besides the work folder.
#[cfg(target_os = "linux")]
const HOST_TMP: &str = "/tmp";

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
    /// Whether `view` works here, found out by confining a throw-away child of `exe` (a
    /// `herd-runner` binary) over scratch folders.
    #[cfg(target_os = "linux")]
    pub async fn probe(exe: &Path, view: View) -> Result<(), Unavailable> {
        let exe = exe.to_path_buf();
        tokio::task::spawn_blocking(move || {
            super::confine::probe(&exe, |user_data, skills| spec(view, user_data, skills))
                .map_err(Unavailable)
        })
        .await
        .map_err(|error| Unavailable(format!("the probe failed: {error}")))?
    }

    /// Elsewhere there are no namespaces and no Landlock.
    #[cfg(not(target_os = "linux"))]
    pub async fn probe(_exe: &Path, _view: View) -> Result<(), Unavailable> {
        Err(Unavailable(
            "confinement needs Linux (user namespaces and Landlock)".to_owned(),
        ))
    }

    /// Starts the sandbox of the work folder `root` (`user-data/`, `skills/`) with `exe` (a
    /// `herd-runner` binary) confined as `view` says (probe it first), and waits for its
    /// first answer.
    #[cfg(target_os = "linux")]
    pub async fn start(exe: &Path, root: &Path, view: View) -> Result<Self, Unavailable> {
        use std::os::fd::OwnedFd;
        use std::process::Stdio;

        use super::client::SandboxClient;
        use super::paths::SandboxRoots;

        let failed = |what: &str, error: &dyn std::fmt::Display| {
            Unavailable(format!(
                "cannot start the confined sandbox: {what}: {error}"
            ))
        };
        // The child changes its working directory before it reads any of these paths.
        let root = std::fs::canonicalize(root)
            .map_err(|e| failed(&format!("finding {}", root.display()), &e))?;
        let roots = SandboxRoots::under(&root);
        let skills = root.join("skills");
        let socket_dir = tempfile::Builder::new()
            .prefix("herd-sandbox-")
            .tempdir()
            .map_err(|e| failed("creating the socket folder", &e))?;
        let socket = socket_dir.path().join("sandbox.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket)
            .map_err(|e| failed("binding the socket", &e))?;
        let spec = spec(view, &roots.user_data, &skills);
        let mut command = tokio::process::Command::from(
            spec.command(exe)
                .map_err(|e| failed("describing the confinement", &e))?,
        );
        // In namespaces the work folder is at its pod path; with Landlock alone the sandbox
        // maps the pod's paths onto the host's.
        let sandbox_root = match view {
            View::Namespaces => Path::new("/mnt"),
            View::LandlockOnly => root.as_path(),
        };
        command
            .args(["sandbox", "--listen-stdin", "--root"])
            .arg(sandbox_root)
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
    pub async fn start(_exe: &Path, _root: &Path, _view: View) -> Result<Self, Unavailable> {
        Err(Unavailable(
            "confinement needs Linux (user namespaces and Landlock)".to_owned(),
        ))
    }

    /// The executor that reaches it.
    pub fn executor(&self) -> Arc<dyn ToolExecutor> {
        self.executor.clone()
    }

    /// Stops the child as a Pod's sandbox is stopped: SIGTERM, on which it gives its commands
    /// SIGTERM and a moment, then SIGKILL, and exits; killed if it is still there after
    /// `grace` and a second more.
    pub async fn stop(self, grace: Duration) {
        #[cfg(target_os = "linux")]
        {
            let mut child = self._child;
            let pid = child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .and_then(rustix::process::Pid::from_raw);
            if let Some(pid) = pid {
                // Gone already: nothing to stop.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            let waited = grace + Duration::from_secs(1);
            if tokio::time::timeout(waited, child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = grace;
    }
}

/// The confinement of `view` over a work folder's `user_data` and `skills`.
#[cfg(target_os = "linux")]
fn spec(view: View, user_data: &Path, skills: &Path) -> super::confine::Confinement {
    use super::confine::Confinement;
    match view {
        View::Namespaces => Confinement::sandbox_container(user_data, skills),
        View::LandlockOnly => {
            Confinement::landlock_only(vec![user_data.to_path_buf(), HOST_TMP.into()])
        }
    }
}
