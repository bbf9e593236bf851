//! The end-to-end suite's `main`: starts (or connects to) one API server, installs the CRDs,
//! runs every test in a namespace of its own, and stops the server when the tests are done.
//!
//! Without a server (neither `KUBEBUILDER_ASSETS` nor `HERD_E2E_KUBECONFIG`), the tests are
//! reported as ignored with a message on stderr; with `CI=true` they fail instead, because CI
//! must never pass without having talked to an API server.
//!
//! Two lanes: most tests need only an API server ([`Lane::ApiServer`]: the nodeless control
//! plane, where no Pod runs unless a test starts `local-kubelet`); the tests whose Pods must run
//! ([`Lane::Node`]: the scenarios, the chart, `kubectl herd`) run on the real node
//! `HERD_E2E_NODE` names (`scripts/e2e-node` starts it; see [`crate::node`]). Without one they
//! run on the API server with `local-kubelet` playing the node, and with `CI=true` they fail.

use std::future::Future;
use std::io::Write as _;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, LazyLock, Mutex};

use kube::Client;
use libtest_mimic::{Arguments, Failed, Trial};
use tokio::sync::RwLock;

use crate::cluster::{ASSETS_ENV, Cluster, EXISTING_CLUSTER_ENV, Source};
use crate::namespace::{PodSecurity, create_namespace, delete_namespace};
use crate::node::{NODE_ENV, RealNode};

/// Held shared by every test, and exclusively by a test that runs an operator watching all
/// namespaces (it would take the other tests' Runs): one per cluster.
static CLUSTER_LOCK: LazyLock<RwLock<()>> = LazyLock::new(|| RwLock::new(()));
static NODE_LOCK: LazyLock<RwLock<()>> = LazyLock::new(|| RwLock::new(()));

/// Where a test's Pods run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// The nodeless API server: Pods stay Pending unless the test starts `local-kubelet`.
    ApiServer,
    /// The real node when `HERD_E2E_NODE` names one (required with `CI=true`), else the API
    /// server with `local-kubelet`.
    Node,
    /// The real node only (what `local-kubelet` cannot do: container logs, images, cgroup
    /// limits, eviction); without one the test is ignored, and with `CI=true` it fails.
    RealNode,
}

/// How a test shares the API server with the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Side by side with other shared tests, each in its own namespace.
    Shared,
    /// Alone: e.g. an operator without `--watch-namespaces`.
    Exclusive,
}

type TestFn =
    dyn Fn(TestEnv) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>> + Send + Sync;

/// One end-to-end test: a name (`area::what_it_shows`), its lock, and its body.
pub struct E2eTest {
    name: String,
    lock: Lock,
    lane: Lane,
    body: Arc<TestFn>,
}

impl std::fmt::Debug for E2eTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E2eTest")
            .field("name", &self.name)
            .field("lock", &self.lock)
            .field("lane", &self.lane)
            .finish_non_exhaustive()
    }
}

impl E2eTest {
    /// The same test, its Pods on the real node ([`Lane::Node`]).
    pub fn on_node(self) -> E2eTest {
        E2eTest {
            lane: Lane::Node,
            ..self
        }
    }

    /// The same test, on the real node or not at all ([`Lane::RealNode`]).
    pub fn on_real_node(self) -> E2eTest {
        E2eTest {
            lane: Lane::RealNode,
            ..self
        }
    }

    /// A test that shares the server with the others (the usual case).
    pub fn shared<F, Fut>(name: &str, body: F) -> E2eTest
    where
        F: Fn(TestEnv) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        Self::new(name, Lock::Shared, body)
    }

    /// A test that runs alone.
    pub fn exclusive<F, Fut>(name: &str, body: F) -> E2eTest
    where
        F: Fn(TestEnv) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        Self::new(name, Lock::Exclusive, body)
    }

    fn new<F, Fut>(name: &str, lock: Lock, body: F) -> E2eTest
    where
        F: Fn(TestEnv) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        E2eTest {
            name: name.to_owned(),
            lock,
            lane: Lane::ApiServer,
            body: Arc::new(move |env| Box::pin(body(env))),
        }
    }
}

