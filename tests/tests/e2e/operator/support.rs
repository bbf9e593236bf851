//! Running an in-process operator the way a cluster runs it: as a ServiceAccount bound to
//! exactly the RBAC of `charts/herd/files/rbac/`, with its own Lease.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use herd_crds::condition::{Condition, ConditionStatus, find_condition};
use herd_e2e::TestEnv;
use herd_operator::{Config, Running};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::run_fixtures::enforce_restricted;

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

/// How a test's only operator starts: leading, with synced caches, its Lease in the test's
/// namespace.
#[derive(Clone, Copy)]
pub enum Start {
    /// Watching the test's namespace, with the [`test_config`] settings.
    Only,
    /// As [`Start::Only`], in a namespace enforcing the `restricted` Pod Security Standard.
    Restricted,
    /// As [`Start::Only`], with these settings changed.
    Configured(fn(&mut Config)),
    /// Watching every namespace, bound by the cluster-wide RBAC.
    AllNamespaces,
}

/// What an operator test works with while its operator runs (the test harness starts it before
/// the test and shuts it down after).
pub struct Operated {
    /// A client as the operator's ServiceAccount, for what the test does as the operator does.
    pub operator: Client,
    /// A cluster-admin client, for what the test itself reads and writes.
    pub admin: Client,
    /// The test's namespace.
    pub namespace: String,
    /// Where the operator serves `/healthz`, `/readyz` and `/metrics`.
    pub http_addr: SocketAddr,
    /// The cluster's kubeconfig, for clients of other identities.
    pub kubeconfig: PathBuf,
}

impl Operated {
    /// Starts `env`'s operator as `start` says; the [`Running`] operator is the caller's to
    /// shut down.
    pub async fn start(env: &TestEnv, start: Start) -> anyhow::Result<(Operated, Running)> {
        let rbac = match start {
            Start::AllNamespaces => Rbac::ClusterWide,
            Start::Only | Start::Restricted | Start::Configured(_) => Rbac::Namespaced,
        };
        let Clients {
            operator,
            admin,
            namespace,
        } = Clients::new(env, rbac).await?;
        let config = match start {
            Start::Only => test_config(&[&namespace], &namespace, "only")?,
            Start::Restricted => {
                enforce_restricted(&admin, &namespace).await?;
                test_config(&[&namespace], &namespace, "only")?
            }
            Start::Configured(change) => {
                let mut config = test_config(&[&namespace], &namespace, "only")?;
                change(&mut config);
                config
            }
            Start::AllNamespaces => test_config(&[], &namespace, "only")?,
        };
        let running = start_leader(config, operator.clone()).await?;
        let operated = Operated {
            operator,
            admin,
            namespace,
            http_addr: running.http_addr,
            kubeconfig: env.cluster().kubeconfig().to_owned(),
        };
        Ok((operated, running))
    }

    /// The test namespace's objects of kind `K`, as the admin sees them.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = kube::core::NamespaceResourceScope> + Clone + DeserializeOwned,
        K::DynamicType: Default,
    {
        Api::namespaced(self.admin.clone(), &self.namespace)
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

/// GETs `path` from the operator's HTTP listener at `http_addr`.
pub async fn http_get(http_addr: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let url = format!("http://{http_addr}{path}");
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
