//! One trace per Run across processes (docs/traces.md): the in-process operator starts the
//! Run's trace, its Pod's runner continues it, each child Run (created through the run API)
//! continues the span of its parent's `task` call, and every span reaches a real OTLP/HTTP
//! receiver that decodes the exports with the official protobuf types.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use herd_crds::condition::ConditionStatus;
use herd_e2e::TestEnv;
use herd_e2e::wait::wait_for;
use serde_json::json;

#[path = "../../../../runner/tests/otlp/mod.rs"]
mod otlp;

use super::cluster::{MODEL_KEY, Scenario};
use super::script::{script_config_map, scripted_agent};
use crate::operator::run_fixtures::{message, succeeded};
use otlp::{ReceivedSpan, Receiver};

/// From the Run's creation to its end: three Pods and five model calls.
const RUN_TIME: Duration = Duration::from_secs(240);

/// How long the last spans take to arrive after the Run ended.
const EXPORT_TIME: Duration = Duration::from_secs(60);

/// The name of the operator's span of a runner's result request.
const RESULT: &str = "POST /v1/runs/{namespace}/{name}/result";

/// The tokens the script reports for each call: (input, output).
const LEAD_FIRST: (i64, i64) = (101, 11);
const LEAD_LAST: (i64, i64) = (202, 22);
const CHILD: (i64, i64) = (33, 3);

/// The lead starts two children at once, each answers, then the lead answers.
fn script() -> String {
    let task = |what: &str| {
        json!({"name": "task", "arguments": {"description": what,
            "prompt": format!("Say {what}."), "subagent_type": "general-purpose"}})
    };
    json!({"rules": [
        {"match": {"purpose": "title"}, "respond": {"content": "Two words"}},
        {"match": {"role": "lead", "call": 1}, "respond": {
            "toolCalls": [task("hello"), task("world")],
            "usage": {"inputTokens": LEAD_FIRST.0, "outputTokens": LEAD_FIRST.1}}},
        {"match": {"role": "subagent"}, "respond": {"content": "Said.",
            "usage": {"inputTokens": CHILD.0, "outputTokens": CHILD.1}}},
        {"match": {"role": "lead", "call": 2}, "respond": {"content": "Both said.",
            "usage": {"inputTokens": LEAD_LAST.0, "outputTokens": LEAD_LAST.1}}},
    ]})
    .to_string()
}

/// A fan-out of two children: one trace id from the operator's `reconcile Run` to every
/// child's model calls, each child's runner under its parent's `execute_tool task` span, the
/// operator's admission answers and run-API requests in the trace, the GenAI attributes with
/// the script's token counts, and no key in any attribute.
pub async fn a_fan_out_is_one_trace_from_operator_to_every_model_call(
    env: TestEnv,
) -> anyhow::Result<()> {
    let host = env
        .node()
        .map_or(std::net::Ipv4Addr::LOCALHOST.into(), |node| node.node_ip());
    let dir = tempfile::tempdir()?;
    let receiver = Receiver::start(SocketAddr::new(host, 0), &dir.path().join("spans.jsonl")).await;
    let endpoint = receiver.endpoint();
    let provider = herd_operator::traces::export_to(&endpoint)
        .context("the operator's exporter is installed")?;
    let on_node = env.node().is_some();
    let mut scenario = Scenario::start_operator(&env, |config| {
        config.runs.runner_otlp_endpoint = Some(endpoint.clone());
        if on_node {
            config.runs.runner_otlp_cidr = Some(format!("{host}/32"));
            config.runs.runner_otlp_port = i32::from(receiver.address.port());
        }
        Ok(())
    })
    .await?;
    let checked = async {
        scenario
            .create_helper(scripted_agent(json!({
                "subagents": {"enabled": true, "maxConcurrent": 2, "maxTotal": 2},
            })))
            .await?;
        script_config_map(&scenario.admin, &scenario.namespace, &script()).await?;
        scenario.create_run("traced", "Say two words.").await?;
        let run = scenario.finished("traced", RUN_TIME).await?;
        ensure!(
            succeeded(&run, ConditionStatus::True, "Succeeded"),
            "the Run ended otherwise: {}",
            message(&run)
        );
        let waited = wait_for("every span exported", EXPORT_TIME, || async {
            // The operator's last request span ends after the Run's status is written.
            let _ = provider.force_flush();
            let spans = receiver.spans();
            let count = |name: &str| spans.iter().filter(|s| s.name.starts_with(name)).count();
            Ok(
                (count("chat ") >= 4 && count("reconcile Run") == 1 && count(RESULT) >= 3)
                    .then_some(spans),
            )
        })
        .await;
        let spans = waited.with_context(|| {
            let names: Vec<String> = receiver.spans().into_iter().map(|s| s.name).collect();
            format!("the spans that arrived: {names:?}")
        })?;
        check_trace(&spans)
    }
    .await;
    let _ = provider.shutdown();
    opentelemetry::global::set_tracer_provider(
        opentelemetry::trace::noop::NoopTracerProvider::new(),
    );
    checked
}

