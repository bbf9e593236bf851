//! A runner's reports reaching the Run: `config` from the snapshot, `progress` coalesced into
//! `status.report`, `result` written to `<run>-result` and then the report, ending the Run.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures::StreamExt;
use herd_crds::condition::ConditionStatus;
use herd_crds::report::{Cost, StopReason, Todo, TodoStatus, Usage, UsageTotals};
use herd_crds::run::Run;
use herd_crds::wire::{
    CallStats, PresentedFile, ProgressReport, ResultAccepted, ResultReport, RunConfig, TimedCall,
    ToolCount,
};
use herd_e2e::TestEnv;
use herd_operator::decide::run_snapshot::read_snapshot;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::json;

use super::support::{AUDIENCE, Fixture, send};
use crate::operator::run_fixtures::{WAIT, message, reaches, run_until};
use crate::operator::support::http_get;

fn report_of(run: &Run) -> Option<&herd_crds::run::RunReport> {
    run.status.as_ref().and_then(|s| s.report.as_ref())
}

/// The managed-fields entry of the run API's writes.
fn runapi_entry(run: &Run) -> Option<ManagedFieldsEntry> {
    run.metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|m| m.manager.as_deref() == Some("herd-runapi"))
        .cloned()
}

/// Every `status.report.seq` the Run shows, as a watch sees each write.
async fn watch_report_seqs(runs: Api<Run>, name: &str) -> anyhow::Result<Arc<Mutex<Vec<u64>>>> {
    let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (listed, mut listed_rx) = tokio::sync::watch::channel(false);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let log = seen.clone();
    tokio::spawn(async move {
        let mut events = watcher(runs, config).boxed();
        while let Some(Ok(event)) = events.next().await {
            match event {
                watcher::Event::InitDone => {
                    listed.send_replace(true);
                }
                watcher::Event::Apply(run) | watcher::Event::InitApply(run) => {
                    if let (Some(report), Ok(mut log)) = (report_of(&run), log.lock()) {
                        log.push(report.seq);
                    }
                }
                _ => {}
            }
        }
    });
    tokio::time::timeout(WAIT, listed_rx.wait_for(|l| *l))
        .await
        .context("the watch did not list")??;
    Ok(seen)
}

fn progress(seq: u64) -> ProgressReport {
    ProgressReport {
        attempt: 1,
        seq,
        title: (seq >= 3).then(|| "A greeting".to_owned()),
        todos: vec![Todo {
            content: format!("step {seq}"),
            status: TodoStatus::InProgress,
        }],
        usage: Usage {
            model_calls: u32::try_from(seq).unwrap_or(u32::MAX),
            ..Usage::default()
        },
        ..ProgressReport::default()
    }
}

