//! The side calls (title, memory update) of a run on a 4k-token window against the real
//! server: each request carries its own `max_tokens`, the server keeps to it, and the run
//! finishes. A mock server in front of the model keeps each request and the usage of each
//! answer, and relays everything to llama.cpp.

use std::sync::{Arc, Mutex, PoisonError};

use libtest_mimic::{Failed, Trial};
use serde_json::Value;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::harness::{RunOutput, Server, block_on, forward, run_agent, with_server};

/// The tests of this module.
pub fn tests() -> Vec<Trial> {
    vec![Trial::test(
        "side_calls::a_4k_run_with_title_and_memory_bounds_every_side_call",
        || {
            with_server(
                "side_calls::a_4k_run_with_title_and_memory_bounds_every_side_call",
                a_4k_run_with_title_and_memory_bounds_every_side_call,
            )
        },
    )]
}

/// One relayed call: what it was for, the `max_tokens` it asked for, the tokens the server
/// says it wrote.
#[derive(Clone, Debug)]
struct Call {
    kind: &'static str,
    max_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

/// Keeps a [`Call`] per request and relays it to the server.
#[derive(Clone)]
struct Recorder {
    server_root: String,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Recorder {
    fn calls(&self) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What a request is for, told by its prompt.
fn kind_of(body: &Value) -> &'static str {
    let messages = body["messages"].to_string();
    if messages.contains("Generate a concise title") {
        "title"
    } else if messages.contains("You maintain the long-term memory") {
        "memory"
    } else if messages.contains("You compress the history") {
        "summary"
    } else {
        "main"
    }
}

/// The `completion_tokens` of a streamed Chat Completions answer (its usage chunk).
fn completion_tokens(stream: &[u8]) -> Option<u64> {
    String::from_utf8_lossy(stream)
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find_map(|chunk| chunk["usage"]["completion_tokens"].as_u64())
}

impl Respond for Recorder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let answer = forward(&self.server_root, request);
        let written = match &answer {
            Ok((_, _, bytes)) => completion_tokens(bytes),
            Err(_) => None,
        };
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Call {
                kind: kind_of(&body),
                max_tokens: body["max_tokens"].as_u64(),
                completion_tokens: written,
            });
        match answer {
            Ok((status, content_type, bytes)) => {
                ResponseTemplate::new(status).set_body_raw(bytes, &content_type)
            }
            Err(failed) => ResponseTemplate::new(502).set_body_string(failed),
        }
    }
}

/// A 4k-token Agent with memory on (the title is always on for the lead), greedy sampling and
/// no `maxTokens` of its own: every cap comes from the window.
fn agent(base_url: &str) -> String {
    format!(
        "apiVersion: herd.dev/v1alpha1
kind: Agent
metadata:
  name: sidecalls
spec:
  model:
    provider: openai
    name: smollm2
    baseURL: {base_url}
    temperature: 0
    contextWindow: 4096
    maxRetries: 0
    requestTimeout: 2m
  toolGroups: []
  skills: []
  memory:
    enabled: true
  runDefaults:
    maxModelCalls: 2
    timeout: 5m
"
    )
}

fn check(condition: bool, what: &str, output: &RunOutput, calls: &[Call]) -> Result<(), Failed> {
    if condition {
        return Ok(());
    }
    Err(format!(
        "{what}\ncalls: {calls:#?}\nexit code: {:?}\nstdout:\n{}\nstderr:\n{}",
        output.code, output.stdout, output.stderr
    )
    .into())
}

// Over 80 lines: one 4k-window run against the real server, then each of its side calls'
// bounds checked against the same recorded calls.
fn a_4k_run_with_title_and_memory_bounds_every_side_call(server: &Server) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let root = server.openai_base();
    let root = root.strip_suffix("/v1").unwrap_or(&root).to_owned();
    let (output, calls) = block_on(async {
        let mock = MockServer::start().await;
        let recorder = Recorder {
            server_root: root,
            calls: Arc::default(),
        };
        Mock::given(method("POST"))
            .respond_with(recorder.clone())
            .mount(&mock)
            .await;
        let manifest = agent(&format!("{}/v1", mock.uri()));
        let dir = dir.path().to_owned();
        // The binary is synchronous; the mock keeps serving on this runtime meanwhile.
        let output = tokio::task::spawn_blocking(move || {
            run_agent(&manifest, &dir, &["Name three colours, one word each."])
        })
        .await
        .map_err(|e| format!("herd-runner did not finish: {e}"))??;
        Ok((output, recorder.calls()))
    })?;

    eprintln!("side calls on a 4k window: {calls:?}");
    let result = output.result()?;
    let reason = result["stopReason"].as_str().unwrap_or_default();
    check(
        reason == "completed" || reason == "modelLengthLimit",
        "the run finishes with an answer",
        &output,
        &calls,
    )?;
    let side_events: Vec<String> = output
        .json_lines()
        .iter()
        .filter(|event| event["event"] == "side_call")
        .filter_map(|event| event["call"].as_str().map(str::to_owned))
        .collect();
    check(
        side_events == ["title", "memory"],
        "the title and the memory update are announced as side calls",
        &output,
        &calls,
    )?;
    let kinds: Vec<&str> = calls.iter().map(|call| call.kind).collect();
    check(
        kinds.contains(&"title") && kinds.contains(&"memory"),
        "the title and the memory calls reach the server",
        &output,
        &calls,
    )?;
    for call in &calls {
        let cap = match call.kind {
            "title" => 32,
            "memory" | "summary" => 4096 / 8,
            _ => 4096 / 4,
        };
        check(
            call.max_tokens == Some(cap),
            &format!("the {} call asks for max_tokens {cap}", call.kind),
            &output,
            &calls,
        )?;
        check(
            call.completion_tokens.is_some_and(|written| written <= cap),
            &format!(
                "the server keeps the {} call within {cap} tokens",
                call.kind
            ),
            &output,
            &calls,
        )?;
    }
    // What the run reports adds up the same calls: never more than their caps allow.
    let written = result["usage"]["outputTokens"].as_u64().unwrap_or(u64::MAX);
    let allowed: u64 = calls.iter().filter_map(|call| call.max_tokens).sum();
    check(
        written <= allowed,
        &format!("the run's output tokens ({written}) stay within the calls' caps ({allowed})"),
        &output,
        &calls,
    )
}
