//! `local-kubelet`: plays the kubelet for Herd's Pods on a node-less cluster (the e2e suite's
//! control plane, or `../shared/envtest/start`): kube-apiserver and the controller manager,
//! no scheduler, no kubelet.
//!
//! It registers a Node (`herd-e2e-node`, `Ready` through `nodes/status`), binds every Pod of
//! the namespaces it watches that no node has (`pods/binding`), and runs its containers as
//! child processes of itself, each in its own user, mount and PID namespace with a tmpfs
//! root, the host's `/usr`, `/bin`, `/lib*` and `/etc` read-only, and the Pod's volumes at
//! their `mountPath`s ([`runtime`], [`container_view`]). Everything comes from the Pod
//! object: the environment with `secretKeyRef`s ([`env`]), ConfigMap, Secret, projected and
//! downward-API volumes in the kubelet's atomic-writer layout with tokens from TokenRequest
//! bound to the Pod and renewed before they expire ([`pod_volumes`]), the start order with
//! native sidecars and their probes, restarts, `activeDeadlineSeconds` and graceful deletion
//! ([`lifecycle`]), reported through `pods/status` ([`status`]). A container whose command is
//! `herd-runner` runs this very binary under that name (it links `herd-runner`), and so does a
//! container of the operator's image without a command, as `herd-operator` with its `args`
//! ([`image`]; it links `herd-operator`): the chart's Deployment runs as it is. Every container
//! is told the API server's address (`KUBERNETES_SERVICE_HOST`/`PORT`, [`service_env`]) and
//! gets the ServiceAccount volume the API server's admission adds, so in-cluster clients work.
//!
//! What a real node does that this one does not: images (the host's system folders are the
//! only "image", so a container needs a `command`, the operator's excepted), Service
//! variables other than the API server's, `securityContext` users and groups (every
//! process runs as the user of `local-kubelet`; `readOnlyRootFilesystem` is applied),
//! resource limits, `emptyDir` `medium` and `sizeLimit`, network namespaces (containers share
//! the host's network: the Pod's IP is `127.0.0.1`), `kubectl logs`/`exec` (output goes to
//! this process's stderr and to `<state-dir>/pods/<uid>/containers/<name>/output.log`),
//! Events, and containers outliving the kubelet: they die with it, and a Pod whose containers
//! ran under an earlier `local-kubelet` is failed.

mod api;
pub mod atomic_writer;
pub mod container_view;
pub mod env;
pub mod image;
pub mod lifecycle;
mod node;
mod pod_volumes;
mod pods;
pub mod probe_plan;
mod prober;
pub mod runtime;
pub mod service_env;
pub mod status;
pub mod termination;
#[cfg(test)]
mod test_support;
pub mod token;
pub mod volume_plan;
mod worker;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use kube::Api;

use self::runtime::played::Played;

/// The node every `local-kubelet` plays unless told otherwise.
pub const DEFAULT_NODE: &str = "herd-e2e-node";

/// `local-kubelet`'s command line.
#[derive(Debug, Parser)]
#[command(
    name = "local-kubelet",
    about = "Plays the kubelet for the Pods of a node-less test cluster, running their \
             containers as local processes"
)]
struct Args {
    /// The cluster's kubeconfig. Required: the default one usually names a real cluster,
    /// whose pending Pods this would bind and run.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// A namespace to take Pods from (repeat for more); every namespace when none is given.
    #[arg(long = "namespace", short = 'n')]
    namespaces: Vec<String>,
    /// The Node to register and bind Pods to.
    #[arg(long, default_value = DEFAULT_NODE)]
    node_name: String,
    /// Where Pods' volumes, container roots and logs live (default: a folder named after the
    /// node under the temporary folder). What an earlier run left there is removed.
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

/// The binary's `main`: `herd-runner` or `herd-operator` when started under that name (a
/// container's command), a runtime role when the first argument names one, else the kubelet.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match args.first().and_then(|arg0| Played::of(arg0)) {
        Some(Played::Runner) => return herd_runner::cli::process_main(),
        Some(Played::Operator) => return herd_operator::cli::process_main(),
        None => {}
    }
    if let Some(code) = runtime::dispatch(args.get(1..).unwrap_or_default()) {
        return code;
    }
    kubelet_main(Args::parse())
}

fn kubelet_main(args: Args) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LOCAL_KUBELET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("local-kubelet: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("local-kubelet: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let config = crate::kubeconfig::config_from_kubeconfig(&args.kubeconfig).await?;
    let api = service_env::ApiServer::from_url(&config.cluster_url).map_err(anyhow::Error::msg)?;
    let client = kube::Client::try_from(config)?;
    let state = args.state_dir.unwrap_or_else(|| {
        std::env::temp_dir()
            .join("local-kubelet")
            .join(&args.node_name)
    });
    let _lock = lock(&state)?;
    let pods = state.join("pods");
    // The containers of an earlier run died with it; so do their folders.
    if pods.exists() {
        std::fs::remove_dir_all(&pods).with_context(|| format!("emptying {}", pods.display()))?;
    }
    std::fs::create_dir_all(&pods).with_context(|| format!("creating {}", pods.display()))?;
    let machine = node::Machine::read();
    let nodes = Api::all(client.clone());
    node::register(&nodes, &args.node_name, &machine).await?;
    tokio::spawn(node::heartbeat(nodes, args.node_name.clone(), machine));
    let ctx = Arc::new(worker::Context {
        client,
        node: args.node_name.clone(),
        api,
        // The running binary, even after a rebuild replaced its file.
        exe: PathBuf::from("/proc/self/exe"),
        pods,
        claims: state.join("claims"),
    });
    let scope = if args.namespaces.is_empty() {
        "every namespace".to_owned()
    } else {
        format!("namespaces {}", args.namespaces.join(", "))
    };
    tracing::info!(
        "node {} is ready; taking Pods from {scope}; state in {}",
        args.node_name,
        state.display()
    );
    tokio::select! {
        () = pods::run(ctx, &args.namespaces) => anyhow::bail!("the watch of Pods ended"),
        () = shutdown() => {
            tracing::info!("stopping: the containers stop with this process");
            Ok(())
        }
    }
}

/// Locks the state folder so that two kubelets never share it.
fn lock(state: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(state).with_context(|| format!("creating {}", state.display()))?;
    let path = state.join("lock");
    let file = std::fs::File::create(&path).with_context(|| path.display().to_string())?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).with_context(
        || {
            format!(
                "another local-kubelet uses {} (give this one --state-dir)",
                state.display()
            )
        },
    )?;
    Ok(file)
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}
