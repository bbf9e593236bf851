//! `GET memory` and `POST memory`: the Run's memory document (the Agent's, or one user's) from
//! its ConfigMap (see [`memory_config_map`](super::memory_config_map)), and operations applied to
//! it by compare-and-swap: read, apply with the runner's own rules
//! ([`herd_crds::memory::apply_operations`]: confidence below 0.7 dropped, duplicates
//! reinforced, at most the snapshot's `maxFacts`), write under the resourceVersion read (create
//! when absent); a conflict reads and applies again, so no update is lost when Runs end
//! together. The settings are the Run's snapshot's, never the live Agent's.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Json, Response};
use herd_crds::memory::{ApplyContext, apply_operations};
use herd_crds::wire::{MAX_BODY, MemoryDocument, MemoryOperation, MemoryUpdate};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use tracing::info;

use super::RunApi;
use super::admit::{Admitted, Posted};
use super::authorize::RunPath;
use super::failure::Failure;
use super::memory_config_map::{MemoryOwner, memory_config_map, read_document};
use crate::labels;

/// Compare-and-swap rounds before giving up (each conflict means another update succeeded).
const TRIES: u32 = 32;

/// The ConfigMap to write after `operations` on `existing` (none: create it), under the
/// resourceVersion read, and the document it holds.
pub fn next_memory(
    existing: Option<&ConfigMap>,
    owner: &MemoryOwner,
    namespace: &str,
    operations: &[MemoryOperation],
    ctx: &ApplyContext,
) -> Result<(ConfigMap, MemoryDocument), Failure> {
    let mut document = read_document(existing).map_err(Failure::internal)?;
    apply_operations(&mut document, operations, ctx);
    let mut desired =
        memory_config_map(owner, namespace, &document).map_err(Failure::bad_request)?;
    if let Some(existing) = existing {
        desired.metadata.resource_version = existing.metadata.resource_version.clone();
        // Labels and annotations someone else added are kept.
        for (field, kept) in [
            (&mut desired.metadata.labels, &existing.metadata.labels),
            (
                &mut desired.metadata.annotations,
                &existing.metadata.annotations,
            ),
        ] {
            if let Some(kept) = kept {
                let mut merged = kept.clone();
                merged.extend(field.take().unwrap_or_default());
                *field = Some(merged);
            }
        }
        desired.metadata.owner_references = existing.metadata.owner_references.clone();
    }
    Ok((desired, document))
}

impl RunApi {
    /// Whose memory the admitted Run uses, from its snapshot and its `herd.dev/user` label.
    async fn memory_owner(&self, admitted: &Admitted) -> Result<(MemoryOwner, usize), Failure> {
        let snapshot = self.snapshot(admitted).await?;
        let user = admitted.run.labels().get(labels::USER).map(String::as_str);
        let owner = MemoryOwner::of(&snapshot.agent_name, &snapshot.agent.memory, user)?;
        let max_facts = usize::try_from(snapshot.agent.memory.max_facts).unwrap_or(usize::MAX);
        Ok((owner, max_facts))
    }
}

/// `GET /v1/runs/{namespace}/{name}/memory`: the document (empty when there is none yet).
pub async fn read_memory(
    State(api): State<Arc<RunApi>>,
    Path(path): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    let admitted = api.admit(RunPath::from(path), &headers, MAX_BODY).await?;
    let (owner, _) = api.memory_owner(&admitted).await?;
    let name = owner.config_map_name();
    let config_maps: Api<ConfigMap> = Api::namespaced(api.client.clone(), &admitted.path.namespace);
    let existing = config_maps
        .get_opt(&name)
        .await
        .map_err(|e| Failure::kube(&format!("reading ConfigMap {name}"), &e))?;
    let document = read_document(existing.as_ref()).map_err(Failure::internal)?;
    Ok(Json(document).into_response())
}

