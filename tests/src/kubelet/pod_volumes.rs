//! The volumes of one Pod on this machine: made ready before its containers start, and kept
//! up to date while it runs (ConfigMaps and Secrets read again, tokens renewed before they
//! expire), each file volume rewritten only when its files changed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;

use super::api;
use super::atomic_writer::{self, File};
use super::container_view::VolumeDir;
use super::lifecycle::add;
use super::token::Token;
use super::volume_plan::{
    Fetched, FileSource, TokenKey, VolumeKind, needs, volume_files, volume_kind,
};

/// How often ConfigMap and Secret volumes are read again.
const RESYNC: Duration = Duration::from_secs(60);

/// The volumes of one Pod.
#[derive(Debug)]
pub struct PodVolumes {
    root: PathBuf,
    claims: PathBuf,
    kinds: Vec<(String, VolumeKind)>,
    tokens: BTreeMap<TokenKey, Token>,
    written: BTreeMap<String, Vec<File>>,
    dirs: BTreeMap<String, VolumeDir>,
}

impl PodVolumes {
    /// The volumes of `pod`, kept under `root`; claims under `claims/<namespace>/<claim>`.
    pub fn new(pod: &Pod, root: PathBuf, claims: PathBuf) -> PodVolumes {
        let kinds = pod
            .spec
            .iter()
            .flat_map(|spec| spec.volumes.iter().flatten())
            .map(|volume| (volume.name.clone(), volume_kind(volume)))
            .collect();
        PodVolumes {
            root,
            claims,
            kinds,
            tokens: BTreeMap::new(),
            written: BTreeMap::new(),
            dirs: BTreeMap::new(),
        }
    }

    /// The host folders of the volumes made ready so far, by name.
    pub fn dirs(&self) -> &BTreeMap<String, VolumeDir> {
        &self.dirs
    }

    /// Makes every volume ready and up to date; `Err` says what is missing (the kubelet's
    /// `FailedMount`): try again later.
    pub async fn sync(
        &mut self,
        client: &Client,
        pod: &Pod,
        node: &str,
        now: Timestamp,
    ) -> Result<(), String> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let fetched = self.fetch(client, pod, &namespace, now).await?;
        for (name, kind) in self.kinds.clone() {
            let path = self.root.join(&name);
            let dir = match kind {
                VolumeKind::Unsupported(why) => return Err(why),
                VolumeKind::EmptyDir => {
                    create_dir(&path)?;
                    VolumeDir {
                        path,
                        writable: true,
                    }
                }
                VolumeKind::HostPath(host) => {
                    if !host.exists() {
                        create_dir(&host)?;
                    }
                    VolumeDir {
                        path: host,
                        writable: true,
                    }
                }
                VolumeKind::Claim {
                    name: claim,
                    read_only,
                } => {
                    match api::claim_exists(client, &namespace, &claim).await {
                        Ok(true) => {}
                        Ok(false) => {
                            return Err(format!("persistentvolumeclaim \"{claim}\" not found"));
                        }
                        Err(error) => return Err(format!("reading claim {claim}: {error}")),
                    }
                    let path = self.claims.join(&namespace).join(&claim);
                    create_dir(&path)?;
                    VolumeDir {
                        path,
                        writable: !read_only,
                    }
                }
                VolumeKind::Files {
                    sources,
                    default_mode,
                } => {
                    let files = volume_files(&sources, default_mode, &fetched, pod, node)
                        .map_err(|why| format!("volume {name:?}: {why}"))?;
                    if self.written.get(&name) != Some(&files) {
                        atomic_writer::write(&path, &files, now)
                            .map_err(|e| format!("writing volume {name:?}: {e}"))?;
                        self.written.insert(name.clone(), files);
                    }
                    VolumeDir {
                        path,
                        writable: false,
                    }
                }
            };
            self.dirs.insert(name, dir);
        }
        Ok(())
    }

    /// When [`PodVolumes::sync`] is due again: the first token renewal, or the next read of
    /// the ConfigMaps and Secrets.
    pub fn next_sync(&self, now: Timestamp) -> Timestamp {
        self.tokens
            .values()
            .map(Token::renew_at)
            .chain([add(now, RESYNC)])
            .min()
            .unwrap_or(now)
    }

    /// Reads what the file volumes need: every ConfigMap and Secret, and the tokens that are
    /// missing or due for renewal.
    async fn fetch(
        &mut self,
        client: &Client,
        pod: &Pod,
        namespace: &str,
        now: Timestamp,
    ) -> Result<Fetched, String> {
        let sources: Vec<&FileSource> = self
            .kinds
            .iter()
            .filter_map(|(_, kind)| match kind {
                VolumeKind::Files { sources, .. } => Some(sources),
                _ => None,
            })
            .flatten()
            .collect();
        let needs = needs(sources);
        let mut fetched = Fetched::default();
        for name in &needs.secrets {
            let data = api::secret(client, namespace, name)
                .await
                .map_err(|e| format!("reading secret {name}: {e}"))?;
            fetched.sources.secrets.insert(name.clone(), data);
        }
        for name in &needs.config_maps {
            let data = api::config_map(client, namespace, name)
                .await
                .map_err(|e| format!("reading configmap {name}: {e}"))?;
            fetched.sources.config_maps.insert(name.clone(), data);
        }
        self.tokens.retain(|key, _| needs.tokens.contains(key));
        let due: BTreeSet<TokenKey> = needs
            .tokens
            .iter()
            .filter(|key| self.tokens.get(key).is_none_or(|t| t.renew_at() <= now))
            .cloned()
            .collect();
        for key in due {
            let token = api::request_token(client, pod, &key).await.map_err(|e| {
                format!("requesting a token for audience {:?}: {e:#}", key.audience)
            })?;
            self.tokens.insert(key, token);
        }
        fetched.tokens = self
            .tokens
            .iter()
            .map(|(key, token)| (key.clone(), token.value.clone()))
            .collect();
        Ok(fetched)
    }
}

fn create_dir(path: &Path) -> Result<(), String> {
    std::fs::create_dir_all(path).map_err(|e| format!("creating {}: {e}", path.display()))
}
