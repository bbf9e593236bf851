//! What each volume of a Pod is on this node, and the files of the ConfigMap, Secret,
//! projected and downward-API ones, decided from the Pod and what the API returned for it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, KeyToPath, Pod, Volume};

use super::atomic_writer::File;
use super::env::{Sources, pod_field};

/// The mode of a volume's files unless it says otherwise.
const DEFAULT_MODE: u32 = 0o644;
/// A projected token's lifetime unless the projection says otherwise (the API's default).
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

/// How this node provides one volume.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeKind {
    /// A folder of the Pod's own, shared by its containers (`medium` and `sizeLimit` are not
    /// applied).
    EmptyDir,
    /// A host path, bound as it is.
    HostPath(PathBuf),
    /// A PersistentVolumeClaim: a folder of this node named after the claim, kept across
    /// Pods.
    Claim {
        /// The claim's name.
        name: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// Files in the atomic-writer layout, read-only in the containers.
    Files {
        /// Where the files come from, in order; two files at one path are refused.
        sources: Vec<FileSource>,
        /// `defaultMode`.
        default_mode: u32,
    },
    /// A kind this node cannot provide; why.
    Unsupported(String),
}

/// One source of files.
#[derive(Debug, Clone, PartialEq)]
pub enum FileSource {
    /// A ConfigMap's keys.
    ConfigMap {
        /// Its name.
        name: String,
        /// The keys to write and where, or every key at its own name.
        items: Option<Vec<KeyToPath>>,
        /// A missing ConfigMap (or item key) is no error.
        optional: bool,
    },
    /// A Secret's keys.
    Secret {
        /// Its name.
        name: String,
        /// The keys to write and where, or every key at its own name.
        items: Option<Vec<KeyToPath>>,
        /// A missing Secret (or item key) is no error.
        optional: bool,
    },
    /// A ServiceAccount token for the Pod.
    Token {
        /// What it is requested with.
        key: TokenKey,
        /// The file's path.
        path: String,
    },
    /// Fields of the Pod.
    Downward(Vec<DownwardAPIVolumeFile>),
}

/// What a projected token is requested with (the ServiceAccount is the Pod's).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TokenKey {
    /// The audience; empty for the API server's own.
    pub audience: String,
    /// The lifetime asked for.
    pub expiration_seconds: i64,
}

/// What the API returned for the Pod's volumes.
#[derive(Debug, Clone, Default)]
pub struct Fetched {
    /// Secrets and ConfigMaps by name (`None`: not found).
    pub sources: Sources,
    /// Tokens requested for the Pod.
    pub tokens: BTreeMap<TokenKey, String>,
}

/// What `volume` is on this node. Over 80 lines: one case per kind of volume the kubelet
/// serves, in one place.
pub fn volume_kind(volume: &Volume) -> VolumeKind {
    let mode = |m: Option<i32>| {
        m.and_then(|m| u32::try_from(m).ok())
            .unwrap_or(DEFAULT_MODE)
    };
    if volume.empty_dir.is_some() {
        return VolumeKind::EmptyDir;
    }
    if let Some(host) = &volume.host_path {
        return VolumeKind::HostPath(PathBuf::from(&host.path));
    }
    if let Some(claim) = &volume.persistent_volume_claim {
        return VolumeKind::Claim {
            name: claim.claim_name.clone(),
            read_only: claim.read_only.unwrap_or(false),
        };
    }
    if let Some(map) = &volume.config_map {
        return VolumeKind::Files {
            sources: vec![FileSource::ConfigMap {
                name: map.name.clone(),
                items: map.items.clone(),
                optional: map.optional.unwrap_or(false),
            }],
            default_mode: mode(map.default_mode),
        };
    }
    if let Some(secret) = &volume.secret {
        return VolumeKind::Files {
            sources: vec![FileSource::Secret {
                name: secret.secret_name.clone().unwrap_or_default(),
                items: secret.items.clone(),
                optional: secret.optional.unwrap_or(false),
            }],
            default_mode: mode(secret.default_mode),
        };
    }
    if let Some(downward) = &volume.downward_api {
        return VolumeKind::Files {
            sources: vec![FileSource::Downward(
                downward.items.clone().unwrap_or_default(),
            )],
            default_mode: mode(downward.default_mode),
        };
    }
    if let Some(projected) = &volume.projected {
        let mut sources = Vec::new();
        for projection in projected.sources.iter().flatten() {
            if let Some(map) = &projection.config_map {
                sources.push(FileSource::ConfigMap {
                    name: map.name.clone(),
                    items: map.items.clone(),
                    optional: map.optional.unwrap_or(false),
                });
            } else if let Some(secret) = &projection.secret {
                sources.push(FileSource::Secret {
                    name: secret.name.clone(),
                    items: secret.items.clone(),
                    optional: secret.optional.unwrap_or(false),
                });
            } else if let Some(token) = &projection.service_account_token {
                sources.push(FileSource::Token {
                    key: TokenKey {
                        audience: token.audience.clone().unwrap_or_default(),
                        expiration_seconds: token
                            .expiration_seconds
                            .unwrap_or(DEFAULT_TOKEN_SECONDS),
                    },
                    path: token.path.clone(),
                });
            } else if let Some(downward) = &projection.downward_api {
                sources.push(FileSource::Downward(
                    downward.items.clone().unwrap_or_default(),
                ));
            } else {
                return VolumeKind::Unsupported(format!(
                    "projected volume {:?} has a source local-kubelet does not support \
                     (only configMap, secret, serviceAccountToken and downwardAPI)",
                    volume.name
                ));
            }
        }
        return VolumeKind::Files {
            sources,
            default_mode: mode(projected.default_mode),
        };
    }
    VolumeKind::Unsupported(format!(
        "volume {:?} is of a kind local-kubelet does not support",
        volume.name
    ))
}