/// `config` is the snapshot's plan inputs; ten progress reports in a burst reach
/// `status.report` as at most a write a second, the latest winning and a stale one dropped; the
/// result is in `<run>-result` (whole) and in status (cut to 16 KiB) when the 200 comes, the
/// Run ends Succeeded, and a retried post is answered without a second write.
pub async fn config_progress_and_result_end_the_run(env: TestEnv) -> anyhow::Result<()> {
    let mut fixture = Fixture::start(env, json!({"timeout": "10m"})).await?;
    let pod = fixture.run_pod("hello").await?;
    let token = fixture.token(&pod, Some(AUDIENCE)).await?;
    let https = fixture.https().clone();

    let config: RunConfig = send(
        https
            .get(fixture.url("hello", "config"))
            .bearer_auth(&token),
    )
    .await?
    .expect(200)?;
    let cms: Api<ConfigMap> = Api::namespaced(fixture.admin.clone(), &fixture.namespace);
    let snapshot = read_snapshot(&cms.get("hello-snapshot").await?).context("a snapshot")?;
    ensure!(config.agent == snapshot.agent, "the snapshot's Agent spec");
    ensure!(
        (
            config.agent_name.as_str(),
            config.run.task.as_str(),
            config.attempt,
            config.depth
        ) == ("helper", "Say hello.", 1, 0),
        "{config:?}"
    );
    ensure!(config.max_model_calls == snapshot.run.max_model_calls);
    ensure!(config.token_budget == snapshot.run.token_budget);
    ensure!(
        config.seconds_left > 500 && config.seconds_left <= 600,
        "the 10m timeout less the time since startTime: {}",
        config.seconds_left
    );

    let runs = fixture.runs();
    let seqs = watch_report_seqs(runs.clone(), "hello").await?;
    let started = Instant::now();
    for seq in 1..=10 {
        fixture
            .post("hello", "progress", &token, &progress(seq))
            .await?
            .expect::<serde_json::Value>(202)?;
    }
    let burst = started.elapsed();
    let run = run_until(&runs, "hello", "the latest progress in status", |run| {
        report_of(run).is_some_and(|r| r.seq == 10)
    })
    .await?;
    let report = report_of(&run).context("a report")?;
    ensure!(report.usage.model_calls == 10 && report.title.as_deref() == Some("A greeting"));
    ensure!(report.todos.len() == 1 && report.todos[0].content == "step 10");
    ensure!(report.result.is_none() && report.stop_reason.is_none());
    let manager = runapi_entry(&run).context("no herd-runapi field manager")?;
    ensure!(
        manager.operation.as_deref() == Some("Apply")
            && manager.subresource.as_deref() == Some("status"),
        "{manager:?}"
    );

    // Stale: dropped, never written over the newer report.
    fixture
        .post("hello", "progress", &token, &progress(4))
        .await?
        .expect::<serde_json::Value>(202)?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    ensure!(report_of(&runs.get("hello").await?).map(|r| r.seq) == Some(10));
    let written: BTreeSet<u64> = seqs
        .lock()
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default();
    let most = 2 + burst.as_secs();
    ensure!(
        written.contains(&10) && written.len() as u64 <= most && !written.contains(&4),
        "coalesced to at most a write a second: {written:?} in {burst:?}"
    );

    let answer = format!("Hello! {}", "é".repeat(20_000));
    let binary = vec![0u8, 159, 146, 150, 255];
    let result = ResultReport {
        attempt: 1,
        seq: 11,
        stop_reason: StopReason::Completed,
        text: answer.clone(),
        title: Some("A greeting".into()),
        todos: vec![],
        usage: Usage {
            input_tokens: 120,
            output_tokens: 30,
            model_calls: 11,
            tool_calls: 2,
            ..Usage::default()
        },
        files: vec![
            PresentedFile {
                path: "/mnt/user-data/outputs/brief.md".into(),
                data_base64: STANDARD.encode("# Brief\n"),
            },
            PresentedFile {
                path: "/mnt/user-data/outputs/data/plot.bin".into(),
                data_base64: STANDARD.encode(&binary),
            },
        ],
        error: None,
    };
    let accepted: ResultAccepted = fixture
        .post("hello", "result", &token, &result)
        .await?
        .expect(200)?;
    ensure!(accepted.stop_reason == StopReason::Completed);
    // Durable when the 200 came: both are there at once.
    let stored = cms.get("hello-result").await?;
    let run = runs.get("hello").await?;
    let data = stored.data.clone().context("no data")?;
    ensure!(data.get("answer.md") == Some(&answer), "the whole answer");
    let files: serde_json::Value = serde_json::from_str(data.get("files.json").context("files")?)?;
    ensure!(
        files
            == json!([{"key": "f-0", "path": "/mnt/user-data/outputs/brief.md", "size": 8},
                {"key": "f-1", "path": "/mnt/user-data/outputs/data/plot.bin", "size": 5}]),
        "{files}"
    );
    let binary_data = stored.binary_data.clone().context("no binaryData")?;
    ensure!(binary_data.get("f-1").map(|b| b.0.clone()) == Some(binary));
    ensure!(
        stored
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Run" && Some(&o.uid) == run.metadata.uid.as_ref()),
        "owned by the Run"
    );
    let report = report_of(&run).context("a report")?;
    let text = &report.result.as_ref().context("a result")?.text;
    ensure!(text.chars().count() == 16_384 && answer.starts_with(text.as_str()));
    ensure!(
        report
            .result
            .as_ref()
            .is_some_and(|r| r.truncated && r.artifacts.len() == 2)
    );
    ensure!(report.stop_reason == Some(StopReason::Completed) && report.usage.tool_calls == 2);
    let report_time = runapi_entry(&run)
        .and_then(|m| m.time)
        .context("when the report was written")?;
    ensure!(
        stored.metadata.creation_timestamp.as_ref() <= Some(&report_time),
        "the ConfigMap before the report"
    );
    let done = reaches(&runs, "hello", ConditionStatus::True, "Succeeded").await?;
    ensure!(
        done.status
            .as_ref()
            .is_some_and(|s| s.completion_time.is_some())
    );

    // A post retried after a lost answer: the same 200, nothing written again.
    let before = runs.get("hello").await?;
    let stored_version = stored.metadata.resource_version.clone();
    let again: ResultAccepted = fixture
        .post("hello", "result", &token, &result)
        .await?
        .expect(200)?;
    ensure!(again.stop_reason == StopReason::Completed);
    fixture
        .post("hello", "progress", &token, &progress(12))
        .await?
        .expect::<serde_json::Value>(202)?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The controller may still write its part of the status; the report is the run API's.
    let after = runs.get("hello").await?;
    ensure!(
        report_of(&after) == report_of(&before) && runapi_entry(&after) == runapi_entry(&before),
        "a result is final: neither the retry nor a later progress wrote"
    );
    ensure!(
        cms.get("hello-result").await?.metadata.resource_version == stored_version,
        "the result ConfigMap is not written again"
    );
    fixture.running.shutdown().await?;
    Ok(())
}

