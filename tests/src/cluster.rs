//! The API server the end-to-end tests talk to: a control plane this process starts from
//! `KUBEBUILDER_ASSETS`, or an existing cluster named by `HERD_E2E_KUBECONFIG`. Plain
//! `KUBECONFIG` and `~/.kube/config` are never used: they usually point at someone's work
//! cluster.

use std::path::{Path, PathBuf};

use kube::Client;
use kube::config::AuthInfo;

use crate::control_plane::KubeControlPlane;
use crate::kubeconfig::{client_from_kubeconfig, config_from_kubeconfig};

/// Names an existing cluster's kubeconfig; the suite then starts no control plane.
pub const EXISTING_CLUSTER_ENV: &str = "HERD_E2E_KUBECONFIG";
/// The envtest convention: the folder holding `etcd`, `kube-apiserver` and
/// `kube-controller-manager`.
pub const ASSETS_ENV: &str = "KUBEBUILDER_ASSETS";

/// Where the API server comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Start a control plane from these binaries.
    Assets(PathBuf),
    /// Use the cluster this kubeconfig names.
    Existing(PathBuf),
}

impl Source {
    /// Reads the choice from the environment: `HERD_E2E_KUBECONFIG` first, then
    /// `KUBEBUILDER_ASSETS`; `None` when neither is set (or set empty).
    pub fn from_env() -> Option<Source> {
        Self::from_vars(|name| std::env::var_os(name).map(PathBuf::from))
    }

    fn from_vars(var: impl Fn(&str) -> Option<PathBuf>) -> Option<Source> {
        let set = |name: &str| var(name).filter(|p| !p.as_os_str().is_empty());
        set(EXISTING_CLUSTER_ENV)
            .map(Source::Existing)
            .or_else(|| set(ASSETS_ENV).map(Source::Assets))
    }
}

/// A reachable API server with an admin client.
pub struct Cluster {
    client: Client,
    kubeconfig: PathBuf,
    control_plane: Option<KubeControlPlane>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("kubeconfig", &self.kubeconfig)
            .field("control_plane", &self.control_plane)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Starts or connects to the API server `source` names.
    pub async fn connect(source: &Source) -> anyhow::Result<Cluster> {
        match source {
            Source::Existing(kubeconfig) => Ok(Cluster {
                client: client_from_kubeconfig(kubeconfig).await?,
                kubeconfig: kubeconfig.clone(),
                control_plane: None,
            }),
            Source::Assets(assets) => {
                let control_plane = KubeControlPlane::start(assets).await?;
                let kubeconfig = control_plane.kubeconfig().to_path_buf();
                Ok(Cluster {
                    client: client_from_kubeconfig(&kubeconfig).await?,
                    kubeconfig,
                    control_plane: Some(control_plane),
                })
            }
        }
    }

    /// A client with cluster-admin rights.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// A client that authenticates with a bearer `token` (e.g. a ServiceAccount token from a
    /// TokenRequest), to act under that identity's RBAC rights.
    pub async fn client_with_token(&self, token: &str) -> anyhow::Result<Client> {
        let mut config = config_from_kubeconfig(&self.kubeconfig).await?;
        config.auth_info = AuthInfo {
            token: Some(token.to_owned().into()),
            ..AuthInfo::default()
        };
        Ok(Client::try_from(config)?)
    }

    /// The admin kubeconfig, for `kubectl` or an operator started as a process.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The control plane this process started (with its CA, keys and logs); `None` on an
    /// existing cluster.
    pub fn control_plane(&self) -> Option<&KubeControlPlane> {
        self.control_plane.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(vars: &[(&str, &str)]) -> Option<Source> {
        Source::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| PathBuf::from(v))
        })
    }

    #[test]
    fn an_existing_cluster_only_through_its_own_variable() {
        assert_eq!(source(&[("KUBECONFIG", "/home/me/.kube/config")]), None);
        assert_eq!(
            source(&[(EXISTING_CLUSTER_ENV, "/tmp/kc"), (ASSETS_ENV, "/assets")]),
            Some(Source::Existing("/tmp/kc".into()))
        );
        assert_eq!(
            source(&[(ASSETS_ENV, "/assets")]),
            Some(Source::Assets("/assets".into()))
        );
        assert_eq!(
            source(&[(EXISTING_CLUSTER_ENV, ""), (ASSETS_ENV, "")]),
            None
        );
    }
}
