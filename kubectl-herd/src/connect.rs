//! The cluster a command talks to, found as `kubectl` finds it: `--kubeconfig` (else
//! `KUBECONFIG`, else `~/.kube/config`, else the in-cluster ServiceAccount), `--context` (else
//! the current context), `-n` (else the context's namespace, else `default`).

use std::path::Path;

use herd_crds::terminal_text::one_line;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::{CliError, Target};

/// A client and the namespace commands work in.
#[derive(Clone)]
pub struct Cluster {
    /// The client.
    pub client: Client,
    /// The namespace of the Runs.
    pub namespace: String,
}

impl Cluster {
    /// What a request in the cluster's namespace was about, for its error message: `doing`
    /// to `object`, and what to do when it does not exist (`not_found`).
    pub fn target<'a>(&'a self, doing: &'a str, object: &'a str, not_found: &'a str) -> Target<'a> {
        Target {
            doing,
            object,
            namespace: &self.namespace,
            not_found,
        }
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// Where the connection comes from, as the global flags say.
#[derive(Clone, Copy, Debug, Default)]
pub struct Connection<'a> {
    /// `--kubeconfig`.
    pub kubeconfig: Option<&'a Path>,
    /// `--context`.
    pub context: Option<&'a str>,
    /// `-n`.
    pub namespace: Option<&'a str>,
}

/// Connects as the flags say.
pub async fn connect(connection: Connection<'_>) -> Result<Cluster, CliError> {
    // kube's TLS needs exactly one process-wide rustls provider; a second install is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = KubeConfigOptions {
        context: connection.context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let config = match (connection.kubeconfig, connection.context) {
        (Some(path), _) => {
            let file = Kubeconfig::read_from(path).map_err(|e| {
                CliError::new(format!(
                    "cannot read the kubeconfig {}: {} (check the --kubeconfig path)",
                    path.display(),
                    one_line(&e.to_string())
                ))
            })?;
            Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| kubeconfig_error(&path.display().to_string(), &e.to_string()))?
        }
        (None, Some(_)) => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| kubeconfig_error("in KUBECONFIG or ~/.kube/config", &e.to_string()))?,
        (None, None) => Config::infer().await.map_err(|e| {
            CliError::new(format!(
                "no cluster to talk to: {} (set KUBECONFIG or give --kubeconfig)",
                one_line(&e.to_string())
            ))
        })?,
    };
    let namespace = connection
        .namespace
        .map(str::to_owned)
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).map_err(|e| {
        CliError::new(format!(
            "cannot set up a client from the kubeconfig: {}",
            one_line(&e.to_string())
        ))
    })?;
    Ok(Cluster { client, namespace })
}

fn kubeconfig_error(which: &str, why: &str) -> CliError {
    CliError::new(format!(
        "cannot use the kubeconfig {which}: {} (check --context and the file)",
        one_line(why)
    ))
}
