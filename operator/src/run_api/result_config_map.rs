//! The ConfigMap `<run>-result`, owned by the Run: the whole answer in `data["answer.md"]`, the
//! presented files in `binaryData["f-<n>"]`, listed in `data["files.json"]` as `[{key, path,
//! size}]`. Capped at [`MAX_RESULT_BYTES`] as stored (files count as their base64), so it always
//! fits etcd; past that the Run fails `ResultTooLarge`, never silently. Written before the report.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use herd_crds::report::Artifact;
use herd_crds::wire::PresentedFile;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::api::{Api, PostParams};
use serde::{Deserialize, Serialize};

use super::failure::Failure;
use crate::controller::run_objects::owned_by;
use crate::decide::run_owned::{Cached, run_owned};

/// Most bytes of a result ConfigMap's data as stored (~900 KiB).
pub const MAX_RESULT_BYTES: usize = 900 * 1024;
/// The key of the whole answer.
pub const ANSWER_KEY: &str = "answer.md";
/// The key of the file list.
pub const FILES_KEY: &str = "files.json";
/// Where presented files live, in the runner's virtual paths.
pub const OUTPUTS: &str = "/mnt/user-data/outputs/";
/// Large tool outputs kept for the model, never a deliverable.
pub const TOOL_RESULTS: &str = ".tool-results";
/// Most characters of a presented file's path (`Artifact.path`).
const MAX_PATH: usize = 1024;
/// Most files listed in `status.report.result.artifacts`.
pub const MAX_FILES: usize = 100;

/// One entry of `files.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    /// Its key in `binaryData`.
    pub key: String,
    /// Its virtual path under `/mnt/user-data/outputs/`.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
}

/// The name of a Run's result ConfigMap.
pub fn result_name(run: &str) -> String {
    format!("{run}-result")
}

/// A presented file's path, refused unless it is a plain path under `outputs/` outside
/// `.tool-results/`.
fn checked_path(path: &str) -> Result<(), String> {
    let rest = path
        .strip_prefix(OUTPUTS)
        .ok_or_else(|| format!("{path:?} is not under {OUTPUTS}"))?;
    if path.chars().count() > MAX_PATH {
        return Err(format!("a path is over {MAX_PATH} characters"));
    }
    let parts: Vec<&str> = rest.split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == ".." || p.contains('\0'))
    {
        return Err(format!("{path:?} is not a plain file path"));
    }
    if parts.first() == Some(&TOOL_RESULTS) {
        return Err(format!("{path:?} is a kept tool output, not a deliverable"));
    }
    Ok(())
}

/// The files of a result, decoded and checked.
pub fn decode_files(files: &[PresentedFile]) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    if files.len() > MAX_FILES {
        return Err(Failure::bad_request(format!(
            "{} files presented; at most {MAX_FILES}",
            files.len()
        )));
    }
    files
        .iter()
        .map(|file| {
            checked_path(&file.path).map_err(Failure::bad_request)?;
            let bytes = STANDARD.decode(&file.data_base64).map_err(|e| {
                Failure::bad_request(format!("{}: dataBase64 is not base64: {e}", file.path))
            })?;
            Ok((file.path.clone(), bytes))
        })
        .collect()
}

/// The result ConfigMap and the artifacts it lists, or why it is too large.
pub fn result_config_map(
    run: &str,
    namespace: &str,
    owner: OwnerReference,
    answer: &str,
    files: &[(String, Vec<u8>)],
) -> Result<(ConfigMap, Vec<Artifact>), String> {
    let entries: Vec<FileEntry> = files
        .iter()
        .enumerate()
        .map(|(n, (path, bytes))| FileEntry {
            key: format!("f-{n}"),
            path: path.clone(),
            size: bytes.len() as u64,
        })
        .collect();
    // invariant: a Vec of plain structs always serializes.
    let listing = serde_json::to_string(&entries).unwrap_or_else(|_| "[]".to_owned());
    let encoded: usize = files.iter().map(|(_, b)| b.len().div_ceil(3) * 4).sum();
    let total = answer.len() + listing.len() + encoded;
    if total > MAX_RESULT_BYTES {
        return Err(format!(
            "the answer ({} bytes) and {} presented files take {total} bytes in ConfigMap {}, \
             over its limit of {MAX_RESULT_BYTES}",
            answer.len(),
            files.len(),
            result_name(run)
        ));
    }
    let binary: BTreeMap<String, ByteString> = entries
        .iter()
        .zip(files)
        .map(|(entry, (_, bytes))| (entry.key.clone(), ByteString(bytes.clone())))
        .collect();
    let artifacts = entries
        .iter()
        .map(|e| Artifact {
            path: e.path.clone(),
            size: e.size,
        })
        .collect();
    let config_map = ConfigMap {
        // Out of the caches: results are large and read by nobody there.
        metadata: run_owned(result_name(run), run, namespace, owner, Cached::No),
        data: Some(BTreeMap::from([
            (ANSWER_KEY.to_owned(), answer.to_owned()),
            (FILES_KEY.to_owned(), listing),
        ])),
        binary_data: (!binary.is_empty()).then_some(binary),
        ..ConfigMap::default()
    };
    Ok((config_map, artifacts))
}