/// What the file sources of a Pod's volumes need from the API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// Secret names.
    pub secrets: BTreeSet<String>,
    /// ConfigMap names.
    pub config_maps: BTreeSet<String>,
    /// Tokens.
    pub tokens: BTreeSet<TokenKey>,
}

/// What `sources` need.
pub fn needs<'a>(sources: impl IntoIterator<Item = &'a FileSource>) -> Needs {
    let mut needs = Needs::default();
    for source in sources {
        match source {
            FileSource::ConfigMap { name, .. } => {
                needs.config_maps.insert(name.clone());
            }
            FileSource::Secret { name, .. } => {
                needs.secrets.insert(name.clone());
            }
            FileSource::Token { key, .. } => {
                needs.tokens.insert(key.clone());
            }
            FileSource::Downward(_) => {}
        }
    }
    needs
}

/// The files of a volume made of `sources`; an error names what is missing.
pub fn volume_files(
    sources: &[FileSource],
    default_mode: u32,
    fetched: &Fetched,
    pod: &Pod,
    node: &str,
) -> Result<Vec<File>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut files = Vec::new();
    for source in sources {
        match source {
            FileSource::ConfigMap {
                name,
                items,
                optional,
            } => {
                let data = fetched
                    .sources
                    .config_maps
                    .get(name)
                    .and_then(Option::as_ref);
                let Some(data) = data else {
                    if *optional {
                        continue;
                    }
                    return Err(format!("configmap \"{name}\" not found"));
                };
                keyed_files(data, items.as_deref(), *optional, default_mode, &mut files)
                    .map_err(|key| format!("configmap {namespace}/{name} has no key {key:?}"))?;
            }
            FileSource::Secret {
                name,
                items,
                optional,
            } => {
                let data = fetched.sources.secrets.get(name).and_then(Option::as_ref);
                let Some(data) = data else {
                    if *optional {
                        continue;
                    }
                    return Err(format!("secret \"{name}\" not found"));
                };
                keyed_files(data, items.as_deref(), *optional, default_mode, &mut files)
                    .map_err(|key| format!("secret {namespace}/{name} has no key {key:?}"))?;
            }
            FileSource::Token { key, path } => {
                let token = fetched
                    .tokens
                    .get(key)
                    .ok_or_else(|| format!("no token for audience {:?} yet", key.audience))?;
                files.push(File {
                    path: path.clone(),
                    data: token.as_bytes().to_vec(),
                    mode: default_mode,
                });
            }
            FileSource::Downward(items) => {
                for item in items {
                    let Some(field) = &item.field_ref else {
                        return Err(format!(
                            "downwardAPI item {:?}: resourceFieldRef is not supported by \
                             local-kubelet",
                            item.path
                        ));
                    };
                    let value = pod_field(pod, node, &field.field_path)?;
                    files.push(File {
                        path: item.path.clone(),
                        data: value.into_bytes(),
                        mode: item_mode(item.mode, default_mode),
                    });
                }
            }
        }
    }
    Ok(files)
}

/// The files of one ConfigMap or Secret; `Err` with a key `items` names that is missing.
fn keyed_files(
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    optional: bool,
    default_mode: u32,
    files: &mut Vec<File>,
) -> Result<(), String> {
    let Some(items) = items.filter(|items| !items.is_empty()) else {
        files.extend(data.iter().map(|(key, value)| File {
            path: key.clone(),
            data: value.clone(),
            mode: default_mode,
        }));
        return Ok(());
    };
    for item in items {
        match data.get(&item.key) {
            Some(value) => files.push(File {
                path: item.path.clone(),
                data: value.clone(),
                mode: item_mode(item.mode, default_mode),
            }),
            None if optional => {}
            None => return Err(item.key.clone()),
        }
    }
    Ok(())
}