fn check_trace(spans: &[ReceivedSpan]) -> anyhow::Result<()> {
    let by_id: HashMap<&str, &ReceivedSpan> = spans
        .iter()
        .map(|span| (span.span_id.as_str(), span))
        .collect();
    let parent = |span: &ReceivedSpan| by_id.get(span.parent_span_id.as_str()).copied();
    let roots: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    ensure!(
        roots.len() == 1 && roots[0].name == "reconcile Run traced",
        "one root, the operator's: {roots:#?}"
    );
    let trace = &roots[0].trace_id;
    ensure!(
        spans.iter().all(|span| &span.trace_id == trace),
        "every span in the Run's trace: {spans:#?}"
    );
    ensure!(
        spans
            .iter()
            .all(|span| span.parent_span_id.is_empty() || parent(span).is_some()),
        "every parent exported: {spans:#?}"
    );
    let agents: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|span| span.str("gen_ai.operation.name") == Some("invoke_agent"))
        .collect();
    let lead: Vec<&&ReceivedSpan> = agents
        .iter()
        .filter(|span| parent(span).is_some_and(|p| p.name == "reconcile Run traced"))
        .collect();
    ensure!(
        lead.len() == 1,
        "the lead's pod continues the operator's span: {agents:#?}"
    );
    let children: Vec<&&ReceivedSpan> = agents
        .iter()
        .filter(|span| {
            parent(span).is_some_and(|p| {
                p.name == "execute_tool task"
                    && parent(p).map(|a| &a.span_id) == Some(&lead[0].span_id)
            })
        })
        .collect();
    ensure!(
        children.len() == 2,
        "each child's pod continues its parent's task call: {agents:#?}"
    );
    check_operator_spans(spans, &lead[0].span_id)?;
    let mut tokens: Vec<(bool, i64, i64)> = spans
        .iter()
        .filter(|span| span.str("gen_ai.operation.name") == Some("chat"))
        .filter(|span| span.str("herd.purpose") == Some("main"))
        .map(|chat| {
            let in_child = parent(chat)
                .is_some_and(|agent| children.iter().any(|child| child.span_id == agent.span_id));
            (
                in_child,
                chat.int("gen_ai.usage.input_tokens").unwrap_or(-1),
                chat.int("gen_ai.usage.output_tokens").unwrap_or(-1),
            )
        })
        .collect();
    tokens.sort_unstable();
    ensure!(
        tokens
            == [
                (false, LEAD_FIRST.0, LEAD_FIRST.1),
                (false, LEAD_LAST.0, LEAD_LAST.1),
                (true, CHILD.0, CHILD.1),
                (true, CHILD.0, CHILD.1),
            ],
        "the script's tokens on the chat spans: {tokens:?}"
    );
    for chat in spans.iter().filter(|span| span.name.starts_with("chat ")) {
        ensure!(
            chat.str("gen_ai.provider.name") == Some("herd.scripted")
                && chat.str("gen_ai.request.model") == Some("script")
                && chat
                    .attributes
                    .contains_key("gen_ai.response.finish_reasons"),
            "GenAI attributes: {chat:#?}"
        );
    }
    for span in spans {
        let text = serde_json::to_string(span)?;
        ensure!(
            !text.contains(MODEL_KEY),
            "the model key reached a span: {text}"
        );
        ensure!(
            !span.attributes.contains_key("gen_ai.input.messages"),
            "content is off by default: {text}"
        );
    }
    Ok(())
}

/// The operator's spans under the runners': each Run's admission answer under the span that
/// started it (the operator's for the lead, a `task` call for a child), and each request a
/// server span under the runner span that sent it (a child Run's creation under its `task`
/// call, each Run's result answered 200).
fn check_operator_spans(spans: &[ReceivedSpan], lead: &str) -> anyhow::Result<()> {
    let by_id: HashMap<&str, &ReceivedSpan> = spans
        .iter()
        .map(|span| (span.span_id.as_str(), span))
        .collect();
    let parent_name = |span: &ReceivedSpan| {
        by_id
            .get(span.parent_span_id.as_str())
            .map(|parent| parent.name.as_str())
    };
    // A Run reconciled again before its Pod shows in the cache may be admitted twice.
    let mut admitted: Vec<(Option<&str>, &str)> = spans
        .iter()
        .filter(|span| span.str("herd.admission.decision") == Some("admitted"))
        .map(|span| (parent_name(span), span.parent_span_id.as_str()))
        .collect();
    admitted.sort_unstable();
    admitted.dedup();
    let admitted: Vec<Option<&str>> = admitted.into_iter().map(|(name, _)| name).collect();
    ensure!(
        admitted
            == [
                Some("execute_tool task"),
                Some("execute_tool task"),
                Some("reconcile Run traced")
            ],
        "each Run admitted in its trace: {admitted:?}"
    );
    let requests: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|span| span.attributes.contains_key("http.route"))
        .collect();
    ensure!(
        requests.iter().all(
            |span| !span.parent_span_id.is_empty() && span.str("http.request.method").is_some()
        ),
        "each request under the span that sent it: {requests:#?}"
    );
    // A request may be retried after a 503; each Run's result is accepted once.
    let results: Vec<&&ReceivedSpan> = requests.iter().filter(|span| span.name == RESULT).collect();
    let accepted = results
        .iter()
        .filter(|span| span.int("http.response.status_code") == Some(200))
        .count();
    ensure!(
        accepted == 3,
        "each Run's result answered 200: {results:#?}"
    );
    let created: Vec<&&ReceivedSpan> = requests
        .iter()
        .filter(|span| span.name == "POST /v1/runs/{namespace}/{name}/children")
        .collect();
    ensure!(
        created.len() >= 2
            && created.iter().all(|span| {
                by_id.get(span.parent_span_id.as_str()).is_some_and(|task| {
                    task.name == "execute_tool task" && task.parent_span_id == lead
                })
            }),
        "each child's creation under the lead's task call: {created:#?}"
    );
    Ok(())
}
