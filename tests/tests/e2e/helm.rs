//! The chart as users install it: `helm install` of `charts/herd` into the test's namespace
//! (watching only it), the operator Pod of the chart's Deployment running with the chart's args,
//! env, probes, ServiceAccount and RBAC and the in-cluster client config its ServiceAccount
//! volume and `KUBERNETES_SERVICE_*` give it (with the ServiceMonitor and PrometheusRule asked
//! for, which a cluster without the Prometheus Operator's CRDs leaves out, saying so in the
//! notes), then `examples/runs/hello-scripted.yaml` applied and succeeding, then
//! `helm uninstall`, on which the operator exits 0.
//!
//! On the real node the images are the ones `scripts/e2e-node` imported, and Run Pods reach the
//! run API through the chart's Service by its DNS name (the chart's default `runApi.url`).
//! Under `local-kubelet` there is no cluster DNS and containers share the host's network: the
//! release points `runApi.url` at `https://127.0.0.1:<port>`, and both listeners get free ports.
//! Exclusive: the release's ClusterRoles and ClusterRoleBindings are cluster-wide, and no
//! operator of another test may reconcile meanwhile.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::run::Run;
use herd_e2e::external_tools::HELM;
use herd_e2e::fixtures::{read_yaml_documents, repo_root};
use herd_e2e::local_kubelet::LocalKubelet;
use herd_e2e::node::RealNode;
use herd_e2e::requests::create_strict;
use herd_e2e::wait::wait_for;
use herd_e2e::{E2eTest, TestEnv};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;
use kube::api::ListParams;

use crate::operator::run_fixtures::succeeded_report;

const TEST: &str = "helm::the_chart_runs_hello_scripted";

/// How long the operator Pod may take to be available: bound, started, its caches synced and
/// the run API's certificate made (the readiness probe runs every 5 s).
const AVAILABLE: Duration = Duration::from_secs(60);

/// How long the example's Run may take from creation to its end.
const RUN_TIME: Duration = Duration::from_secs(60);

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![E2eTest::exclusive(TEST, the_chart_runs_hello_scripted).on_node()]
}

async fn the_chart_runs_hello_scripted(env: TestEnv) -> anyhow::Result<()> {
    let Some(helm) = HELM.find(TEST)? else {
        return Ok(());
    };
    let client = env.client();
    let namespace = env.namespace().to_owned();
    let helm = Helm::new(&env, helm)?;
    // Named after the namespace's random suffix: cluster-scoped objects of a failed run (its
    // namespace is kept) never collide with the next.
    let suffix = namespace.rsplit('-').next().unwrap_or_default();
    let release = format!("herd-{suffix}");
    let chart = repo_root().join("charts/herd");
    // The test cluster has no Prometheus Operator CRDs: asking for its objects must not fail
    // the install, only leave them out and say so.
    let mut values = vec![
        format!("watchNamespaces={{{namespace}}}"),
        "serviceMonitor.enabled=true".to_owned(),
        "prometheusRule.enabled=true".to_owned(),
    ];
    let kubelet = match env.node() {
        Some(_) => {
            for (value, image) in [("image", "operator"), ("runner.image", "runner")]
                .into_iter()
                .chain([("sandbox.image", "sandbox")])
            {
                let reference = RealNode::image(image);
                let (repository, tag) = reference.rsplit_once(':').context("an image tag")?;
                values.push(format!("{value}.repository={repository}"));
                values.push(format!("{value}.tag={tag}"));
            }
            None
        }
        None => {
            let run_api_port = free_port()?;
            values.push(format!("runApi.url=https://127.0.0.1:{run_api_port}"));
            values.push(format!("runApi.port={run_api_port}"));
            values.push(format!("http.port={}", free_port()?));
            Some(LocalKubelet::start(&env, Path::new(env!("CARGO_BIN_EXE_local-kubelet"))).await?)
        }
    };
    let chart_path = chart.display().to_string();
    let mut args = vec!["install", &release, &chart_path, "--namespace", &namespace];
    for value in &values {
        args.extend(["--set", value]);
    }
    let installed = helm.run(&args).await?;
    ensure!(
        installed.contains("does not serve monitoring.coreos.com/v1")
            && installed.contains("no\nServiceMonitor or PrometheusRule was created"),
        "the install's notes do not say why there is no ServiceMonitor:\n{installed}"
    );
    let exits = OperatorExits::watch(&env, &release);

    // What a wait on the cluster says when it times out: most likely the kubelet's doing.
    let kubelet_log = || {
        format!(
            "the kubelet's log ends:\n{}",
            kubelet_tail(kubelet.as_ref())
        )
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let deployment = format!("{release}-operator");
    wait_for("the operator to be available", AVAILABLE, || async {
        let found = deployments.get_opt(&deployment).await?;
        let available = found
            .and_then(|d| d.status)
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        Ok((available == 1).then_some(()))
    })
    .await
    .with_context(kubelet_log)?;

    let example = repo_root().join("examples/runs/hello-scripted.yaml");
    for object in read_yaml_documents(&example)? {
        create_strict(&client, &namespace, &object)
            .await?
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("applying {}", example.display()))?;
    }
    let runs: Api<Run> = Api::namespaced(client.clone(), &namespace);
    let run = wait_for("Run hello to end", RUN_TIME, || async {
        let run = runs.get("hello").await?;
        let ended = run.status.as_ref().is_some_and(|s| {
            find_condition(&s.conditions, "Succeeded")
                .is_some_and(|c| c.status != ConditionStatus::Unknown)
        });
        Ok(ended.then_some(run))
    })
    .await
    .with_context(kubelet_log)?;
    let report = succeeded_report(&run)?;
    let text = report
        .result
        .as_ref()
        .map(|r| r.text.clone())
        .unwrap_or_default();
    ensure!(
        text == "Hello! The greeting is in hello.md.",
        "status.report.result.text: {text:?}"
    );
    let result = Api::<ConfigMap>::namespaced(client.clone(), &namespace)
        .get("hello-result")
        .await?;
    let answer = result.data.as_ref().and_then(|d| d.get("answer.md"));
    ensure!(
        answer.map(String::as_str) == Some(text.as_str()),
        "ConfigMap hello-result: {:?}",
        result.data
    );
    let presented = result
        .binary_data
        .unwrap_or_default()
        .values()
        .any(|file| file.0 == b"# Hello from the sandbox\n");
    ensure!(presented, "hello-result holds the presented hello.md");

    helm.run(&["uninstall", &release, "--namespace", &namespace])
        .await?;
    uninstalled(&env, kubelet.as_ref(), &release, exits).await
}