/// What a test gets: an admin client, its own namespace, and the cluster.
#[derive(Clone)]
pub struct TestEnv {
    cluster: Arc<Cluster>,
    node: Option<Arc<RealNode>>,
    namespace: String,
    logs: Arc<Mutex<Vec<PathBuf>>>,
    held: Arc<Mutex<Vec<Box<dyn Send>>>>,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl TestEnv {
    /// A client with cluster-admin rights.
    pub fn client(&self) -> Client {
        self.cluster.client()
    }

    /// The test's namespace, created for it and deleted after it passes.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The cluster: its admin kubeconfig, and the control plane (CA, keys) when the suite
    /// started it.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The real node this test's Pods run on; `None` where `local-kubelet` must play it.
    pub fn node(&self) -> Option<&RealNode> {
        self.node.as_deref()
    }

    /// Adds a log file (an operator's, a runner's) to what a failure of this test prints.
    pub fn attach_log(&self, path: impl Into<PathBuf>) {
        if let Ok(mut logs) = self.logs.lock() {
            logs.push(path.into());
        }
    }

    /// Keeps `value` (the temporary folder of an attached log) until the test's failure
    /// report is written, even when the test returns early.
    pub fn hold(&self, value: impl Send + 'static) {
        if let Ok(mut held) = self.held.lock() {
            held.push(Box::new(value));
        }
    }
}

/// Why the suite has no cluster to run against.
enum Setup {
    Ready {
        cluster: Arc<Cluster>,
        node: NodeSetup,
    },
    /// No server configured on a developer machine: the tests are ignored.
    Skipped,
    /// No server in CI, or the server could not start: every test fails with this.
    Broken(String),
}

/// What the [`Lane::Node`] tests run on.
enum NodeSetup {
    Real(Arc<RealNode>),
    /// No node named: `local-kubelet` on the API server.
    LocalKubelet,
    /// No node in CI, or it could not be reached: the node tests fail with this.
    Broken(String),
}

/// Runs the suite as `cargo test` would run a test binary; returns its exit code.
pub fn run_suite(tests: Vec<E2eTest>) -> ExitCode {
    let args = Arguments::from_args();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "herd-e2e: no tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let setup = if args.list {
        Setup::Skipped
    } else {
        runtime.block_on(setup(std::env::var("CI").is_ok_and(|v| v == "true")))
    };
    let trials = tests
        .into_iter()
        .map(|test| trial(test, &setup, runtime.handle()))
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    // The cluster stops here, after every test: its servers die with its last reference.
    drop(setup);
    conclusion.exit_code()
}

async fn setup(ci: bool) -> Setup {
    let Some(source) = Source::from_env() else {
        let why = format!(
            "no API server: set {ASSETS_ENV} (e.g. $(../shared/envtest/unpack)) or \
             {EXISTING_CLUSTER_ENV}"
        );
        if ci {
            return Setup::Broken(format!("CI=true and {why}"));
        }
        // Written to stderr directly: libtest captures `eprintln!`, and a skip must be visible.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED herd-e2e: {why}; the end-to-end tests are reported as ignored"
        );
        return Setup::Skipped;
    };
    let cluster = match connect(&source).await {
        Ok(cluster) => Arc::new(cluster),
        Err(e) => return Setup::Broken(format!("{e:#}")),
    };
    Setup::Ready {
        cluster,
        node: node_setup(ci).await,
    }
}

async fn node_setup(ci: bool) -> NodeSetup {
    let Some(dir) = RealNode::dir_from_env() else {
        if ci {
            return NodeSetup::Broken(format!(
                "CI=true and no real node: set {NODE_ENV} (scripts/e2e-node starts one)"
            ));
        }
        let _ = writeln!(
            std::io::stderr(),
            "herd-e2e: no real node ({NODE_ENV} unset): the node tests run on local-kubelet, \
             and those only a real node can run are ignored"
        );
        return NodeSetup::LocalKubelet;
    };
    let connected = async {
        let node = RealNode::connect(&dir).await?;
        crate::crds::apply_crds(&node.cluster().client()).await?;
        anyhow::Ok(node)
    };
    match connected.await {
        Ok(node) => {
            let _ = writeln!(
                std::io::stderr(),
                "herd-e2e: the node tests run on the real node {} ({}, {}); CRDs applied",
                node.node_name(),
                node.node_ip(),
                dir.display()
            );
            NodeSetup::Real(Arc::new(node))
        }
        Err(e) => NodeSetup::Broken(format!("the real node in {}: {e:#}", dir.display())),
    }
}

