//! An Agent's memory as a ConfigMap: `<agent>-memory`, or `<agent>-memory-<sha8(user)>` when
//! the Agent's memory has `scope: user` (the user is the Run's `herd.dev/user` label; sha8 is
//! the first 8 hex digits of its SHA-256). The document is the JSON of the wire's
//! `MemoryDocument` (`{revision, context: {work, personal, topOfMind, history}, facts: [{id,
//! content, category, confidence, source, createdAt, updatedAt, confirmationCount}]}`) in
//! `data["memory.json"]`, at most [`MAX_MEMORY_BYTES`]. Labelled `herd.dev/agent` (and, per
//! user, annotated `herd.dev/user` with the user), never owned by the Agent: memory outlives
//! an Agent deleted and created again, and every Run of it. Pure.

use std::collections::BTreeMap;

use herd_crds::agent::{MemoryScope, MemorySpec};
use herd_crds::wire::MemoryDocument;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use super::failure::Failure;
use crate::labels;

/// The `data` key of the memory document.
pub const MEMORY_KEY: &str = "memory.json";
/// Most bytes of a memory document's JSON (~900 KiB: the ConfigMap stays under 1 MiB).
pub const MAX_MEMORY_BYTES: usize = 900 * 1024;

/// Whose memory a Run uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryOwner {
    /// The Agent.
    pub agent: String,
    /// The user, with `scope: user`.
    pub user: Option<String>,
}

impl MemoryOwner {
    /// The memory of a Run of `agent` with `memory` settings and `user` (its `herd.dev/user`
    /// label); refused when memory is disabled, or per user and the Run names none.
    pub fn of(agent: &str, memory: &MemorySpec, user: Option<&str>) -> Result<Self, Failure> {
        if !memory.enabled {
            return Err(Failure::bad_request(format!(
                "memory is disabled on Agent {agent} (spec.memory.enabled is false)"
            )));
        }
        let user = match memory.scope {
            MemoryScope::Agent => None,
            MemoryScope::User => Some(user.filter(|u| !u.is_empty()).ok_or_else(|| {
                Failure::bad_request(format!(
                    "Agent {agent} keeps memory per user (spec.memory.scope: user), but the Run \
                     has no {} label",
                    labels::USER
                ))
            })?),
        };
        Ok(MemoryOwner {
            agent: agent.to_owned(),
            user: user.map(str::to_owned),
        })
    }

    /// The ConfigMap's name.
    pub fn config_map_name(&self) -> String {
        match &self.user {
            None => format!("{}-memory", self.agent),
            Some(user) => format!("{}-memory-{}", self.agent, sha8(user)),
        }
    }
}

/// The first 8 hex digits of the SHA-256 of `text`.
pub fn sha8(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))[..8].to_owned()
}

/// The document a memory ConfigMap holds: empty when there is none or it has no data yet;
/// refused (never overwritten) when it holds something else.
pub fn read_document(config_map: Option<&ConfigMap>) -> Result<MemoryDocument, String> {
    let Some(config_map) = config_map else {
        return Ok(MemoryDocument::default());
    };
    let name = config_map.metadata.name.as_deref().unwrap_or_default();
    let data = config_map.data.as_ref();
    match data.and_then(|d| d.get(MEMORY_KEY)) {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| format!("ConfigMap {name} holds no memory document: {e}")),
        None if data.is_none_or(BTreeMap::is_empty) && config_map.binary_data.is_none() => {
            Ok(MemoryDocument::default())
        }
        None => Err(format!(
            "ConfigMap {name} exists without {MEMORY_KEY}: it is not a memory ConfigMap"
        )),
    }
}

