//! The chart as users install it: `helm install` of `charts/herd` into the test's namespace
//! (watching only it), `local-kubelet` running the operator Pod of the chart's Deployment (the
//! chart's args, env, probes, ServiceAccount and RBAC, with the in-cluster client config the
//! Pod's ServiceAccount volume and `KUBERNETES_SERVICE_*` give it), then
//! `examples/runs/hello-scripted.yaml` applied and succeeding, then `helm uninstall`.
//!
//! No cluster DNS here: the release points `runApi.url` at `https://127.0.0.1:<port>`, and both
//! listeners get free ports (containers share the host's network). Exclusive: the release's
//! ClusterRoles and ClusterRoleBindings are cluster-wide, and no operator of another test may
//! reconcile meanwhile.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::run::Run;
use herd_e2e::external_tools::HELM;
use herd_e2e::fixtures::{read_yaml_documents, repo_root};
use herd_e2e::local_kubelet::LocalKubelet;
use herd_e2e::requests::create_strict;
use herd_e2e::wait::wait_for;
use herd_e2e::{E2eTest, TestEnv};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;
use kube::api::ListParams;

use crate::operator::run_fixtures::{message, succeeded};

const TEST: &str = "helm::the_chart_runs_hello_scripted";

/// How long the operator Pod may take to be available: bound, started, its caches synced and
/// the run API's certificate made (the readiness probe runs every 5 s).
const AVAILABLE: Duration = Duration::from_secs(60);

/// How long the example's Run may take from creation to its end.
const RUN_TIME: Duration = Duration::from_secs(60);

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![E2eTest::exclusive(TEST, the_chart_runs_hello_scripted)]
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
    let http_port = free_port()?;
    let run_api_port = free_port()?;

    let kubelet = LocalKubelet::start(&env, Path::new(env!("CARGO_BIN_EXE_local-kubelet"))).await?;
    let chart = repo_root().join("charts/herd");
    helm.run(&[
        "install",
        &release,
        &chart.display().to_string(),
        "--namespace",
        &namespace,
        "--set",
        &format!("watchNamespaces={{{namespace}}}"),
        "--set",
        &format!("runApi.url=https://127.0.0.1:{run_api_port}"),
        "--set",
        &format!("runApi.port={run_api_port}"),
        "--set",
        &format!("http.port={http_port}"),
    ])
    .await?;

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
    .with_context(|| format!("the kubelet's log ends:\n{}", kubelet_tail(&kubelet)))?;

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
    .with_context(|| format!("the kubelet's log ends:\n{}", kubelet_tail(&kubelet)))?;
    ensure!(
        succeeded(&run, ConditionStatus::True, "Succeeded"),
        "Run hello ended otherwise: {}",
        message(&run)
    );
    let text = run
        .status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .and_then(|r| r.result.as_ref())
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
    uninstalled(&env, &kubelet, &release).await
}

/// After `helm uninstall`: the release's cluster-wide roles are gone, and so is the operator
/// Pod, whose operator (PID 1 of its container) stopped cleanly on `local-kubelet`'s SIGTERM.
async fn uninstalled(env: &TestEnv, kubelet: &LocalKubelet, release: &str) -> anyhow::Result<()> {
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
    let log = std::fs::read_to_string(kubelet.log())?;
    ensure!(
        log.lines()
            .any(|line| line.contains(&format!("/{release}-operator-"))
                && line.ends_with(": operator exited with 0")),
        "the operator did not exit 0 on SIGTERM; the kubelet's log ends:\n{}",
        kubelet_tail(kubelet)
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

fn kubelet_tail(kubelet: &LocalKubelet) -> String {
    herd_e2e::dump::tail(kubelet.log(), 40)
}

/// A loopback port nobody listened on a moment ago.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
