//! `herd-runner sandbox`: a sandbox over a root folder (`user-data/`, `skills/`, `inputs/`),
//! served on a unix socket until it is stopped. A Pod's sandbox binds its socket and
//! restricts itself with Landlock before the async runtime starts (`bind_listener`,
//! [`restrict_pod_sandbox`]); a local run's confined child is handed its socket as standard
//! input.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use herd_crds::report::SandboxLayer;

use crate::host::SandboxHost;
use crate::paths::SandboxRoots;
use crate::process_groups::TOOL_GRACE;
use crate::socket;

/// Where the sandbox takes its connections.
#[derive(Debug)]
pub enum Listener {
    /// A socket bound before the async runtime started (a Pod's sandbox: `bind_listener`).
    Bound(std::os::unix::net::UnixListener),
    /// The listening socket that is this process's standard input (a local run's confined
    /// sandbox, which cannot create a socket on the host itself).
    Stdin,
    /// Binds this path, replacing a stale socket file.
    Path(PathBuf),
}

/// Serves the sandbox over `root` on `listener`, telling `layers` in its handshake, until
/// `stop` resolves: then the commands still running get SIGTERM and [`TOOL_GRACE`], then
/// SIGKILL, and it returns. The server is only dropped after that, which SIGKILLs what is left
/// of its requests at once. Fails when the sandbox cannot open its folders, bind its socket or
/// accept.
pub async fn serve(
    root: &Path,
    listener: Listener,
    layers: Vec<SandboxLayer>,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let sandbox = SandboxHost::new(&SandboxRoots::under(root))
        .with_context(|| format!("cannot open the sandbox under {}", root.display()))?
        .with_inputs(root.join("inputs"))
        .with_layers(layers);
    let groups = sandbox.process_groups().clone();
    let serving = async {
        match listener {
            Listener::Bound(listener) => socket::serve_listener(listener, sandbox).await,
            Listener::Stdin => socket::serve_stdin(sandbox).await,
            Listener::Path(path) => socket::serve(&path, sandbox).await,
        }
    };
    tokio::pin!(serving);
    tokio::select! {
        served = &mut serving => served,
        () = stop => {
            groups.terminate(TOOL_GRACE).await;
            Ok(())
        }
    }
}

/// Restricts a Pod's sandbox process with Landlock, best effort: writes only to the workspace
/// under `root` and the temp folder. Call it while the process has a single thread, after
/// binding the socket (whose folder stays unwritable); the layers say what holds.
#[cfg(target_os = "linux")]
pub fn restrict_pod_sandbox(root: &Path) -> Vec<SandboxLayer> {
    let user_data = SandboxRoots::under(root).user_data;
    // A rule needs the folder to exist; the sandbox creates its subfolders on `Prepare`.
    if let Err(error) = std::fs::create_dir_all(&user_data) {
        eprintln!("warning: cannot create {}: {error}", user_data.display());
    }
    crate::confine::restrict_pod_sandbox(vec![user_data, std::env::temp_dir()])
}

/// Elsewhere there is no Landlock.
#[cfg(not(target_os = "linux"))]
pub fn restrict_pod_sandbox(_root: &Path) -> Vec<SandboxLayer> {
    Vec::new()
}
