//! A runner's `task` calls over the run API: `POST children` starts one child Run per
//! `toolCallId` (asked twice, still one) with the budget narrowed to the smaller of the claim
//! and the parent's snapshot; `GET children/{toolCallId}?wait=` answers after the wait while the
//! child goes and as soon as it ends (its own runner posts its result); the files it presented
//! come back byte for byte; `maxTotal`, `maxDepth` and an ended parent are refused with a message
//! the model can read.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use herd_crds::condition::ConditionStatus;
use herd_crds::report::{StopReason, Usage};
use herd_crds::wire::{
    ChildOutcome, ChildRequest, ChildStatus, FILE_CONTENT_TYPE, FILE_PATH_HEADER, PresentedFile,
    ResultAccepted, ResultReport,
};
use herd_e2e::TestEnv;
use herd_e2e::wait::wait_for;
use herd_operator::decide::child_run::child_name;
use herd_operator::decide::run_snapshot::{Snapshot, read_snapshot};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::json;

use super::support::{AUDIENCE, Fixture, send};
use crate::operator::run_fixtures::{WAIT, run_until, succeeded};

fn ask(call: &str) -> ChildRequest {
    ChildRequest {
        attempt: 1,
        tool_call_id: call.to_owned(),
        description: format!("part {call}"),
        prompt: format!("Do part {call}."),
        subagent_type: "general-purpose".to_owned(),
        model_calls_left: None,
        tokens_left: None,
        seconds_left: None,
    }
}

fn result(text: &str, files: Vec<PresentedFile>) -> ResultReport {
    ResultReport {
        attempt: 1,
        seq: 1,
        stop_reason: StopReason::Completed,
        text: text.to_owned(),
        title: None,
        todos: vec![],
        usage: Usage {
            input_tokens: 40,
            output_tokens: 8,
            model_calls: 2,
            tool_calls: 1,
            ..Usage::default()
        },
        files,
        error: None,
    }
}

async fn snapshot_of(fixture: &Fixture, run: &str) -> anyhow::Result<Snapshot> {
    let cms: Api<ConfigMap> = Api::namespaced(fixture.admin.clone(), &fixture.namespace);
    let name = format!("{run}-snapshot");
    wait_for(&format!("the snapshot {name}"), WAIT, || async {
        Ok(cms.get_opt(&name).await?.as_ref().and_then(read_snapshot))
    })
    .await
}