/// `POST /v1/runs/{namespace}/{name}/memory`: applies a `MemoryUpdate`; answers the document
/// written.
pub async fn update_memory(
    State(api): State<Arc<RunApi>>,
    Posted(admitted, update): Posted<MemoryUpdate>,
) -> Result<Response, Failure> {
    let (owner, max_facts) = api.memory_owner(&admitted).await?;
    let name = owner.config_map_name();
    let namespace = &admitted.path.namespace;
    let config_maps: Api<ConfigMap> = Api::namespaced(api.client.clone(), namespace);
    let writing = format!("writing ConfigMap {name}");
    let ctx = ApplyContext {
        now: jiff::Timestamp::now().to_string(),
        source: admitted.path.name.clone(),
        max_facts,
    };
    for _ in 0..TRIES {
        let existing = config_maps
            .get_opt(&name)
            .await
            .map_err(|e| Failure::kube(&writing, &e))?;
        let (desired, document) = next_memory(
            existing.as_ref(),
            &owner,
            namespace,
            &update.operations,
            &ctx,
        )?;
        let written = match existing {
            None => config_maps.create(&PostParams::default(), &desired).await,
            Some(_) => {
                config_maps
                    .replace(&name, &PostParams::default(), &desired)
                    .await
            }
        };
        match written {
            Ok(_) => {
                info!(run = %admitted.path, memory = %name, revision = document.revision,
                    operations = update.operations.len(), "memory updated");
                return Ok(Json(document).into_response());
            }
            // Created or changed by another Run since read: read and apply again.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(Failure::kube(&writing, &error)),
        }
    }
    Err(Failure::unavailable(format!(
        "ConfigMap {name} changed {TRIES} times while this update was applied"
    )))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use herd_crds::wire::FactCategory;

    fn owner() -> MemoryOwner {
        MemoryOwner {
            agent: "helper".into(),
            user: None,
        }
    }

    fn ctx(max_facts: usize) -> ApplyContext {
        ApplyContext {
            now: "2026-11-29T00:00:00Z".into(),
            source: "run-1".into(),
            max_facts,
        }
    }

    fn add(content: &str, confidence: f64) -> MemoryOperation {
        MemoryOperation::Add {
            content: content.into(),
            category: FactCategory::Context,
            confidence,
        }
    }

    #[test]
    fn the_first_update_creates_the_config_map() {
        let (cm, document) =
            next_memory(None, &owner(), "ns", &[add("Works on Herd", 0.9)], &ctx(10)).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("helper-memory"));
        assert_eq!(cm.metadata.resource_version, None, "a create");
        assert_eq!(document.revision, 1);
        assert_eq!(document.facts[0].source, "run-1");
        assert_eq!(read_document(Some(&cm)).unwrap(), document);
    }

    #[test]
    fn an_update_applies_to_what_was_read_under_its_version() {
        let (mut stored, _) = next_memory(
            None,
            &owner(),
            "ns",
            &[add("a", 0.9), add("b", 0.8)],
            &ctx(10),
        )
        .unwrap();
        stored.metadata.resource_version = Some("41".into());
        stored
            .metadata
            .labels
            .get_or_insert_default()
            .insert("team".into(), "x".into());
        let (next, document) = next_memory(
            Some(&stored),
            &owner(),
            "ns",
            &[add("c", 0.95), add("too unsure", 0.69)],
            &ctx(2),
        )
        .unwrap();
        assert_eq!(next.metadata.resource_version.as_deref(), Some("41"));
        let kept: Vec<_> = document.facts.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(
            kept,
            vec!["c", "a"],
            "maxFacts on write, unsure facts dropped"
        );
        assert_eq!(document.revision, 2);
        assert_eq!(
            next.metadata.labels.unwrap(),
            BTreeMap::from([
                (labels::AGENT.to_owned(), "helper".to_owned()),
                ("team".to_owned(), "x".to_owned())
            ])
        );
    }

    #[test]
    fn a_foreign_config_map_is_never_overwritten_and_an_oversized_one_refused() {
        let foreign = ConfigMap {
            data: Some(BTreeMap::from([("other".to_owned(), "x".to_owned())])),
            ..ConfigMap::default()
        };
        let refused = next_memory(Some(&foreign), &owner(), "ns", &[], &ctx(10)).unwrap_err();
        assert_eq!(refused.status.as_u16(), 500);
        let huge: Vec<_> = (0..20)
            .map(|n| add(&format!("{n} {}", "x".repeat(60 * 1024)), 0.9))
            .collect();
        let too_large = next_memory(None, &owner(), "ns", &huge, &ctx(100)).unwrap_err();
        assert_eq!(too_large.status.as_u16(), 400);
        assert!(
            too_large.message.contains("over the limit"),
            "{too_large:?}"
        );
    }
}
