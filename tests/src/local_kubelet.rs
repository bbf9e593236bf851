//! A `local-kubelet` for one test: it takes the Pods of the test's namespace, keeps its state
//! and log in a folder of its own, and dies with the test (see [`crate::process`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use crate::TestEnv;
use crate::cluster::Cluster;
use crate::process::Server;
use crate::wait::wait_for;

/// The server's name: its log is `local-kubelet.log`.
const NAME: &str = "local-kubelet";

/// What the kubelet logs once its node is ready and it watches Pods.
const READY_LINE: &str = "is ready; taking Pods from";

/// A running `local-kubelet`; dropping it kills it (and its containers).
#[derive(Debug)]
pub struct LocalKubelet {
    server: Server,
    state: PathBuf,
}

impl LocalKubelet {
    /// Starts `exe` (the test's `CARGO_BIN_EXE_local-kubelet`) for the Pods of the test's
    /// namespace, and waits until it is ready. Its log is attached to the test, and its
    /// folder kept until the test's report is written.
    pub async fn start(env: &TestEnv, exe: &Path) -> anyhow::Result<LocalKubelet> {
        let dir = tempfile::Builder::new()
            .prefix("herd-e2e-kubelet-")
            .tempdir()
            .context("a folder for local-kubelet")?;
        let folder = dir.path().to_path_buf();
        env.hold(dir);
        env.attach_log(Server::log_file(&folder, NAME));
        Self::start_in(&folder, env.cluster(), env.namespace(), exe).await
    }

    /// Starts `exe` for the Pods of `namespace` with its state and log in `folder`, and waits
    /// until it is ready: for a benchmark, which has no test to attach them to.
    pub async fn start_in(
        folder: &Path,
        cluster: &Cluster,
        namespace: &str,
        exe: &Path,
    ) -> anyhow::Result<LocalKubelet> {
        let state = folder.join("state");
        let args = [
            "--kubeconfig".to_owned(),
            cluster.kubeconfig().display().to_string(),
            "--namespace".to_owned(),
            namespace.to_owned(),
            "--state-dir".to_owned(),
            state.display().to_string(),
        ];
        let mut server = Server::start(NAME, folder, exe, &args)?;
        let log = server.log().to_path_buf();
        wait_for("local-kubelet to be ready", Duration::from_secs(30), || {
            let running = server.check_running();
            let log = log.clone();
            async move {
                running?;
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                Ok(text.contains(READY_LINE).then_some(()))
            }
        })
        .await?;
        Ok(LocalKubelet { server, state })
    }

    /// `Err` with the end of its log when it has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        self.server.check_running()
    }

    /// Its state folder: each Pod's volumes, and each container's `output.log` and
    /// `termination-log`.
    pub fn state(&self) -> &Path {
        &self.state
    }

    /// Its log (container output included, each line prefixed with `namespace/pod/container`).
    pub fn log(&self) -> &Path {
        self.server.log()
    }
}
