//! One version of a Skill: its digest, and the immutable ConfigMap `<skill>-<digest8>` that
//! pods mount.

use std::collections::BTreeMap;

use herd_crds::skill::SkillSpec;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sha2::{Digest, Sha256};

use super::file_keys;
use crate::labels;

/// The ConfigMap key of the SKILL.md text.
pub const SKILL_MD_KEY: &str = "SKILL.md";

/// Most bytes of keys and values in one rendered ConfigMap. The API server refuses objects over
/// 1 MiB; the rest is left for metadata.
pub const MAX_CONFIG_MAP_BYTES: usize = 1_000_000;

/// Longest ConfigMap key.
const MAX_KEY_LEN: usize = 253;

/// SHA-256 (hex) of a skill's content and files, independent of map order and unambiguous
/// (each part is length-prefixed), so equal skills have equal digests everywhere.
pub fn digest(content: &str, files: &BTreeMap<String, String>) -> String {
    let mut hasher = Sha256::new();
    let mut part = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_be_bytes());
        hasher.update(bytes);
    };
    part(SKILL_MD_KEY.as_bytes());
    part(content.as_bytes());
    for (path, text) in files {
        part(path.as_bytes());
        part(text.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// The name of the ConfigMap holding the version with `digest`.
pub fn config_map_name(skill: &str, digest: &str) -> String {
    let short = digest.get(..8).unwrap_or(digest);
    format!("{skill}-{short}")
}

/// Why a Skill's files cannot become a ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// Content and files exceed what one ConfigMap holds.
    #[error("content and files take {0} bytes; one ConfigMap holds at most {MAX_CONFIG_MAP_BYTES}")]
    TooLarge(usize),
    /// A path encodes into a key longer than a ConfigMap allows.
    #[error("file path `{0}` is too long for a ConfigMap key")]
    PathTooLong(String),
    /// A path that is not a relative path inside the skill's folder.
    #[error("file path `{0}` must be relative, without `..` or empty segments")]
    InvalidPath(String),
    /// A file named like the skill's own SKILL.md.
    #[error("file path `SKILL.md` is reserved for spec.content")]
    ReservedPath,
}

/// The ConfigMap data of a Skill: `SKILL.md` plus each file under its encoded key.
pub fn config_map_data(spec: &SkillSpec) -> Result<BTreeMap<String, String>, RenderError> {
    let mut data = BTreeMap::new();
    let mut size = SKILL_MD_KEY.len() + spec.content.len();
    data.insert(SKILL_MD_KEY.to_owned(), spec.content.clone());
    for (path, text) in &spec.files {
        if path == SKILL_MD_KEY {
            return Err(RenderError::ReservedPath);
        }
        if !is_relative_path(path) {
            return Err(RenderError::InvalidPath(path.clone()));
        }
        let key = file_keys::encode(path);
        if key.len() > MAX_KEY_LEN {
            return Err(RenderError::PathTooLong(path.clone()));
        }
        size += key.len() + text.len();
        data.insert(key, text.clone());
    }
    if size > MAX_CONFIG_MAP_BYTES {
        return Err(RenderError::TooLarge(size));
    }
    Ok(data)
}

/// Relative, inside the folder: no leading `/`, no empty, `.` or `..` segment.
fn is_relative_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
}

/// The immutable ConfigMap of one Skill version, owned by the Skill (its controller).
pub fn desired_config_map(
    skill_name: &str,
    namespace: &str,
    owner: OwnerReference,
    digest: &str,
    data: BTreeMap<String, String>,
) -> ConfigMap {
    let short = digest.get(..8).unwrap_or(digest);
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(config_map_name(skill_name, digest)),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned()),
                (labels::SKILL.to_owned(), skill_name.to_owned()),
                (labels::SKILL_DIGEST.to_owned(), short.to_owned()),
            ])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        immutable: Some(true),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn spec(content: &str, files: &[(&str, &str)]) -> SkillSpec {
        SkillSpec {
            content: content.to_owned(),
            files: files
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            enabled: true,
        }
    }

    #[test]
    fn digest_is_stable_and_sensitive() {
        let files = BTreeMap::from([("a".to_owned(), "1".to_owned())]);
        let d = digest("x", &files);
        assert_eq!(d.len(), 64);
        assert_eq!(d, digest("x", &files.clone()));
        assert_ne!(
            d,
            digest("x1", &BTreeMap::new()),
            "boundaries are unambiguous"
        );
        assert_ne!(d, digest("y", &files));
        assert_ne!(
            d,
            digest("x", &BTreeMap::from([("a".to_owned(), "2".to_owned())]))
        );
        assert_eq!(config_map_name("web", &d), format!("web-{}", &d[..8]));
    }

    #[test]
    fn data_encodes_paths() {
        let data = config_map_data(&spec("md", &[("scripts/run.py", "print()")])).unwrap();
        assert_eq!(data["SKILL.md"], "md");
        assert_eq!(data["scripts_-run.py"], "print()");
        assert_eq!(data.len(), 2);
    }

    #[test]
    fn refuses_what_a_config_map_cannot_hold() {
        let big = "x".repeat(MAX_CONFIG_MAP_BYTES);
        assert!(matches!(
            config_map_data(&spec(&big, &[])),
            Err(RenderError::TooLarge(_))
        ));
        let long = "a/".repeat(130) + "b";
        assert_eq!(
            config_map_data(&spec("md", &[(&long, "")])),
            Err(RenderError::PathTooLong(long.clone()))
        );
        for bad in ["/etc/passwd", "a/../b", "a//b", "./a", ""] {
            assert_eq!(
                config_map_data(&spec("md", &[(bad, "")])),
                Err(RenderError::InvalidPath(bad.to_owned())),
                "{bad}"
            );
        }
        assert_eq!(
            config_map_data(&spec("md", &[("SKILL.md", "")])),
            Err(RenderError::ReservedPath)
        );
    }

    #[test]
    fn config_map_is_immutable_labelled_and_owned() {
        let owner = OwnerReference {
            api_version: "herd.dev/v1alpha1".into(),
            kind: "Skill".into(),
            name: "web".into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let d = digest("md", &BTreeMap::new());
        let cm = desired_config_map(
            "web",
            "ns",
            owner.clone(),
            &d,
            BTreeMap::from([("SKILL.md".into(), "md".into())]),
        );
        assert_eq!(cm.immutable, Some(true));
        assert_eq!(cm.metadata.name, Some(config_map_name("web", &d)));
        assert_eq!(cm.metadata.owner_references, Some(vec![owner]));
        let labels = cm.metadata.labels.unwrap();
        assert_eq!(labels[labels::MANAGED_BY], labels::MANAGER);
        assert_eq!(labels[labels::SKILL], "web");
        assert_eq!(labels[labels::SKILL_DIGEST], &d[..8]);
    }

    proptest! {
        #[test]
        fn relative_paths_never_escape(path in "[a-z./]{0,12}") {
            if is_relative_path(&path) {
                prop_assert!(!path.starts_with('/'));
                prop_assert!(!path.split('/').any(|s| s == ".." || s.is_empty()));
            }
        }
    }
}