async fn connect(source: &Source) -> anyhow::Result<Cluster> {
    let cluster = Cluster::connect(source).await?;
    crate::crds::apply_crds(&cluster.client()).await?;
    let server = match (source, cluster.control_plane()) {
        (_, Some(control_plane)) => format!(
            "a control plane started from {ASSETS_ENV} at {}",
            control_plane.server_url()
        ),
        (Source::Existing(kubeconfig), None) => {
            format!("the cluster {} names", kubeconfig.display())
        }
        (Source::Assets(_), None) => "an unknown server".to_owned(),
    };
    let _ = writeln!(
        std::io::stderr(),
        "herd-e2e: running against {server}; CRDs applied"
    );
    Ok(cluster)
}

fn trial(test: E2eTest, setup: &Setup, runtime: &tokio::runtime::Handle) -> Trial {
    let E2eTest {
        name,
        lock,
        lane,
        body,
    } = test;
    let failing = |why: &String| {
        let why = why.clone();
        move || Err(Failed::from(why.clone()))
    };
    let (cluster, node) = match (setup, lane) {
        (Setup::Skipped, _) => return Trial::test(name, || Ok(())).with_ignored_flag(true),
        (Setup::Broken(why), _) => return Trial::test(name, failing(why)),
        (Setup::Ready { cluster, .. }, Lane::ApiServer)
        | (
            Setup::Ready {
                cluster,
                node: NodeSetup::LocalKubelet,
            },
            Lane::Node,
        ) => (cluster.clone(), None),
        (
            Setup::Ready {
                node: NodeSetup::LocalKubelet,
                ..
            },
            Lane::RealNode,
        ) => return Trial::test(name, || Ok(())).with_ignored_flag(true),
        (
            Setup::Ready {
                node: NodeSetup::Broken(why),
                ..
            },
            Lane::Node | Lane::RealNode,
        ) => return Trial::test(name, failing(why)),
        (
            Setup::Ready {
                node: NodeSetup::Real(node),
                ..
            },
            Lane::Node | Lane::RealNode,
        ) => (node.cluster().clone(), Some(node.clone())),
    };
    let runtime = runtime.clone();
    let test_name = name.clone();
    Trial::test(name, move || {
        runtime.block_on(run_test(
            &test_name,
            lock,
            &body,
            cluster.clone(),
            node.clone(),
        ))
    })
}

async fn run_test(
    name: &str,
    lock: Lock,
    body: &Arc<TestFn>,
    cluster: Arc<Cluster>,
    node: Option<Arc<RealNode>>,
) -> Result<(), Failed> {
    let cluster_lock = if node.is_some() {
        &NODE_LOCK
    } else {
        &CLUSTER_LOCK
    };
    let _guard: Box<dyn Send + Sync + '_> = match lock {
        Lock::Shared => Box::new(cluster_lock.read().await),
        Lock::Exclusive => Box::new(cluster_lock.write().await),
    };
    let client = cluster.client();
    // On the real node every test namespace enforces the restricted Pod Security Standard, as
    // a careful cluster would: Herd's Pods must pass it.
    let pod_security = if node.is_some() {
        PodSecurity::Restricted
    } else {
        PodSecurity::Unset
    };
    let namespace = create_namespace(&client, name, pod_security)
        .await
        .map_err(|e| Failed::from(format!("{e:#}")))?;
    let is_node = node.is_some();
    let env = TestEnv {
        cluster,
        node,
        namespace: namespace.clone(),
        logs: Arc::default(),
        held: Arc::default(),
    };
    let logs = env.logs.clone();
    // Dropped at the end of this function, after the failure report.
    let _held = env.held.clone();
    match body(env).await {
        Ok(()) => delete_namespace(&client, &namespace)
            .await
            .map_err(|e| Failed::from(format!("{e:#}"))),
        Err(error) => {
            let logs = logs.lock().map(|l| l.clone()).unwrap_or_default();
            let mut dump = crate::dump::dump_namespace(&client, &namespace, &logs).await;
            if is_node {
                for (container, text) in crate::node::container_logs(&client, &namespace).await {
                    dump.push_str(&format!("--- container {container} (last 40 lines)\n"));
                    let lines: Vec<&str> = text.lines().collect();
                    dump.push_str(&lines[lines.len().saturating_sub(40)..].join("\n"));
                    dump.push('\n');
                }
            }
            Err(Failed::from(format!(
                "{error:#}\n{dump}(namespace {namespace} is kept for inspection)"
            )))
        }
    }
}
