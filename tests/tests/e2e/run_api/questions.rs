//! Questions over the run API: `clarification` stores the checkpoint in `<run>-checkpoint` and
//! the question in `status.report` (the Run shows `InputRequired`), `answers/{id}?wait=` hands
//! over an answer appended to `spec.responses` by a JSON patch, an answer matching no question
//! gets one `AnswerIgnored` Event, and the next attempt's `config` carries the checkpoint.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::report::{Clarification, ClarificationType, StopReason};
use herd_crds::run::RunPhase;
use herd_crds::wire::{AnswerPoll, ClarificationRequest, ResultAccepted};
use herd_e2e::TestEnv;
use herd_e2e::requests::json_patch;
use herd_e2e::wait::wait_for;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::support::{AUDIENCE, Fixture, asked, carried_checkpoint, checkpoint_bytes, send};
use crate::operator::run_fixtures::{message, reaches, run_until};

/// Bytes that start as gzip does; the operator stores a checkpoint as it is sent.
fn checkpoint(len: usize) -> Vec<u8> {
    let mut bytes = vec![0x1f, 0x8b, 8, 0];
    bytes.extend((0..len).map(|n| (n * 7 % 256) as u8));
    bytes
}

fn question(id: &str) -> Clarification {
    Clarification {
        id: id.into(),
        question: "Which market should the brief cover?".into(),
        kind: ClarificationType::ApproachChoice,
        context: Some("The task names none.".into()),
        options: vec!["EU".into(), "US".into()],
        asked_at: Some("2026-01-31T09:30:00Z".into()),
    }
}

fn asking(attempt: u32, seq: u64, id: &str, gzip: &[u8]) -> ClarificationRequest {
    ClarificationRequest {
        attempt,
        seq,
        clarification: question(id),
        checkpoint_gzip_base64: STANDARD.encode(gzip),
    }
}

/// Appends an answer as `kubectl patch --type json` adding to `/spec/responses/-` does.
async fn answer(fixture: &Fixture, name: &str, id: &str, text: &str) -> anyhow::Result<()> {
    let patch = json!([{"op": "add", "path": "/spec/responses/-",
        "value": {"id": id, "answer": text}}]);
    json_patch(&fixture.admin, &fixture.namespace, "Run", name, &patch)
        .await?
        .map_err(|message| anyhow::anyhow!("the answer {id} was refused: {message}"))?;
    Ok(())
}

/// The `AnswerIgnored` Events about the Run `name`.
async fn ignored(events: &Api<Event>, name: &str) -> anyhow::Result<Vec<Event>> {
    Ok(events
        .list(&ListParams::default().fields(&format!("regarding.name={name}")))
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("AnswerIgnored"))
        .collect())
}

