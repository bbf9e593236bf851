//! An operator in a process of its own for the benchmarks: this benchmark's binary, started
//! again as `<bench> operator`, watching one namespace as the ServiceAccount of
//! `charts/herd/files/rbac/` (a Role there), so its memory is its own and the API server treats
//! it as in a cluster (API Priority and Fairness included; admin is exempt).

use std::future::Future;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use herd_crds::agent::Agent;
use herd_e2e::cluster::Cluster;
use herd_e2e::operator_rbac::{Rbac, operator_token};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

const TOKEN_ENV: &str = "HERD_BENCH_TOKEN";
const KUBECONFIG_ENV: &str = "HERD_BENCH_KUBECONFIG";

/// The benchmark binary's `main`: the operator when started as `operator`, else `bench`.
pub fn main<F>(name: &str, bench: impl FnOnce() -> F) -> ExitCode
where
    F: Future<Output = anyhow::Result<()>>,
{
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{name}: no tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let args: Vec<String> = std::env::args().collect();
    let result = if args.get(1).map(String::as_str) == Some("operator") {
        runtime.block_on(operator())
    } else {
        runtime.block_on(bench())
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The child process: one operator, its settings from the `HERD_*` environment, as the token
/// in the environment, until killed (or orphaned: it never outlives the benchmark).
async fn operator() -> anyhow::Result<()> {
    let parent = std::os::unix::process::parent_id();
    tokio::spawn(async move {
        while std::os::unix::process::parent_id() == parent {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        std::process::exit(1);
    });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = herd_operator::Config::for_namespaces(&[])?;
    let kubeconfig = std::env::var(KUBECONFIG_ENV)?;
    let file = Kubeconfig::read_from(&kubeconfig)?;
    let mut kube_config =
        kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?;
    kube_config.auth_info = AuthInfo {
        token: Some(std::env::var(TOKEN_ENV)?.into()),
        ..AuthInfo::default()
    };
    let client = Client::try_from(kube_config)?;
    herd_operator::run(config, client, std::future::pending()).await?;
    Ok(())
}

/// A free loopback address.
pub fn free_addr() -> anyhow::Result<String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    Ok(format!("127.0.0.1:{port}"))
}

/// An operator process watching one namespace, as its ServiceAccount there.
pub struct Operator {
    /// The process.
    pub child: Child,
    /// Where `/metrics` and `/readyz` are served.
    pub http: String,
}

impl Operator {
    /// Starts an operator for `namespace` with these extra `HERD_*` settings (they win over
    /// the defaults here) and waits until it leads and is ready.
    pub async fn start(
        cluster: &Cluster,
        namespace: &str,
        settings: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let token = match operator_token(&cluster.client(), namespace, Rbac::Namespaced, 7200).await
        {
            Ok(token) => token,
            // The ServiceAccount exists from an earlier start: only ask for a token.
            Err(_) => token_again(&cluster.client(), namespace).await?,
        };
        let http = free_addr()?;
        let child = Command::new(std::env::current_exe()?)
            .arg("operator")
            .env("HERD_WATCH_NAMESPACES", namespace)
            .env("HERD_LEASE_NAMESPACE", namespace)
            .env("HERD_HTTP_ADDR", &http)
            .env("HERD_RUN_API_ADDR", "127.0.0.1:0")
            .envs(settings.iter().copied())
            .env(TOKEN_ENV, token)
            .env(KUBECONFIG_ENV, cluster.kubeconfig())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let operator = Operator { child, http };
        operator
            .wait_for("leading and ready", |m| m.contains("herd_leader 1"))
            .await?;
        Ok(operator)
    }

    /// The operator's metrics, in the Prometheus text format.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        Ok(reqwest::get(format!("http://{}/metrics", self.http))
            .await?
            .text()
            .await?)
    }

    /// Waits until the operator is ready and its metrics pass `check`.
    pub async fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            let ready = reqwest::get(format!("http://{}/readyz", self.http))
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready && self.metrics().await.is_ok_and(|m| check(&m)) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("the operator was not {what} within 120 s")
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn token_again(admin: &Client, namespace: &str) -> anyhow::Result<String> {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(admin.clone(), namespace);
    let request: k8s_openapi::api::authentication::v1::TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 7200}}))?;
    let token = accounts
        .create_token_request(
            herd_e2e::operator_rbac::SERVICE_ACCOUNT,
            &PostParams::default(),
            &request,
        )
        .await?;
    Ok(token.status.context("no token")?.token)
}

/// A ready Agent `helper` of `model` without skills, its model key a labelled Secret.
pub async fn ready_agent(admin: &Client, namespace: &str, model: Value) -> anyhow::Result<()> {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "model-key", "labels": {"herd.dev/model-credentials": "true"}},
        "stringData": {"api-key": "k"},
    }))?;
    Api::<Secret>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await?;
    let mut agent = json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "helper"},
        "spec": {"model": model, "skills": []},
    });
    agent["spec"]["model"]["apiKeySecretRef"] = json!({"name": "model-key", "key": "api-key"});
    let agent: Agent = serde_json::from_value(agent)?;
    let agents: Api<Agent> = Api::namespaced(admin.clone(), namespace);
    agents.create(&PostParams::default(), &agent).await?;
    herd_e2e::wait::wait_for("the Agent ready", Duration::from_secs(60), || async {
        let agent = agents.get("helper").await?;
        let ready = agent.status.is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Ready" && c.status == herd_crds::condition::ConditionStatus::True
            })
        });
        Ok(ready.then_some(()))
    })
    .await
}
