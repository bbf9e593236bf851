//! `herd-runner run` exports OpenTelemetry GenAI spans to a real OTLP/HTTP receiver: one trace
//! continued from `TRACEPARENT`, the lead's and each subagent's `invoke_agent`, a `chat` span
//! per model call with the scripted model's token counts, an `execute_tool` span per tool call,
//! and no prompt text or key unless the Agent opts in (and never the key).

// Test helpers outside #[test] functions: a failure to spawn must fail the test loudly.
#![allow(clippy::expect_used)]

mod otlp;
mod scripted;

use std::path::Path;
use std::process::Output;

use otlp::{ReceivedSpan, Receiver};
use scripted::scripted_agent;

/// The trace the "operator" started: the run continues it.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";
/// A key value that must never reach a span.
const SECRET: &str = "sk-test-SECRET-never-in-spans";
/// A phrase of the task: prompt text, on spans only with `captureContent`.
const TASK_PHRASE: &str = "compare the herons";

/// An Agent delegating once to a subagent, then answering; `capture` is its
/// `observability.captureContent`.
fn manifest(capture: bool) -> String {
    let spec = format!(
        "  subagents: {{enabled: true, maxConcurrent: 2, maxTotal: 2}}
  memory: {{enabled: false}}
  observability: {{captureContent: {capture}}}"
    );
    let script = r#"rules:
  - match: {purpose: title}
    respond: {content: "Herons", usage: {inputTokens: 7, outputTokens: 2}}
  - match: {role: lead, call: 1}
    respond:
      usage: {inputTokens: 111, outputTokens: 22}
      toolCalls:
        - name: task
          arguments: {description: "Look", prompt: "Look at the herons.", subagent_type: general-purpose}
  - match: {role: subagent, call: 1}
    respond:
      usage: {inputTokens: 21, outputTokens: 2}
      toolCalls:
        - name: bash
          arguments: {description: "Count", command: "echo herons"}
  - match: {role: subagent}
    respond: {content: "Grey and great.", usage: {inputTokens: 33, outputTokens: 4}}
  - match: {role: lead, call: 2}
    respond: {content: "Both are herons.", usage: {inputTokens: 55, outputTokens: 6}}
"#;
    format!(
        "{}---
apiVersion: herd.dev/v1alpha1
kind: Run
metadata: {{name: traced}}
spec:
  agentRef: {{name: tracer}}
  task: \"Please {TASK_PHRASE} of the marsh.\"
",
        scripted_agent("tracer", "trace-script", &spec, script)
    )
}

/// Runs the manifest with the exporter pointed at `endpoint`, under the trace in
/// `TRACEPARENT`, with `SECRET` as the API key in the environment.
async fn run(endpoint: &str, manifest: &str, dir: &Path) -> Output {
    let file = dir.join("agent.yaml");
    std::fs::write(&file, manifest).expect("the manifest is written");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_herd-runner"));
    command
        .args(["run", "--json", "-f"])
        .arg(&file)
        .arg("--workdir")
        .arg(dir.join("work"))
        .env("HERD_HOME", dir)
        .env("OPENAI_API_KEY", SECRET)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("TRACEPARENT", format!("00-{TRACE_ID}-{PARENT_SPAN}-01"));
    command.output().await.expect("herd-runner runs")
}

fn named<'a>(spans: &'a [ReceivedSpan], prefix: &str) -> Vec<&'a ReceivedSpan> {
    spans
        .iter()
        .filter(|span| span.name.starts_with(prefix))
        .collect()
}

fn parent_of<'a>(spans: &'a [ReceivedSpan], span: &ReceivedSpan) -> &'a ReceivedSpan {
    spans
        .iter()
        .find(|candidate| candidate.span_id == span.parent_span_id)
        .unwrap_or_else(|| panic!("the parent of {} was exported", span.name))
}

/// Runs with `capture` and returns what the receiver got.
async fn traced_run(capture: bool) -> Vec<ReceivedSpan> {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let receiver = Receiver::start(
        "127.0.0.1:0".parse().expect("an address"),
        &dir.path().join("spans.jsonl"),
    )
    .await;
    let output = run(&receiver.endpoint(), &manifest(capture), dir.path()).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    receiver.spans()
}