/// The `n`-th file a result ConfigMap lists: its path and its bytes; `None` when there is no
/// such file (or the ConfigMap is not a result's).
pub fn presented_file(config_map: &ConfigMap, n: usize) -> Option<(String, &[u8])> {
    let listing = config_map.data.as_ref()?.get(FILES_KEY)?;
    let entry = serde_json::from_str::<Vec<FileEntry>>(listing)
        .ok()?
        .into_iter()
        .nth(n)?;
    let bytes = config_map.binary_data.as_ref()?.get(&entry.key)?;
    Some((entry.path, bytes.0.as_slice()))
}

/// Creates the result ConfigMap; one already there is replaced when it is this Run's (a retried
/// post, or a later attempt), never adopted when it is not.
pub async fn write_result_config_map(
    client: &Client,
    run_uid: &str,
    desired: ConfigMap,
) -> Result<(), Failure> {
    let namespace = desired.metadata.namespace.clone().unwrap_or_default();
    let name = desired.metadata.name.clone().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let writing = format!("writing ConfigMap {name}");
    match api.create(&PostParams::default(), &desired).await {
        Ok(_) => return Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => return Err(Failure::kube(&writing, &error)),
    }
    let existing = api
        .get(&name)
        .await
        .map_err(|e| Failure::kube(&writing, &e))?;
    if !owned_by(&existing, run_uid) {
        return Err(Failure::internal(format!(
            "ConfigMap {name} exists and is not this Run's"
        )));
    }
    if existing.data == desired.data && existing.binary_data == desired.binary_data {
        return Ok(());
    }
    let mut next = desired;
    next.metadata.resource_version = existing.metadata.resource_version;
    api.replace(&name, &PostParams::default(), &next)
        .await
        .map_err(|e| Failure::kube(&writing, &e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::fixtures::run_owner;
    use crate::labels;
    use proptest::prelude::*;

    fn owner() -> OwnerReference {
        run_owner("r", "u")
    }

    fn file(path: &str, bytes: &[u8]) -> PresentedFile {
        PresentedFile {
            path: path.into(),
            data_base64: STANDARD.encode(bytes),
        }
    }

    #[test]
    fn the_layout_is_answer_files_json_and_binary_data() {
        let files = decode_files(&[
            file("/mnt/user-data/outputs/brief.md", b"# Brief"),
            file("/mnt/user-data/outputs/img/plot.png", &[0, 159, 146, 150]),
        ])
        .unwrap();
        let (cm, artifacts) = result_config_map("r", "ns", owner(), "The answer.", &files).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("r-result"));
        assert_eq!(cm.metadata.owner_references, Some(vec![owner()]));
        let data = cm.data.unwrap();
        assert_eq!(data[ANSWER_KEY], "The answer.");
        let listed: Vec<FileEntry> = serde_json::from_str(&data[FILES_KEY]).unwrap();
        assert_eq!(
            listed,
            vec![
                FileEntry {
                    key: "f-0".into(),
                    path: "/mnt/user-data/outputs/brief.md".into(),
                    size: 7
                },
                FileEntry {
                    key: "f-1".into(),
                    path: "/mnt/user-data/outputs/img/plot.png".into(),
                    size: 4
                },
            ]
        );
        let binary = cm.binary_data.unwrap();
        assert_eq!(binary["f-1"].0, vec![0, 159, 146, 150], "binary allowed");
        assert_eq!(artifacts[0].size, 7);
        assert_eq!(artifacts[1].path, "/mnt/user-data/outputs/img/plot.png");
        let labels = cm.metadata.labels.unwrap();
        assert_eq!(labels[labels::RUN], "r");
        assert!(
            !labels.contains_key(labels::MANAGED_BY),
            "kept out of the caches"
        );
    }

    #[test]
    fn presented_files_are_read_back_by_their_place_in_the_list() {
        let files = vec![
            (
                "/mnt/user-data/outputs/brief.md".to_owned(),
                b"# Brief".to_vec(),
            ),
            (
                "/mnt/user-data/outputs/img/plot.png".to_owned(),
                vec![0, 159, 255],
            ),
        ];
        let (cm, _) = result_config_map("r", "ns", owner(), "answer", &files).unwrap();
        for (n, (path, bytes)) in files.iter().enumerate() {
            assert_eq!(
                presented_file(&cm, n),
                Some((path.clone(), bytes.as_slice()))
            );
        }
        assert_eq!(presented_file(&cm, 2), None, "past the list");
        let (empty, _) = result_config_map("r", "ns", owner(), "answer", &[]).unwrap();
        assert_eq!(presented_file(&empty, 0), None, "no files");
        assert_eq!(
            presented_file(&ConfigMap::default(), 0),
            None,
            "not a result"
        );
        let mut missing = cm.clone();
        if let Some(binary) = missing.binary_data.as_mut() {
            binary.remove("f-1");
        }
        assert_eq!(presented_file(&missing, 1), None, "listed, not stored");
        let mut garbled = cm;
        if let Some(data) = garbled.data.as_mut() {
            data.insert(FILES_KEY.to_owned(), "not json".to_owned());
        }
        assert_eq!(presented_file(&garbled, 0), None);
    }

    #[test]
    fn no_files_is_an_empty_list() {
        let (cm, artifacts) = result_config_map("r", "ns", owner(), "", &[]).unwrap();
        assert_eq!(cm.data.unwrap()[FILES_KEY], "[]");
        assert_eq!(cm.binary_data, None);
        assert!(artifacts.is_empty());
    }

    #[test]
    fn past_about_900_kib_as_stored_it_is_too_large() {
        let fits = vec![("/mnt/user-data/outputs/a".to_owned(), vec![7u8; 600 * 1024])];
        assert!(result_config_map("r", "ns", owner(), "", &fits).is_ok());
        // 700 KiB of binary is 933 KiB of base64.
        let over = vec![("/mnt/user-data/outputs/a".to_owned(), vec![7u8; 700 * 1024])];
        let why = result_config_map("r", "ns", owner(), "", &over).unwrap_err();
        assert!(why.contains("over its limit of 921600"), "{why}");
        let long_answer = "x".repeat(MAX_RESULT_BYTES);
        assert!(result_config_map("r", "ns", owner(), &long_answer, &[]).is_err());
    }

    #[test]
    fn only_plain_deliverables_are_accepted() {
        for refused in [
            "/mnt/user-data/workspace/a.md",
            "/mnt/user-data/outputs/",
            "/mnt/user-data/outputs/../secrets",
            "/mnt/user-data/outputs/a//b",
            "/mnt/user-data/outputs/./a",
            "/mnt/user-data/outputs/.tool-results/bash-call_1.txt",
            "outputs/a.md",
        ] {
            let error = decode_files(&[file(refused, b"x")]).unwrap_err();
            assert_eq!(error.status.as_u16(), 400, "{refused}");
        }
        assert!(decode_files(&[file("/mnt/user-data/outputs/notes/.tool-results", b"x")]).is_ok());
        let bad = PresentedFile {
            path: "/mnt/user-data/outputs/a".into(),
            data_base64: "not base64!".into(),
        };
        assert!(
            decode_files(&[bad])
                .unwrap_err()
                .message
                .contains("not base64")
        );
        let many: Vec<PresentedFile> = (0..=MAX_FILES)
            .map(|i| file(&format!("/mnt/user-data/outputs/{i}"), b""))
            .collect();
        assert_eq!(decode_files(&many).unwrap_err().status.as_u16(), 400);
    }

    proptest! {
        #[test]
        fn accepted_paths_stay_under_outputs(path in "(/mnt/user-data/outputs/)?[a-z./]{0,20}") {
            if checked_path(&path).is_ok() {
                let rest = path.strip_prefix(OUTPUTS).unwrap();
                prop_assert!(!rest.split('/').any(|p| p == ".." || p == "." || p.is_empty()));
                prop_assert!(!rest.starts_with(".tool-results/"));
            }
        }
    }
}
