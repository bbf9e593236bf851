//! Running an in-process operator the way a cluster runs it: as a ServiceAccount bound to
//! exactly the RBAC of `charts/herd/files/rbac/`, with its own Lease.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use herd_crds::condition::{Condition, ConditionStatus, find_condition};
use herd_e2e::TestEnv;
use herd_operator::{Config, Running};
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

pub use herd_e2e::operator_rbac::Rbac;

/// What an operator test starts from.
pub struct Clients {
    /// A client as the operator's ServiceAccount, bound as the test's [`Rbac`] says.
    pub operator: Client,
    /// A cluster-admin client, for what the test itself reads and writes.
    pub admin: Client,
    /// The test's namespace.
    pub namespace: String,
}

impl Clients {
    /// The clients of `env`'s namespace, the operator's bound as `rbac` says.
    pub async fn new(env: &TestEnv, rbac: Rbac) -> anyhow::Result<Clients> {
        let admin = env.client();
        let namespace = env.namespace().to_owned();
        let operator =
            operator_client(&admin, env.cluster().kubeconfig(), &namespace, rbac).await?;
        Ok(Clients {
            operator,
            admin,
            namespace,
        })
    }
}

/// Creates the ServiceAccount `herd-operator` in `namespace`, binds it as `rbac` says (plus
/// `tokenreview-clusterrole.yaml`), and returns a client authenticated with its token.
pub async fn operator_client(
    admin: &Client,
    kubeconfig: &Path,
    namespace: &str,
    rbac: Rbac,
) -> anyhow::Result<Client> {
    let token = herd_e2e::operator_rbac::operator_token(admin, namespace, rbac, 3600).await?;
    let file = Kubeconfig::read_from(kubeconfig)?;
    let mut config =
        kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?;
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    Ok(Client::try_from(config)?)
}

/// Operator settings for a test: scoped to `namespaces` (empty: all), a Lease of its own in
/// `lease_namespace`, short lease timings, the HTTP listener and the run API on free loopback
/// ports.
pub fn test_config(
    namespaces: &[&str],
    lease_namespace: &str,
    identity: &str,
) -> anyhow::Result<Config> {
    let mut config = Config::for_namespaces(namespaces)?;
    config.lease.name = "herd-operator-e2e".into();
    config.lease.namespace = lease_namespace.to_owned();
    config.lease.identity = Some(identity.to_owned());
    config.lease.duration = Duration::from_secs(4);
    config.lease.renew_before = Duration::from_secs(2);
    config.http_addr = "127.0.0.1:0".parse()?;
    config.run_api_addr = "127.0.0.1:0".parse()?;
    Ok(config)
}

/// Starts the only operator of `namespace` (its [`test_config`]), leading, with synced caches.
pub async fn start_only(client: Client, namespace: &str) -> anyhow::Result<Running> {
    start_leader(test_config(&[namespace], namespace, "only")?, client).await
}

/// Starts an operator and waits until it leads and its caches have synced.
pub async fn start_leader(config: Config, client: Client) -> anyhow::Result<Running> {
    let running = herd_operator::start(config, client).await?;
    let mut leader = running.leader.clone();
    tokio::time::timeout(Duration::from_secs(30), leader.wait_for(|l| *l))
        .await
        .context("the operator did not acquire its Lease within 30s")??;
    herd_e2e::wait::wait_for("the operator's caches", Duration::from_secs(30), || async {
        Ok(running.is_ready().then_some(()))
    })
    .await?;
    Ok(running)
}

/// GETs `path` from the operator's HTTP listener.
pub async fn http_get(running: &Running, path: &str) -> anyhow::Result<(u16, String)> {
    let url = format!("http://{}{path}", running.http_addr);
    let response = reqwest::get(&url).await.with_context(|| url.clone())?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

/// Fails unless the condition `type_` is present as `(status, reason)`.
pub fn expect_condition(
    conditions: &[Condition],
    type_: &str,
    status: ConditionStatus,
    reason: &str,
) -> anyhow::Result<()> {
    match find_condition(conditions, type_) {
        Some(c) if c.status == status && c.reason == reason => Ok(()),
        other => bail!("{type_}: expected {status:?}/{reason}, found {other:?}"),
    }
}

/// Whether the condition `type_` is present as `(status, reason)`.
pub fn has_condition(
    conditions: &[Condition],
    type_: &str,
    status: ConditionStatus,
    reason: &str,
) -> bool {
    expect_condition(conditions, type_, status, reason).is_ok()
}