/// An answer and files past ~900 KiB in the result ConfigMap (a 2 MiB body is allowed) fail the
/// Run `ResultTooLarge`, saying so, and no ConfigMap is written.
pub async fn a_result_too_large_fails_the_run(env: TestEnv) -> anyhow::Result<()> {
    let mut fixture = Fixture::start(env, json!({})).await?;
    let pod = fixture.run_pod("big").await?;
    let token = fixture.token(&pod, Some(AUDIENCE)).await?;
    let result = ResultReport {
        attempt: 1,
        seq: 1,
        stop_reason: StopReason::Completed,
        text: "Here is the data.".into(),
        title: None,
        todos: vec![],
        usage: Usage::default(),
        files: vec![PresentedFile {
            path: "/mnt/user-data/outputs/data.bin".into(),
            data_base64: STANDARD.encode(vec![7u8; 800 * 1024]),
        }],
        error: None,
    };
    let accepted: ResultAccepted = send(
        fixture
            .https()
            .post(fixture.url("big", "result"))
            .bearer_auth(&token)
            .json(&result),
    )
    .await?
    .expect(200)?;
    ensure!(accepted.stop_reason == StopReason::ResultTooLarge);
    let runs = fixture.runs();
    let failed = reaches(&runs, "big", ConditionStatus::False, "ResultTooLarge").await?;
    let why = message(&failed);
    ensure!(
        why.starts_with("the result was too large: ") && why.contains("over its limit of 921600"),
        "{why}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(fixture.admin.clone(), &fixture.namespace);
    ensure!(cms.get_opt("big-result").await?.is_none(), "no ConfigMap");
    fixture.running.shutdown().await?;
    Ok(())
}

/// The usage a runner reports, as the split it is: two models, cached input and a cost.
fn split_usage(input: u64, cached: u64, output: u64, micros: u64) -> Usage {
    let mut usage = Usage {
        model_calls: 2,
        tool_calls: 1,
        cost: Some(Cost {
            currency: "USD".into(),
            micros,
        }),
        ..Usage::default()
    };
    usage.add_call(
        "gpt-4.1",
        &Usage {
            input_tokens: input - 10,
            cached_input_tokens: cached,
            output_tokens: output - 2,
            ..Usage::default()
        },
    );
    usage.add_call(
        "gpt-4.1-mini",
        &Usage {
            input_tokens: 10,
            output_tokens: 2,
            ..Usage::default()
        },
    );
    usage
}

/// The metric lines of `/metrics` that name `name`, for the failure message.
fn lines_of(text: &str, name: &str) -> String {
    text.lines()
        .filter(|l| l.starts_with(name))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Progress reports with cached tokens, a split by model and a cost reach `status.report.usage`
/// as sent; the result's `withChildren` too; the operator's metrics count each report once,
/// whatever was re-sent: tokens by Agent, model and kind, the cost, model call times and tool
/// outcomes.
pub async fn usage_split_children_and_cost_reach_status_and_metrics(
    env: TestEnv,
) -> anyhow::Result<()> {
    let mut fixture = Fixture::start(env, json!({})).await?;
    let pod = fixture.run_pod("priced").await?;
    let token = fixture.token(&pod, Some(AUDIENCE)).await?;
    let https = fixture.https().clone();
    let post = |seq: u64, usage: Usage, calls: CallStats| {
        let request = https
            .post(fixture.url("priced", "progress"))
            .bearer_auth(&token)
            .json(&ProgressReport {
                attempt: 1,
                seq,
                usage,
                calls,
                ..ProgressReport::default()
            });
        async move { send(request).await?.expect::<serde_json::Value>(202) }
    };
    let first_calls = CallStats {
        model_calls: vec![TimedCall { n: 1, millis: 1500 }],
        tool_calls: vec![ToolCount {
            tool: "bash".into(),
            outcome: "ok".into(),
            count: 1,
        }],
    };
    let later_calls = CallStats {
        model_calls: vec![
            TimedCall { n: 1, millis: 1500 },
            TimedCall { n: 2, millis: 500 },
        ],
        tool_calls: vec![
            ToolCount {
                tool: "bash".into(),
                outcome: "ok".into(),
                count: 1,
            },
            ToolCount {
                tool: "github__create_issue".into(),
                outcome: "error".into(),
                count: 1,
            },
        ],
    };
    post(1, split_usage(500, 200, 40, 1_000), first_calls.clone()).await?;
    // The same report again (a retry), then a newer one.
    post(1, split_usage(500, 200, 40, 1_000), first_calls).await?;
    post(2, split_usage(1_200, 800, 90, 2_870), later_calls.clone()).await?;
    post(2, split_usage(1_200, 800, 90, 2_870), later_calls).await?;

    let runs = fixture.runs();
    let run = run_until(&runs, "priced", "the second report in status", |run| {
        report_of(run).is_some_and(|r| r.seq == 2)
    })
    .await?;
    let usage = &report_of(&run).context("a report")?.usage;
    ensure!(
        (
            usage.input_tokens,
            usage.cached_input_tokens,
            usage.output_tokens
        ) == (1_200, 800, 90),
        "{usage:?}"
    );
    ensure!(
        usage.by_model.len() == 2
            && usage.by_model[0].model == "gpt-4.1"
            && usage.by_model[0].cached_input_tokens == 800
            && usage.by_model[1].input_tokens == 10,
        "{usage:?}"
    );
    ensure!(
        usage.cost.as_ref().map(|c| c.micros) == Some(2_870),
        "{usage:?}"
    );

    // The result: a child of the Run used 300 in / 20 out and cost 700 micros.
    let own = split_usage(1_500, 800, 100, 3_500);
    let children = UsageTotals {
        input_tokens: 300,
        output_tokens: 20,
        model_calls: 1,
        cost: Some(Cost {
            currency: "USD".into(),
            micros: 700,
        }),
        ..UsageTotals::default()
    };
    let result = ResultReport {
        attempt: 1,
        seq: 3,
        stop_reason: StopReason::Completed,
        text: "Done.".into(),
        title: None,
        todos: vec![],
        usage: own.including_children(&children),
        files: vec![],
        error: None,
    };
    send(
        fixture
            .https()
            .post(fixture.url("priced", "result"))
            .bearer_auth(&token)
            .json(&result),
    )
    .await?
    .expect::<ResultAccepted>(200)?;
    let ended = reaches(&runs, "priced", ConditionStatus::True, "Succeeded").await?;
    let usage = &report_of(&ended).context("a report")?.usage;
    let total = usage.with_children.as_ref().context("withChildren")?;
    ensure!(
        (total.input_tokens, total.output_tokens, total.model_calls) == (1_800, 120, 3)
            && total.cost.as_ref().map(|c| c.micros) == Some(4_200),
        "{total:?}"
    );

    let (code, text) = http_get(fixture.running.http_addr, "/metrics").await?;
    ensure!(code == 200, "/metrics answered {code}");
    let ns = &fixture.namespace;
    for line in [
        // 1500 in (800 cached) and 100 out, counted once: gpt-4.1 has 1490 in, 98 out.
        format!(
            r#"herd_model_tokens_total{{namespace="{ns}",agent="helper",model="gpt-4.1",kind="input"}} 690"#
        ),
        format!(
            r#"herd_model_tokens_total{{namespace="{ns}",agent="helper",model="gpt-4.1",kind="cached_input"}} 800"#
        ),
        format!(
            r#"herd_model_tokens_total{{namespace="{ns}",agent="helper",model="gpt-4.1",kind="output"}} 98"#
        ),
        format!(
            r#"herd_model_tokens_total{{namespace="{ns}",agent="helper",model="gpt-4.1-mini",kind="input"}} 10"#
        ),
        format!(r#"herd_run_cost_total{{namespace="{ns}",agent="helper",currency="USD"}} 0.0035"#),
        r#"herd_tool_calls_total{tool="bash",outcome="ok"} 1"#.to_owned(),
        r#"herd_tool_calls_total{tool="mcp",outcome="error"} 1"#.to_owned(),
        "herd_model_call_duration_seconds_count 2".to_owned(),
        "herd_model_call_duration_seconds_sum 2.0".to_owned(),
    ] {
        ensure!(
            text.lines().any(|l| l == line),
            "{line} is not in\n{}\n{}\n{}\n{}",
            lines_of(&text, "herd_model_tokens"),
            lines_of(&text, "herd_run_cost"),
            lines_of(&text, "herd_tool_calls"),
            lines_of(&text, "herd_model_call_duration_seconds_")
        );
    }
    fixture.running.shutdown().await?;
    Ok(())
}
