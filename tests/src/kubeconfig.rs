//! Clients from a kubeconfig file: the test control plane's admin one, or the cluster
//! `HERD_E2E_KUBECONFIG` names.

use std::path::Path;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// A client for the current context of `kubeconfig`.
pub async fn client_from_kubeconfig(kubeconfig: &Path) -> anyhow::Result<Client> {
    Ok(Client::try_from(config_from_kubeconfig(kubeconfig).await?)?)
}

/// The client configuration of the current context of `kubeconfig`.
pub async fn config_from_kubeconfig(kubeconfig: &Path) -> anyhow::Result<Config> {
    // kube's TLS needs exactly one process-wide rustls provider; a second install is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let file = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading {}", kubeconfig.display()))
}
