//! A throwaway Kubernetes control plane: etcd, kube-apiserver and kube-controller-manager from
//! `KUBEBUILDER_ASSETS`, on free loopback ports, with fresh certificates. No scheduler and no
//! kubelet: Pods stay `Pending` unless a test writes their status.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use kube::Client;

use crate::pki::Pki;
use crate::process::Server;

/// Longest wait for the API server to answer `/readyz`.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The admission plugins on top of the defaults. `OwnerReferencesPermissionEnforcement` makes a
/// client need `delete` on an owner to set `blockOwnerDeletion`, as in production clusters.
const ADMISSION_PLUGINS: &str = "NamespaceLifecycle,LimitRanger,ServiceAccount,PodSecurity,ResourceQuota,OwnerReferencesPermissionEnforcement";

/// Controllers of a node-less cluster: those that manage nodes, clouds or volumes attachments
/// are off.
const CONTROLLERS: &str = "*,-node-ipam-controller,-node-lifecycle-controller,-taint-eviction-controller,-persistentvolume-attach-detach-controller,-ttl-controller,-cloud-node-lifecycle-controller,-service-lb-controller,-node-route-controller";

/// A running control plane; dropping it stops every process and removes its files.
pub struct KubeControlPlane {
    // Field order is drop order: servers stop before their folder is removed.
    controller_manager: Server,
    apiserver: Server,
    etcd: Server,
    pki: Pki,
    kubeconfig: PathBuf,
    server_url: String,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for KubeControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeControlPlane")
            .field("server_url", &self.server_url)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl KubeControlPlane {
    /// Starts the three servers from the binaries in `assets` and waits until the API server
    /// is ready. Over 80 lines: the certificates and kubeconfigs, then each server's command
    /// line in the order they must start, read best as one sequence.
    pub async fn start(assets: &Path) -> anyhow::Result<KubeControlPlane> {
        for binary in ["etcd", "kube-apiserver", "kube-controller-manager"] {
            if !assets.join(binary).is_file() {
                bail!("{} has no {binary}", assets.display());
            }
        }
        let dir = tempfile::Builder::new().prefix("herd-e2e-").tempdir()?;
        let root = dir.path();
        let pki_dir = root.join("pki");
        std::fs::create_dir_all(&pki_dir)?;
        let pki = Pki::write(&pki_dir)?;

        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let api_port = free_port()?;
        let server_url = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = root.join("kubeconfig");
        write_kubeconfig(
            &kubeconfig,
            &server_url,
            &pki.ca_cert,
            "admin",
            &pki.admin_token,
        )?;
        let kcm_kubeconfig = root.join("kcm.kubeconfig");
        write_kubeconfig(
            &kcm_kubeconfig,
            &server_url,
            &pki.ca_cert,
            "kcm",
            &pki.controller_manager_token,
        )?;

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let mut etcd = Server::start(
            "etcd",
            root,
            &assets.join("etcd"),
            &args([
                ("--data-dir", path(&root.join("etcd"))),
                ("--name", "herd-e2e".into()),
                ("--unsafe-no-fsync", "true".into()),
                ("--listen-client-urls", etcd_url.clone()),
                ("--advertise-client-urls", etcd_url.clone()),
                (
                    "--listen-peer-urls",
                    format!("http://127.0.0.1:{peer_port}"),
                ),
                (
                    "--initial-advertise-peer-urls",
                    format!("http://127.0.0.1:{peer_port}"),
                ),
                ("--quota-backend-bytes", "2147483648".into()),
                ("--log-level", "warn".into()),
            ]),
        )?;
        let mut apiserver = Server::start(
            "kube-apiserver",
            root,
            &assets.join("kube-apiserver"),
            &args([
                ("--etcd-servers", etcd_url),
                ("--bind-address", "127.0.0.1".into()),
                ("--advertise-address", "127.0.0.1".into()),
                ("--secure-port", api_port.to_string()),
                ("--cert-dir", path(&pki_dir)),
                ("--tls-cert-file", path(&pki.serving_cert)),
                ("--tls-private-key-file", path(&pki.serving_key)),
                ("--client-ca-file", path(&pki.ca_cert)),
                ("--token-auth-file", path(&pki.token_file)),
                ("--authorization-mode", "Node,RBAC".into()),
                (
                    "--service-account-issuer",
                    "https://kubernetes.default.svc".into(),
                ),
                (
                    "--service-account-key-file",
                    path(&pki.service_account_public_key),
                ),
                (
                    "--service-account-signing-key-file",
                    path(&pki.service_account_key),
                ),
                ("--api-audiences", "https://kubernetes.default.svc".into()),
                ("--service-cluster-ip-range", "10.96.0.0/12".into()),
                ("--endpoint-reconciler-type", "none".into()),
                ("--enable-admission-plugins", ADMISSION_PLUGINS.into()),
                (
                    "--requestheader-client-ca-file",
                    path(&pki.front_proxy_ca_cert),
                ),
                ("--requestheader-allowed-names", "front-proxy-client".into()),
                (
                    "--requestheader-extra-headers-prefix",
                    "X-Remote-Extra-".into(),
                ),
                ("--requestheader-group-headers", "X-Remote-Group".into()),
                ("--requestheader-username-headers", "X-Remote-User".into()),
                (
                    "--proxy-client-cert-file",
                    path(&pki.front_proxy_client_cert),
                ),
                ("--proxy-client-key-file", path(&pki.front_proxy_client_key)),
            ]),
        )?;
        let client = crate::kubeconfig::client_from_kubeconfig(&kubeconfig).await?;
        wait_ready(&client, &mut etcd, &mut apiserver).await?;
        let controller_manager = Server::start(
            "kube-controller-manager",
            root,
            &assets.join("kube-controller-manager"),
            &args([
                ("--kubeconfig", path(&kcm_kubeconfig)),
                ("--authentication-kubeconfig", path(&kcm_kubeconfig)),
                ("--authorization-kubeconfig", path(&kcm_kubeconfig)),
                ("--bind-address", "127.0.0.1".into()),
                ("--secure-port", "0".into()),
                ("--leader-elect", "false".into()),
                ("--use-service-account-credentials", "true".into()),
                (
                    "--service-account-private-key-file",
                    path(&pki.service_account_key),
                ),
                ("--root-ca-file", path(&pki.ca_cert)),
                ("--cluster-signing-cert-file", path(&pki.ca_cert)),
                ("--cluster-signing-key-file", path(&pki.ca_key)),
                ("--service-cluster-ip-range", "10.96.0.0/12".into()),
                ("--controllers", CONTROLLERS.into()),
            ]),
        )?;
        Ok(KubeControlPlane {
            controller_manager,
            apiserver,
            etcd,
            pki,
            kubeconfig,
            server_url,
            dir,
        })
    }

    /// The admin's kubeconfig (static token, group `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The certificates, keys and tokens, e.g. the CA to trust or to sign client certificates
    /// with.
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// The servers' log files, for failure reports.
    pub fn logs(&self) -> [&Path; 3] {
        [
            self.etcd.log(),
            self.apiserver.log(),
            self.controller_manager.log(),
        ]
    }

    /// `Err` naming the first server that has exited, with the end of its log.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        self.etcd.check_running()?;
        self.apiserver.check_running()?;
        self.controller_manager.check_running()
    }
}