/// Start, ask again, wait, finish, fetch the files, and the refusals at the limits.
pub async fn children_start_wait_and_hand_over_files(env: TestEnv) -> anyhow::Result<()> {
    let mut fixture = Fixture::start_with(
        env,
        json!({"runDefaults": {"timeout": "10m", "maxModelCalls": 20, "tokenBudget": 5000},
            "subagents": {"enabled": true, "maxConcurrent": 2, "maxTotal": 2, "maxDepth": 1,
                "timeout": "5m"}}),
    )
    .await?;
    let pod = fixture.run_pod("lead").await?;
    let token = fixture.token(&pod, Some(AUDIENCE)).await?;
    let https = fixture.https().clone();
    let runs = fixture.runs();
    let lead = runs.get("lead").await?;
    let child = child_name("lead", &lead.uid().context("a UID")?, "call_1");
    let start = |request: ChildRequest, token: String, run: &str| {
        send(
            https
                .post(fixture.url(run, "children"))
                .bearer_auth(token)
                .json(&request),
        )
    };
    let poll = |call: &str, wait: u64| {
        send(
            https
                .get(fixture.url("lead", &format!("children/{call}?wait={wait}")))
                .bearer_auth(&token),
        )
    };

    // Started once; asked again, the same child.
    let mut claimed = ask("call_1");
    claimed.model_calls_left = Some(3);
    claimed.tokens_left = Some(90_000);
    claimed.seconds_left = Some(120);
    let created: ChildOutcome = start(claimed.clone(), token.clone(), "lead")
        .await?
        .expect(201)?;
    ensure!(
        created.name == child && created.status.is_none(),
        "{created:?}"
    );
    let again: ChildOutcome = start(claimed.clone(), token.clone(), "lead")
        .await?
        .expect(200)?;
    ensure!(again.name == child && again.status.is_none(), "{again:?}");
    let children = runs
        .list(&ListParams::default().fields("spec.parentRef.name=lead"))
        .await?;
    ensure!(
        children
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>()
            == [child.clone()],
        "one child for one toolCallId"
    );

    // The narrower of the claim and the parent's snapshot, whatever the runner claims.
    let snapshot = snapshot_of(&fixture, &child).await?;
    ensure!(snapshot.depth == 1, "depth {}", snapshot.depth);
    ensure!(
        (snapshot.run.max_model_calls, snapshot.run.token_budget) == (3, Some(5000)),
        "model calls claimed, tokens the parent's: {:?}",
        snapshot.run
    );
    ensure!(
        snapshot.run.timeout_seconds <= 120 && snapshot.run.timeout_seconds > 60,
        "the seconds claimed: {}",
        snapshot.run.timeout_seconds
    );

    // Going: the wait passes, then the name only.
    let started = Instant::now();
    let waited: ChildOutcome = poll("call_1", 2).await?.expect(200)?;
    let took = started.elapsed();
    ensure!(
        waited.name == child && waited.status.is_none(),
        "{waited:?}"
    );
    ensure!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(10),
        "waited {took:?}"
    );
    let unknown = poll("call_9", 0).await?.refused(404, "NotFound")?;
    ensure!(unknown.contains("no child Run"), "{unknown}");

    // Ended: a waiting poll answers when the child's own runner posts its result.
    let child_pod = fixture.pod(&format!("{child}-1")).await?;
    let child_token = fixture.token(&child_pod, Some(AUDIENCE)).await?;
    // A child at maxDepth starts none.
    let deep = start(ask("deeper"), child_token.clone(), &child)
        .await?
        .refused(403, "Forbidden")?;
    ensure!(
        deep == "a Run at depth 1 cannot delegate: maxDepth is 1",
        "{deep}"
    );
    let waiting = tokio::spawn(poll("call_1", 50));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let binary = vec![0u8, 159, 146, 150, 255];
    let finished = Instant::now();
    let child_result = result(
        "Part one is done.",
        vec![
            PresentedFile {
                path: "/mnt/user-data/outputs/notes/part one.md".into(),
                data_base64: STANDARD.encode("# Part one\n"),
            },
            PresentedFile {
                path: "/mnt/user-data/outputs/data.bin".into(),
                data_base64: STANDARD.encode(&binary),
            },
        ],
    );
    let accepted: ResultAccepted = fixture
        .post(&child, "result", &child_token, &child_result)
        .await?
        .expect(200)?;
    ensure!(accepted.stop_reason == StopReason::Completed);
    let outcome: ChildOutcome = waiting.await??.expect(200)?;
    let woke = finished.elapsed();
    ensure!(woke < Duration::from_secs(20), "woken after {woke:?}");
    ensure!(
        (
            outcome.status,
            outcome.stop_reason,
            outcome.result.as_str(),
            outcome.error.as_ref()
        ) == (
            Some(ChildStatus::Completed),
            Some(StopReason::Completed),
            "Part one is done.",
            None
        ),
        "{outcome:?}"
    );
    ensure!(outcome.usage == child_result.usage, "{:?}", outcome.usage);
    ensure!(
        outcome
            .artifacts
            .iter()
            .map(|a| (a.path.as_str(), a.size))
            .collect::<Vec<_>>()
            == [
                ("/mnt/user-data/outputs/notes/part one.md", 11),
                ("/mnt/user-data/outputs/data.bin", 5)
            ],
        "{:?}",
        outcome.artifacts
    );
    let asked_again: ChildOutcome = start(claimed, token.clone(), "lead").await?.expect(200)?;
    ensure!(
        asked_again == outcome,
        "asked again once ended: the outcome"
    );
    let at_once: ChildOutcome = poll("call_1", 0).await?.expect(200)?;
    ensure!(at_once == outcome);

    // The files, byte for byte, their paths in the header.
    let file = |call: &str, n: &str| {
        https
            .get(fixture.url("lead", &format!("children/{call}/files/{n}")))
            .bearer_auth(&token)
    };
    let first = file("call_1", "0").send().await?;
    ensure!(first.status().as_u16() == 200, "{}", first.status());
    let header = |response: &reqwest::Response, name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    ensure!(header(&first, "content-type").as_deref() == Some(FILE_CONTENT_TYPE));
    ensure!(header(&first, "content-length").as_deref() == Some("11"));
    ensure!(
        header(&first, FILE_PATH_HEADER).as_deref()
            == Some("/mnt/user-data/outputs/notes/part%20one.md"),
        "{:?}",
        header(&first, FILE_PATH_HEADER)
    );
    ensure!(first.bytes().await?.as_ref() == b"# Part one\n");
    let second = file("call_1", "1").send().await?;
    ensure!(
        header(&second, FILE_PATH_HEADER).as_deref() == Some("/mnt/user-data/outputs/data.bin")
    );
    ensure!(
        second.bytes().await?.as_ref() == binary.as_slice(),
        "binary"
    );
    for (call, n) in [("call_1", "2"), ("call_1", "x"), ("call_9", "0")] {
        let message = send(file(call, n)).await?.refused(404, "NotFound")?;
        ensure!(!message.is_empty(), "{call}/{n}");
    }

    // maxTotal: refused, saying why.
    let second_child: ChildOutcome = start(ask("call_2"), token.clone(), "lead")
        .await?
        .expect(201)?;
    ensure!(second_child.status.is_none());
    let total = start(ask("call_3"), token.clone(), "lead")
        .await?
        .refused(403, "Forbidden")?;
    ensure!(
        total == "this Run has started 2 child Runs, its maxTotal",
        "{total}"
    );

    // The parent ends: no more children, and its runner is told to stop.
    fixture
        .post("lead", "result", &token, &result("All done.", vec![]))
        .await?
        .expect::<ResultAccepted>(200)?;
    run_until(&runs, "lead", "the parent Succeeded", |r| {
        succeeded(r, ConditionStatus::True, "Succeeded")
    })
    .await?;
    let ended = start(ask("call_4"), token.clone(), "lead")
        .await?
        .refused(409, "StaleAttempt")?;
    ensure!(ended.contains("has ended"), "{ended}");
    fixture.running.shutdown().await?;
    Ok(())
}