// Over 80 lines: one run's whole trace (its tree of spans, their names and attributes) is
// checked as one picture, in the order the spans happen.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_is_one_trace_of_genai_spans_without_content_or_keys() {
    let spans = traced_run(false).await;
    assert!(!spans.is_empty(), "no span was exported");
    assert!(
        spans.iter().all(|span| span.trace_id == TRACE_ID),
        "every span continues TRACEPARENT's trace: {spans:#?}"
    );

    let lead = named(&spans, "invoke_agent lead");
    assert_eq!(lead.len(), 1, "{spans:#?}");
    let lead = lead[0];
    assert_eq!(lead.parent_span_id, PARENT_SPAN);
    assert_eq!(lead.str("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(lead.str("herd.stop_reason"), Some("Completed"));

    let task = named(&spans, "execute_tool task");
    assert_eq!(task.len(), 1, "{spans:#?}");
    let task = task[0];
    assert_eq!(task.parent_span_id, lead.span_id);
    assert_eq!(task.str("gen_ai.tool.name"), Some("task"));
    assert_eq!(task.str("gen_ai.tool.call.id"), Some("call_0_0"));
    assert_eq!(task.str("herd.tool.outcome"), Some("success"));

    let subagent = named(&spans, "invoke_agent general-purpose");
    assert_eq!(subagent.len(), 1, "{spans:#?}");
    assert_eq!(subagent[0].parent_span_id, task.span_id);
    assert_eq!(
        subagent[0].str("herd.subagent.type"),
        Some("general-purpose")
    );

    let bash = named(&spans, "execute_tool bash");
    assert_eq!(bash.len(), 1, "{spans:#?}");
    assert_eq!(bash[0].parent_span_id, subagent[0].span_id);
    assert_eq!(bash[0].str("herd.tool.outcome"), Some("success"));
    let round_trips = spans
        .iter()
        .filter(|span| span.name == "sandbox tool" && span.parent_span_id == bash[0].span_id)
        .count();
    assert_eq!(
        round_trips, 1,
        "the bash call's sandbox round trip: {spans:#?}"
    );

    let chats: Vec<&ReceivedSpan> = named(&spans, "chat trace-script")
        .into_iter()
        .filter(|span| span.str("herd.purpose") == Some("main"))
        .collect();
    let mut tokens: Vec<(String, i64, i64)> = chats
        .iter()
        .map(|chat| {
            assert_eq!(chat.str("gen_ai.operation.name"), Some("chat"));
            assert_eq!(chat.str("gen_ai.provider.name"), Some("herd.scripted"));
            assert_eq!(chat.str("gen_ai.request.model"), Some("trace-script"));
            assert_eq!(chat.str("gen_ai.response.model"), Some("trace-script"));
            assert!(
                chat.attributes
                    .contains_key("gen_ai.response.finish_reasons")
            );
            assert!(
                chat.attributes
                    .contains_key("gen_ai.response.time_to_first_chunk")
            );
            let agent = parent_of(&spans, chat);
            (
                agent.name.split('#').next().unwrap_or_default().to_owned(),
                chat.int("gen_ai.usage.input_tokens").unwrap(),
                chat.int("gen_ai.usage.output_tokens").unwrap(),
            )
        })
        .collect();
    tokens.sort();
    assert_eq!(
        tokens,
        [
            ("invoke_agent general-purpose".to_owned(), 21, 2),
            ("invoke_agent general-purpose".to_owned(), 33, 4),
            ("invoke_agent lead".to_owned(), 55, 6),
            ("invoke_agent lead".to_owned(), 111, 22),
        ]
    );
    let finish = chats
        .iter()
        .find(|chat| chat.int("gen_ai.usage.input_tokens") == Some(111))
        .unwrap();
    assert_eq!(
        finish.attributes["gen_ai.response.finish_reasons"],
        serde_json::json!(["tool_calls"])
    );

    for span in &spans {
        assert!(
            !span.attributes.contains_key("gen_ai.input.messages")
                && !span.attributes.contains_key("gen_ai.tool.call.arguments"),
            "content is off by default: {span:#?}"
        );
        let text = serde_json::to_string(span).unwrap();
        assert!(!text.contains(SECRET), "a key reached a span: {text}");
        assert!(
            !text.contains(TASK_PHRASE),
            "prompt text reached a span: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn captured_content_is_on_spans_and_keys_still_are_not() {
    let spans = traced_run(true).await;
    let chat = spans
        .iter()
        .find(|span| span.int("gen_ai.usage.input_tokens") == Some(111))
        .expect("the lead's first chat span");
    assert!(
        chat.str("gen_ai.input.messages")
            .is_some_and(|messages| messages.contains(TASK_PHRASE)),
        "{chat:#?}"
    );
    let task = named(&spans, "execute_tool task");
    assert!(
        task[0]
            .str("gen_ai.tool.call.arguments")
            .is_some_and(|arguments| arguments.contains("Look at the herons"))
    );
    for span in &spans {
        let text = serde_json::to_string(span).unwrap();
        assert!(!text.contains(SECRET), "a key reached a span: {text}");
    }
}

/// An endpoint nothing listens on does not fail or hold up the run, and the person is told how
/// many spans were lost and why (the SDK drops a failed batch without a word).
#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_endpoint_is_a_warning_with_the_lost_spans() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let endpoint = format!("http://{}", closed.local_addr().expect("its address"));
    drop(closed);
    let output = run(&endpoint, &manifest(false), dir.path()).await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{said}");
    let warning = said
        .lines()
        .find(|line| line.contains("span(s) were not exported to the OTLP endpoint"))
        .unwrap_or_else(|| panic!("no warning about the lost spans:\n{said}"));
    let (before, _) = warning
        .split_once(" span(s)")
        .expect("the warning counts spans");
    let digits: String = before
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let lost: u64 = digits.parse().unwrap_or(0);
    assert!(lost > 0, "{warning}");
}