/// Watches the operator Pods of a release and keeps each container's last terminated state,
/// which a deleted Pod shows for a moment before it is gone.
struct OperatorExits {
    seen: std::sync::Arc<std::sync::Mutex<Vec<(String, i32)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl OperatorExits {
    fn watch(env: &TestEnv, release: &str) -> OperatorExits {
        use futures::StreamExt as _;
        use kube::runtime::WatchStreamExt as _;
        let pods: Api<Pod> = Api::namespaced(env.client(), env.namespace());
        let config = kube::runtime::watcher::Config::default()
            .labels(&format!("app.kubernetes.io/instance={release}"));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut events = kube::runtime::watcher(pods, config)
                .applied_objects()
                .boxed();
            while let Some(Ok(pod)) = events.next().await {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let statuses = pod.status.and_then(|s| s.container_statuses);
                for status in statuses.into_iter().flatten() {
                    if let (Some(exit), Ok(mut seen)) =
                        (status.state.and_then(|s| s.terminated), record.lock())
                    {
                        seen.push((name.clone(), exit.exit_code));
                    }
                }
            }
        });
        OperatorExits { seen, task }
    }

    fn exits(&self) -> Vec<(String, i32)> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for OperatorExits {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// After `helm uninstall`: the release's cluster-wide roles are gone, and so is the operator
/// Pod, whose operator (PID 1 of its container) stopped cleanly on the kubelet's SIGTERM.
async fn uninstalled(
    env: &TestEnv,
    kubelet: Option<&LocalKubelet>,
    release: &str,
    exits: OperatorExits,
) -> anyhow::Result<()> {
    let client = env.client();
    let view = format!("{release}-view");
    if Api::<ClusterRole>::all(client.clone())
        .get_opt(&view)
        .await?
        .is_some()
    {
        bail!("ClusterRole {view} outlived the release");
    }
    let pods: Api<Pod> = Api::namespaced(client, env.namespace());
    let selector = format!("app.kubernetes.io/instance={release}");
    wait_for(
        "the operator Pod to be gone",
        Duration::from_secs(60),
        || async {
            let left = pods.list(&ListParams::default().labels(&selector)).await?;
            Ok(left.items.is_empty().then_some(()))
        },
    )
    .await?;
    let Some(kubelet) = kubelet else {
        let exits = exits.exits();
        ensure!(
            !exits.is_empty() && exits.iter().all(|(_, code)| *code == 0),
            "the operator exits 0 on SIGTERM: its Pods' last states {exits:?}"
        );
        return Ok(());
    };
    let log = std::fs::read_to_string(kubelet.log())?;
    ensure!(
        log.lines()
            .any(|line| line.contains(&format!("/{release}-operator-"))
                && line.ends_with(": operator exited with 0")),
        "the operator did not exit 0 on SIGTERM; the kubelet's log ends:\n{}",
        kubelet_tail(Some(kubelet))
    );
    Ok(())
}

/// `helm` with its own empty configuration, against the test cluster.
struct Helm {
    program: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
}

impl Helm {
    fn new(env: &TestEnv, program: PathBuf) -> anyhow::Result<Helm> {
        let home = tempfile::Builder::new()
            .prefix("herd-e2e-helm-")
            .tempdir()
            .context("a folder for helm's settings")?;
        let path = home.path().to_path_buf();
        env.hold(home);
        Ok(Helm {
            program,
            kubeconfig: env.cluster().kubeconfig().to_path_buf(),
            home: path,
        })
    }

    /// Runs `helm args...`; `Err` with its output unless it exits 0.
    async fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = tokio::process::Command::new(&self.program)
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            // Nothing from the user's helm settings or kubeconfig.
            .env_remove("KUBECONFIG")
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .kill_on_drop(true)
            .output()
            .await
            .with_context(|| format!("running {}", self.program.display()))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            bail!(
                "helm {} failed ({}):\n{stdout}{stderr}",
                args.join(" "),
                output.status
            );
        }
        Ok(stdout)
    }
}

fn kubelet_tail(kubelet: Option<&LocalKubelet>) -> String {
    match kubelet {
        Some(kubelet) => herd_e2e::dump::tail(kubelet.log(), 40),
        None => "(the real node: see the Pods' logs below)".to_owned(),
    }
}

/// A loopback port nobody listened on a moment ago.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
