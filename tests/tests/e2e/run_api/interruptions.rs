//! An attempt stopped by SIGTERM while it works (its Pod evicted, drained) posts its thread to
//! `checkpoint`: stored in `<run>-checkpoint` beside the questions asked, refused from an older
//! attempt, never a result; and the next attempt's `config` carries it.

use anyhow::ensure;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use herd_crds::wire::CheckpointReport;
use herd_e2e::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;

use super::support::{Fixture, asked, carried_checkpoint, checkpoint_bytes};

/// Bytes that start as gzip does; the operator stores a checkpoint as it is sent.
fn gzip_like(len: usize) -> Vec<u8> {
    let mut bytes = vec![0x1f, 0x8b, 8, 0];
    bytes.extend((0..len).map(|n| (n * 13 % 256) as u8));
    bytes
}

fn report(attempt: u32, gzip: &[u8]) -> CheckpointReport {
    CheckpointReport {
        attempt,
        checkpoint_gzip_base64: STANDARD.encode(gzip),
    }
}

pub async fn an_interrupted_attempts_checkpoint_resumes_the_next_attempt(
    env: TestEnv,
) -> anyhow::Result<()> {
    let mut fixture = Fixture::start(env, json!({"timeout": "10m", "retries": 1})).await?;
    let token = fixture.started_runner("cut").await?;
    let https = fixture.https().clone();
    let cms: Api<ConfigMap> = Api::namespaced(fixture.admin.clone(), &fixture.namespace);

    // Refused before anything is written: not gzip, or a result saying Interrupted.
    let mut bad = report(1, b"{}");
    bad.checkpoint_gzip_base64 = STANDARD.encode(b"{\"plain\": \"json\"}");
    let why = fixture
        .post("cut", "checkpoint", &token, &bad)
        .await?
        .refused(400, "BadRequest")?;
    ensure!(why.contains("not gzip"), "{why}");
    let interrupted = json!({"attempt": 1, "seq": 9, "stopReason": "interrupted", "text": "",
        "usage": {"inputTokens": 0, "outputTokens": 0, "modelCalls": 1, "toolCalls": 0}});
    let why = fixture
        .post("cut", "result", &token, &interrupted)
        .await?
        .refused(400, "BadRequest")?;
    ensure!(why.contains("posts its checkpoint"), "{why}");
    ensure!(cms.get_opt("cut-checkpoint").await?.is_none());

    let gzip = gzip_like(3000);
    let status = https
        .post(fixture.url("cut", "checkpoint"))
        .bearer_auth(&token)
        .json(&report(1, &gzip))
        .send()
        .await?
        .status();
    ensure!(status.as_u16() == 204, "{status}");
    let saved = cms.get("cut-checkpoint").await?;
    ensure!(
        checkpoint_bytes(&saved) == Some(&gzip),
        "the checkpoint byte for byte"
    );
    ensure!(asked(&saved) == Some("[]"), "no question was asked");
    let runs = fixture.runs();
    let run = runs.get("cut").await?;
    ensure!(
        run.status
            .as_ref()
            .and_then(|s| s.report.as_ref())
            .is_none(),
        "the report is the operator's to decide, not the checkpoint's"
    );

    // The Pod is evicted: attempt 2's config resumes from the checkpoint, and attempt 1 can
    // no longer write one.
    let config = fixture
        .evict_first_attempt("cut", "The node was drained.")
        .await?;
    fixture
        .post("cut", "checkpoint", &token, &report(1, &gzip_like(10)))
        .await?
        .refused(409, "StaleAttempt")?;
    ensure!(
        carried_checkpoint(&config)? == gzip,
        "the interrupted attempt's checkpoint"
    );
    fixture.running.shutdown().await?;
    Ok(())
}