fn item_mode(mode: Option<i32>, default_mode: u32) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok())
        .unwrap_or(default_mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn volume(value: serde_json::Value) -> Volume {
        serde_json::from_value(value).unwrap()
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}})).unwrap()
    }

    fn fetched() -> Fetched {
        Fetched {
            sources: Sources {
                secrets: BTreeMap::from([(
                    "s".to_owned(),
                    Some(BTreeMap::from([("pw".to_owned(), b"hunter2".to_vec())])),
                )]),
                config_maps: BTreeMap::from([
                    (
                        "ca".to_owned(),
                        Some(BTreeMap::from([
                            ("ca.crt".to_owned(), b"PEM".to_vec()),
                            ("other".to_owned(), b"x".to_vec()),
                        ])),
                    ),
                    ("gone".to_owned(), None),
                ]),
            },
            tokens: BTreeMap::from([(
                TokenKey {
                    audience: "herd.dev".into(),
                    expiration_seconds: 600,
                },
                "jwt".to_owned(),
            )]),
        }
    }

    fn files_of(v: &Volume) -> Result<Vec<(String, String, u32)>, String> {
        let VolumeKind::Files {
            sources,
            default_mode,
        } = volume_kind(v)
        else {
            panic!("not files: {v:?}");
        };
        Ok(
            volume_files(&sources, default_mode, &fetched(), &pod(), "n")?
                .into_iter()
                .map(|f| (f.path, String::from_utf8(f.data).unwrap(), f.mode))
                .collect(),
        )
    }

    #[test]
    fn herds_api_volume_is_the_token_and_the_ca() {
        let v = volume(json!({"name": "herd-api", "projected": {"sources": [
            {"serviceAccountToken": {"audience": "herd.dev", "expirationSeconds": 600,
                                     "path": "token"}},
            {"configMap": {"name": "ca", "items": [{"key": "ca.crt", "path": "ca.crt"}],
                           "optional": false}}]}}));
        assert_eq!(
            files_of(&v).unwrap(),
            [
                ("token".to_owned(), "jwt".to_owned(), 0o644),
                ("ca.crt".to_owned(), "PEM".to_owned(), 0o644)
            ]
        );
        let VolumeKind::Files { sources, .. } = volume_kind(&v) else {
            panic!()
        };
        let needs = needs(&sources);
        assert_eq!(needs.config_maps, BTreeSet::from(["ca".to_owned()]));
        assert_eq!(needs.tokens.len(), 1);
    }

    #[test]
    fn config_maps_and_secrets_write_every_key_or_their_items() {
        let all = volume(json!({"name": "v", "configMap": {"name": "ca", "defaultMode": 0o600}}));
        assert_eq!(
            files_of(&all).unwrap(),
            [
                ("ca.crt".to_owned(), "PEM".to_owned(), 0o600),
                ("other".to_owned(), "x".to_owned(), 0o600)
            ]
        );
        let items = volume(json!({"name": "v", "secret": {"secretName": "s",
            "items": [{"key": "pw", "path": "deep/pw.txt", "mode": 0o400}]}}));
        assert_eq!(
            files_of(&items).unwrap(),
            [("deep/pw.txt".to_owned(), "hunter2".to_owned(), 0o400)]
        );
    }

    #[test]
    fn missing_sources_are_errors_unless_optional() {
        let missing = volume(json!({"name": "v", "configMap": {"name": "gone"}}));
        assert_eq!(
            files_of(&missing).unwrap_err(),
            "configmap \"gone\" not found"
        );
        let optional =
            volume(json!({"name": "v", "configMap": {"name": "gone", "optional": true}}));
        assert_eq!(files_of(&optional).unwrap(), []);
        let key = volume(json!({"name": "v", "configMap": {"name": "ca",
            "items": [{"key": "nope", "path": "x"}]}}));
        assert!(files_of(&key).unwrap_err().contains("\"nope\""));
    }

    #[test]
    fn the_downward_api_writes_pod_fields() {
        let v = volume(json!({"name": "v", "downwardAPI": {"items": [
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}));
        assert_eq!(
            files_of(&v).unwrap(),
            [("name".to_owned(), "p".to_owned(), 0o644)]
        );
    }

    #[test]
    fn every_kind_of_volume_is_known_or_refused() {
        assert_eq!(
            volume_kind(&volume(
                json!({"name": "t", "emptyDir": {"medium": "Memory"}})
            )),
            VolumeKind::EmptyDir
        );
        assert_eq!(
            volume_kind(&volume(json!({"name": "w", "persistentVolumeClaim":
                {"claimName": "r-workspace"}}))),
            VolumeKind::Claim {
                name: "r-workspace".into(),
                read_only: false
            }
        );
        assert_eq!(
            volume_kind(&volume(json!({"name": "h", "hostPath": {"path": "/data"}}))),
            VolumeKind::HostPath("/data".into())
        );
        assert!(matches!(
            volume_kind(&volume(
                json!({"name": "n", "nfs": {"server": "s", "path": "/"}})
            )),
            VolumeKind::Unsupported(_)
        ));
    }
}