/// A question: the checkpoint ConfigMap first, then `InputRequired` with the question; a long
/// poll woken by the answer's JSON patch; one without an answer ends empty after its wait; a
/// stray answer gets one Event however often the Run reconciles; the Pod evicted, attempt 2's
/// config resumes from the checkpoint with the answer.
pub async fn a_question_waits_for_its_answer_and_the_next_attempt_resumes(
    env: TestEnv,
) -> anyhow::Result<()> {
    let mut fixture = Fixture::start(env, json!({"timeout": "10m", "retries": 1})).await?;
    let token = fixture.started_runner("ask").await?;
    let https = fixture.https().clone();
    let runs = fixture.runs();
    let cms: Api<ConfigMap> = Api::namespaced(fixture.admin.clone(), &fixture.namespace);

    // Refused before anything is written: a body that is not base64 of gzip.
    let mut bad = asking(1, 3, "q-call_1", &checkpoint(10));
    bad.checkpoint_gzip_base64 = "not base64!".into();
    let why = fixture
        .post("ask", "clarification", &token, &bad)
        .await?
        .refused(400, "BadRequest")?;
    ensure!(why.contains("not base64"), "{why}");
    bad.checkpoint_gzip_base64 = STANDARD.encode(b"{\"plain\": \"json\"}");
    fixture
        .post("ask", "clarification", &token, &bad)
        .await?
        .refused(400, "BadRequest")?;
    ensure!(cms.get_opt("ask-checkpoint").await?.is_none());

    let gzip = checkpoint(4000);
    // The question, posted once and then again as a retry: both answered the same.
    let post_question = || async {
        let accepted: ResultAccepted = fixture
            .post(
                "ask",
                "clarification",
                &token,
                &asking(1, 3, "q-call_1", &gzip),
            )
            .await?
            .expect(200)?;
        ensure!(accepted.stop_reason == StopReason::InputRequired);
        anyhow::Ok(())
    };
    post_question().await?;
    // Durable when the 200 came: the checkpoint and the question.
    let saved = cms.get("ask-checkpoint").await?;
    let run = runs.get("ask").await?;
    ensure!(
        checkpoint_bytes(&saved) == Some(&gzip),
        "the checkpoint byte for byte"
    );
    ensure!(
        saved
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == run.metadata.uid.as_ref()),
        "owned by the Run"
    );
    ensure!(asked(&saved) == Some(r#"["q-call_1"]"#));
    let report = run
        .status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .context("a report")?;
    ensure!(
        report.stop_reason == Some(StopReason::InputRequired)
            && report.clarification == Some(question("q-call_1"))
            && (report.attempt, report.seq) == (1, 3),
        "{report:?}"
    );
    let waiting = run_until(&runs, "ask", "InputRequired", |r| {
        r.status.as_ref().and_then(|s| s.phase) == Some(RunPhase::InputRequired)
    })
    .await?;
    let condition = waiting
        .status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, "InputRequired"))
        .context("no InputRequired condition")?;
    ensure!(
        condition.status == ConditionStatus::True
            && condition.message == "Which market should the brief cover?",
        "{condition:?}"
    );
    // A retried post is answered the same, an older one refused.
    post_question().await?;
    fixture
        .post(
            "ask",
            "clarification",
            &token,
            &asking(1, 2, "q-old", &gzip),
        )
        .await?
        .refused(400, "BadRequest")?;

    // The long poll wakes on the answer's watch event.
    let poll = {
        let request = https
            .get(fixture.url("ask", "answers/q-call_1?wait=30"))
            .bearer_auth(&token);
        tokio::spawn(async move {
            let started = Instant::now();
            let answer = send(request).await?;
            Ok::<_, anyhow::Error>((answer, started.elapsed()))
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    ensure!(!poll.is_finished(), "the poll waits for the answer");
    answer(&fixture, "ask", "q-call_1", "EU").await?;
    let (polled, took) = poll.await??;
    let polled: AnswerPoll = polled.expect(200)?;
    let given = polled.answer.context("the answer")?;
    ensure!((given.id.as_str(), given.answer.as_str()) == ("q-call_1", "EU"));
    ensure!(
        took < Duration::from_secs(15),
        "woken, not timed out: {took:?}"
    );
    let left = polled.seconds_left.context("secondsLeft")?;
    ensure!(
        left > 500 && left <= 600,
        "the 10m timeout less the time since startTime: {left}"
    );

    // No answer: empty after the wait.
    let started = Instant::now();
    let empty: AnswerPoll = send(
        https
            .get(fixture.url("ask", "answers/q-none?wait=2"))
            .bearer_auth(&token),
    )
    .await?
    .expect(200)?;
    let took = started.elapsed();
    ensure!(empty.answer.is_none() && empty.seconds_left.is_some());
    ensure!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(8),
        "{took:?}"
    );
    send(
        https
            .get(fixture.url("ask", "answers/q-none?wait=soon"))
            .bearer_auth(&token),
    )
    .await?
    .refused(400, "BadRequest")?;

    // A stray answer: one Event, never repeated.
    answer(&fixture, "ask", "q-typo", "US").await?;
    let events: Api<Event> = Api::namespaced(fixture.admin.clone(), &fixture.namespace);
    let event = wait_for(
        "an AnswerIgnored Event",
        Duration::from_secs(30),
        || async { Ok(ignored(&events, "ask").await?.into_iter().next()) },
    )
    .await?;
    let note = event.note.clone().unwrap_or_default();
    ensure!(
        note.contains("\"q-typo\"") && note.contains("ignored"),
        "{note}"
    );
    ensure!(event.type_.as_deref() == Some("Warning"));
    // More reconciles: a label change, then the eviction below.
    let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
    runs.patch("ask", &PatchParams::default(), &Patch::Merge(&touch))
        .await?;
    let judged = run_until(&runs, "ask", "both answers judged", |r| {
        r.annotations()
            .get("herd.dev/answers-judged")
            .map(String::as_str)
            == Some(r#"["q-call_1","q-typo"]"#)
    })
    .await?;
    ensure!(judged.labels().contains_key("touched"));

    // The Pod is evicted while the Run waits: attempt 2 resumes from the checkpoint.
    let config = fixture
        .evict_first_attempt("ask", "The node was low on resource: memory.")
        .await?;
    ensure!(
        carried_checkpoint(&config)? == gzip,
        "the checkpoint of the question"
    );
    ensure!(
        config
            .responses
            .iter()
            .any(|a| a.id == "q-call_1" && a.answer == "EU"),
        "{:?}",
        config.responses
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stray: Vec<_> = ignored(&events, "ask").await?;
    ensure!(
        stray.len() == 1 && stray[0].series.is_none(),
        "one Event, never repeated: {stray:?}"
    );
    fixture.running.shutdown().await?;
    Ok(())
}

/// A checkpoint over ~900 KiB of gzip (a 2 MiB body is allowed) fails the Run
/// `CheckpointTooLarge`, saying so, and no ConfigMap is written. (And memory, disabled on its
/// Agent, is refused clearly.)
pub async fn a_checkpoint_too_large_fails_the_run(env: TestEnv) -> anyhow::Result<()> {
    let mut fixture = Fixture::start(env, json!({})).await?;
    let pod = fixture.run_pod("huge").await?;
    let token = fixture.token(&pod, Some(AUDIENCE)).await?;
    let stored: ResultAccepted = send(
        fixture
            .https()
            .post(fixture.url("huge", "clarification"))
            .bearer_auth(&token)
            .json(&asking(1, 1, "q-1", &checkpoint(950 * 1024))),
    )
    .await?
    .expect(200)?;
    ensure!(stored.stop_reason == StopReason::CheckpointTooLarge);
    let runs = fixture.runs();
    let failed = reaches(&runs, "huge", ConditionStatus::False, "CheckpointTooLarge").await?;
    let why = message(&failed);
    ensure!(
        why.starts_with("the checkpoint was too large: ")
            && why.contains("over the limit of 921600"),
        "{why}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(fixture.admin.clone(), &fixture.namespace);
    ensure!(
        cms.get_opt("huge-checkpoint").await?.is_none(),
        "no ConfigMap"
    );
    // The Agent keeps no memory: asking for it is a clear refusal.
    let why = send(
        fixture
            .https()
            .get(fixture.url("huge", "memory"))
            .bearer_auth(&token),
    )
    .await?
    .refused(400, "BadRequest")?;
    ensure!(why.contains("memory is disabled on Agent helper"), "{why}");
    fixture.running.shutdown().await?;
    Ok(())
}