/// A loopback port nobody listened on a moment ago.
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// `--flag=value` arguments: Go's boolean flags take their value only after `=`.
fn args<const N: usize>(flags: [(&str, String); N]) -> Vec<String> {
    flags
        .into_iter()
        .map(|(flag, value)| format!("{flag}={value}"))
        .collect()
}

/// Writes a kubeconfig with one cluster, one token user and one context.
fn write_kubeconfig(
    file: &Path,
    server: &str,
    ca: &Path,
    user: &str,
    token: &str,
) -> anyhow::Result<()> {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "herd-e2e", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "herd-e2e", "context": {"cluster": "herd-e2e", "user": user, "namespace": "default"}}],
        "current-context": "herd-e2e",
    });
    std::fs::write(file, serde_saphyr::to_string(&config)?)
        .with_context(|| format!("writing {}", file.display()))
}

/// Polls `/readyz` until it answers `ok`, failing early when etcd or the API server exits.
async fn wait_ready(
    client: &Client,
    etcd: &mut Server,
    apiserver: &mut Server,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < READY_TIMEOUT {
        etcd.check_running()?;
        apiserver.check_running()?;
        let request = http_get("/readyz")?;
        match client.request_text(request).await {
            Ok(text) if text.trim() == "ok" => return Ok(()),
            Ok(text) => last = text,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!(
        "kube-apiserver was not ready within {READY_TIMEOUT:?} (last answer: {last}); the end of its log:\n{}",
        apiserver.log_tail(40)
    )
}

fn http_get(path: &str) -> anyhow::Result<http::Request<Vec<u8>>> {
    Ok(http::Request::get(path).body(Vec::new())?)
}