/// The memory ConfigMap of `owner` in `namespace` holding `document`, or why it is too large.
pub fn memory_config_map(
    owner: &MemoryOwner,
    namespace: &str,
    document: &MemoryDocument,
) -> Result<ConfigMap, String> {
    let json = serde_json::to_string(document)
        .map_err(|e| format!("the memory document does not serialize: {e}"))?;
    let name = owner.config_map_name();
    if json.len() > MAX_MEMORY_BYTES {
        return Err(format!(
            "the memory document would be {} bytes with {} facts, over the limit of \
             {MAX_MEMORY_BYTES} of ConfigMap {name}; remove facts or shorten them",
            json.len(),
            document.facts.len()
        ));
    }
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(
                labels::AGENT.to_owned(),
                owner.agent.clone(),
            )])),
            annotations: owner
                .user
                .as_ref()
                .map(|user| BTreeMap::from([(labels::USER.to_owned(), user.clone())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(MEMORY_KEY.to_owned(), json)])),
        ..ConfigMap::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::wire::{Fact, FactCategory};

    fn spec(enabled: bool, scope: MemoryScope) -> MemorySpec {
        MemorySpec {
            enabled,
            scope,
            ..MemorySpec::default()
        }
    }

    fn fact(content: &str) -> Fact {
        Fact {
            id: "fact-1".into(),
            content: content.into(),
            category: FactCategory::Preference,
            confidence: 0.9,
            source: "r".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            confirmation_count: 0,
        }
    }

    #[test]
    fn memory_is_the_agents_or_one_users() {
        let agent =
            MemoryOwner::of("helper", &spec(true, MemoryScope::Agent), Some("ana")).unwrap();
        assert_eq!(agent.config_map_name(), "helper-memory");
        let user = MemoryOwner::of("helper", &spec(true, MemoryScope::User), Some("ana")).unwrap();
        assert_eq!(
            user.config_map_name(),
            format!("helper-memory-{}", sha8("ana"))
        );
        assert_eq!(
            sha8("ana"),
            "24d4b96f",
            "the first 8 hex digits of sha256(\"ana\")"
        );
    }

    #[test]
    fn disabled_memory_or_a_missing_user_is_refused_clearly() {
        let off = MemoryOwner::of("helper", &spec(false, MemoryScope::Agent), None).unwrap_err();
        assert_eq!(off.status.as_u16(), 400);
        assert!(
            off.message.contains("memory is disabled on Agent helper"),
            "{off:?}"
        );
        for user in [None, Some("")] {
            let nobody =
                MemoryOwner::of("helper", &spec(true, MemoryScope::User), user).unwrap_err();
            assert!(nobody.message.contains("herd.dev/user"), "{nobody:?}");
        }
    }

    #[test]
    fn the_document_is_json_in_memory_json_labelled_with_the_agent() {
        let owner = MemoryOwner {
            agent: "helper".into(),
            user: Some("ana".into()),
        };
        let document = MemoryDocument {
            revision: 3,
            facts: vec![fact("Prefers Rust")],
            ..MemoryDocument::default()
        };
        let cm = memory_config_map(&owner, "ns", &document).unwrap();
        assert_eq!(
            cm.metadata.labels.as_ref().unwrap()[labels::AGENT],
            "helper"
        );
        assert_eq!(
            cm.metadata.annotations.as_ref().unwrap()[labels::USER],
            "ana"
        );
        assert_eq!(cm.metadata.owner_references, None, "not owned by the Agent");
        let json: serde_json::Value =
            serde_json::from_str(&cm.data.as_ref().unwrap()[MEMORY_KEY]).unwrap();
        assert_eq!(json["revision"], 3);
        assert_eq!(json["facts"][0]["content"], "Prefers Rust");
        assert_eq!(json["facts"][0]["createdAt"], "2026-01-01T00:00:00Z");
        assert_eq!(read_document(Some(&cm)).unwrap(), document);
    }

    #[test]
    fn a_missing_or_empty_config_map_is_an_empty_document_and_a_foreign_one_is_refused() {
        assert_eq!(read_document(None).unwrap(), MemoryDocument::default());
        assert_eq!(
            read_document(Some(&ConfigMap::default())).unwrap(),
            MemoryDocument::default()
        );
        let foreign = ConfigMap {
            data: Some(BTreeMap::from([("other".to_owned(), "x".to_owned())])),
            ..ConfigMap::default()
        };
        assert!(read_document(Some(&foreign)).is_err());
        let garbled = ConfigMap {
            data: Some(BTreeMap::from([(MEMORY_KEY.to_owned(), "{".to_owned())])),
            ..ConfigMap::default()
        };
        assert!(
            read_document(Some(&garbled))
                .unwrap_err()
                .contains("no memory document")
        );
    }

    #[test]
    fn a_document_over_the_limit_is_refused_with_its_size() {
        let owner = MemoryOwner {
            agent: "helper".into(),
            user: None,
        };
        let big = MemoryDocument {
            facts: (0..10).map(|_| fact(&"x".repeat(100 * 1024))).collect(),
            ..MemoryDocument::default()
        };
        let why = memory_config_map(&owner, "ns", &big).unwrap_err();
        assert!(
            why.contains("with 10 facts, over the limit of 921600"),
            "{why}"
        );
    }
}
