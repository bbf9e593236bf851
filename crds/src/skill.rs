//! The `Skill` resource: a SKILL.md with its files, which Agents list by name.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::formats::is_relative_path;
use crate::rules;
use crate::validation::{Checker, validate_methods};

/// Most characters of `content` (256 KiB).
pub const MAX_CONTENT: usize = 262_144;
/// Most entries of `files`.
pub const MAX_FILES: usize = 64;

fn default_true() -> bool {
    true
}

/// The skill's text and files.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "herd.dev",
    version = "v1alpha1",
    kind = "Skill",
    namespaced,
    status = "SkillStatus",
    shortname = "hskill",
    category = "herd",
    derive = "PartialEq",
    doc = "A skill: instructions (SKILL.md) and resource files an agent reads when a task calls for them. Its name is the name Agents list in spec.skills.",
    validation = Rule::new(crate::rules::SKILL_NAME).message(crate::rules::SKILL_NAME_MESSAGE),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Description", type_ = "string", json_path = ".status.description", priority = 1)
)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::duplicated_attributes)]
pub struct SkillSpec {
    /// The SKILL.md text: YAML frontmatter between `---` lines (`name` equal to metadata.name,
    /// `description` of at most 1024 characters without `<` or `>`; optional `license`,
    /// `allowed-tools`, `version`...), then the instructions. At most 256 KiB.
    #[schemars(length(max = 262144))]
    pub content: String,
    /// Resource files next to SKILL.md, by relative path (e.g. `scripts/check.py`; no leading
    /// `/`, no `..` segment), as text of at most 256 KiB each. Content and files together must
    /// fit in one ConfigMap (about 1 MiB).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64, "additionalProperties" = {"type": "string", "maxLength": 262144}))]
    #[x_kube(validation = Rule::new(crate::rules::RELATIVE_KEYS).message(crate::rules::expression(crate::rules::RELATIVE_KEYS_MESSAGE)))]
    pub files: BTreeMap<String, String>,
    /// Whether agents get this skill. A disabled skill is not offered to any agent. Default
    /// true.
    #[serde(default = "default_true")]
    pub enabled: bool,
}

/// What the operator observed about a Skill.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillStatus {
    /// The `metadata.generation` this status describes.
    pub observed_generation: Option<i64>,
    /// `Accepted` (reasons `InvalidFrontmatter`, `NameMismatch`, `TooLarge`) and `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// SHA-256 of the content and files, hex; the rendered ConfigMap is `<skill>-<digest8>`.
    #[schemars(length(max = 128))]
    pub digest: Option<String>,
    /// The frontmatter's `description`, shown by `kubectl get skills`.
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
}

/// Whether `name` is a valid skill name: at most 64 characters of `[a-z0-9]` groups joined by
/// single hyphens.
pub fn is_valid_skill_name(name: &str) -> bool {
    name.len() <= 64
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

validate_methods! {
    /// Checks the rules the API server checks on create: the name and the spec's size limits.
    Skill, name by is_valid_skill_name, rules::SKILL_NAME_MESSAGE;
    /// Checks the spec's size limits and file paths.
    SkillSpec
}

impl SkillSpec {
    fn check(&self, c: &mut Checker) {
        c.max_length("spec.content", &self.content, MAX_CONTENT);
        c.max_properties("spec.files", self.files.len(), MAX_FILES);
        for (path, text) in &self.files {
            c.max_length(&format!("spec.files.{path}"), text, MAX_CONTENT);
        }
        if let Some(bad) = self.files.keys().find(|k| !is_relative_path(k)) {
            c.quoted(false, "spec.files", bad, rules::RELATIVE_PATH_SUFFIX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_names_follow_the_agentskills_rule() {
        for good in ["a", "deep-research", "x1-2y", &"a".repeat(64)] {
            assert!(is_valid_skill_name(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "Deep",
            "a_b",
            "a.b",
            &"a".repeat(65),
        ] {
            assert!(!is_valid_skill_name(bad), "{bad}");
        }
    }

    #[test]
    fn enabled_defaults_to_true_without_an_api_server() {
        let spec: SkillSpec = serde_json::from_value(serde_json::json!({"content": "x"})).unwrap();
        assert!(spec.enabled);
        assert!(spec.files.is_empty());
    }
}
