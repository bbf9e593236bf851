//! Memory over the run API: ten Runs of one Agent post their facts at the same moment and the
//! ConfigMap `<agent>-memory` ends with all ten (compare-and-swap on its resourceVersion),
//! unsure facts dropped and `maxFacts` enforced on write.

use std::collections::BTreeSet;

use anyhow::{Context, ensure};
use herd_crds::wire::{FactCategory, MemoryDocument, MemoryOperation, MemoryUpdate};
use herd_e2e::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::json;

use super::support::{AUDIENCE, Fixture, send};

fn add(content: &str, confidence: f64) -> MemoryOperation {
    MemoryOperation::Add {
        content: content.into(),
        category: FactCategory::Context,
        confidence,
    }
}

/// The document in the Agent's memory ConfigMap.
async fn stored(fixture: &Fixture) -> anyhow::Result<(ConfigMap, MemoryDocument)> {
    let cms: Api<ConfigMap> = Api::namespaced(fixture.admin.clone(), &fixture.namespace);
    let cm = cms.get("helper-memory").await?;
    let json = cm
        .data
        .as_ref()
        .and_then(|d| d.get("memory.json"))
        .context("no memory.json")?;
    let document = serde_json::from_str(json)?;
    Ok((cm, document))
}

/// Ten Runs post one fact each (and an unsure one) together: all ten are kept, none unsure;
/// the ConfigMap is labelled with the Agent and owned by nobody; past `maxFacts` the least
/// confident go.
pub async fn memory_updates_of_runs_ending_together_lose_nothing(
    env: TestEnv,
) -> anyhow::Result<()> {
    let mut fixture = Fixture::start_with(
        env,
        json!({"runDefaults": {}, "sandbox": {}, "memory": {"enabled": true, "maxFacts": 12}}),
    )
    .await?;
    let mut tokens = Vec::new();
    for n in 0..11 {
        let name = format!("mem-{n}");
        let pod = fixture.run_pod(&name).await?;
        tokens.push((name, fixture.token(&pod, Some(AUDIENCE)).await?));
    }
    let https = fixture.https().clone();
    let (first, first_token) = &tokens[0];
    let empty: MemoryDocument = send(
        https
            .get(fixture.url(first, "memory"))
            .bearer_auth(first_token),
    )
    .await?
    .expect(200)?;
    ensure!(empty == MemoryDocument::default(), "{empty:?}");

    let posts = tokens[..10].iter().enumerate().map(|(n, (name, token))| {
        let update = MemoryUpdate {
            attempt: 1,
            operations: vec![
                add(&format!("Fact {n} from {name}"), 0.8),
                add(&format!("A guess of {name}"), 0.5),
            ],
        };
        send(
            https
                .post(fixture.url(name, "memory"))
                .bearer_auth(token)
                .json(&update),
        )
    });
    for answer in futures::future::join_all(posts).await {
        answer?.expect::<MemoryDocument>(200)?;
    }
    let (cm, document) = stored(&fixture).await?;
    let facts: BTreeSet<String> = document.facts.iter().map(|f| f.content.clone()).collect();
    let expected: BTreeSet<String> = (0..10).map(|n| format!("Fact {n} from mem-{n}")).collect();
    ensure!(facts == expected, "all ten, nothing unsure: {facts:?}");
    ensure!(
        document.revision == 10,
        "one revision per update: {}",
        document.revision
    );
    let sources: BTreeSet<&str> = document.facts.iter().map(|f| f.source.as_str()).collect();
    ensure!(sources.len() == 10, "each from its Run: {sources:?}");
    ensure!(cm.labels().get("herd.dev/agent").map(String::as_str) == Some("helper"));
    ensure!(cm.owner_references().is_empty(), "not owned by the Agent");
    let read: MemoryDocument = send(
        https
            .get(fixture.url(first, "memory"))
            .bearer_auth(first_token),
    )
    .await?
    .expect(200)?;
    ensure!(read == document, "GET reads what was stored");

    // Five surer facts: twelve kept, the five among them.
    let (last, last_token) = &tokens[10];
    let surer = MemoryUpdate {
        attempt: 1,
        operations: (0..5)
            .map(|n| add(&format!("Sure fact {n}"), 0.95))
            .collect(),
    };
    let answered: MemoryDocument = fixture
        .post(last, "memory", last_token, &surer)
        .await?
        .expect(200)?;
    let (_, capped) = stored(&fixture).await?;
    ensure!(answered == capped, "the answer is the document stored");
    ensure!(capped.facts.len() == 12, "maxFacts: {}", capped.facts.len());
    ensure!(
        (0..5).all(|n| capped
            .facts
            .iter()
            .any(|f| f.content == format!("Sure fact {n}"))),
        "the least confident went first: {:?}",
        capped.facts
    );
    // A body of another attempt is refused.
    let stale = MemoryUpdate {
        attempt: 2,
        operations: vec![add("Never stored", 0.9)],
    };
    fixture
        .post(last, "memory", last_token, &stale)
        .await?
        .refused(400, "BadRequest")?;
    fixture.running.shutdown().await?;
    Ok(())
}
