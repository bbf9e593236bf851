//! The `chat` spans of a run against the real server carry the tokens the server reported and
//! the model it named: `herd-runner run` exports to a real OTLP/HTTP receiver
//! (`runner/tests/otlp`) while a relay in front of the server keeps each answer it passed on.

use std::sync::{Arc, Mutex};

use libtest_mimic::{Failed, Trial};
use serde_json::Value;
use wiremock::{Request, Respond, ResponseTemplate};

use crate::harness::{Provider, Server, forward, herd_runner_with_env, proxy, wire_agent};
use crate::otlp::{ReceivedSpan, Receiver};

/// The test, once per provider.
pub fn tests() -> Vec<Trial> {
    Provider::ALL
        .into_iter()
        .map(|provider| {
            let name = format!(
                "traces::{}::chat_spans_carry_the_servers_usage",
                provider.name()
            );
            Trial::test(name.clone(), move || {
                crate::harness::with_server(&name, |server| {
                    chat_spans_carry_the_servers_usage(server, provider)
                })
            })
        })
        .collect()
}

/// Relays every request to the server and keeps the bytes of each answer.
struct Keeping {
    server_root: String,
    answers: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Respond for Keeping {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        match forward(&self.server_root, request) {
            Ok((status, content_type, bytes)) => {
                if let Ok(mut answers) = self.answers.lock() {
                    answers.push(bytes.clone());
                }
                ResponseTemplate::new(status).set_body_raw(bytes, &content_type)
            }
            Err(failed) => ResponseTemplate::new(502).set_body_string(failed),
        }
    }
}

/// What one streamed answer reported: input and output tokens, and the model it named.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Reported {
    input: i64,
    output: i64,
    model: String,
}

/// The usage and model an SSE answer of `provider` reported (the last report of each wins).
fn reported(provider: Provider, answer: &[u8]) -> Reported {
    let mut found = Reported::default();
    let text = String::from_utf8_lossy(answer);
    let events = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok());
    let int = |value: &Value| value.as_i64().unwrap_or(0);
    for event in events {
        match provider {
            Provider::OpenAi => {
                if let Some(model) = event["model"].as_str() {
                    found.model = model.to_owned();
                }
                if event["usage"].is_object() {
                    found.input = int(&event["usage"]["prompt_tokens"]);
                    found.output = int(&event["usage"]["completion_tokens"]);
                }
            }
            Provider::Anthropic => {
                let start = &event["message"];
                if let Some(model) = start["model"].as_str() {
                    found.model = model.to_owned();
                }
                let usage = if start.is_object() {
                    &start["usage"]
                } else {
                    &event["usage"]
                };
                if usage.is_object() {
                    let input = int(&usage["input_tokens"])
                        + int(&usage["cache_creation_input_tokens"])
                        + int(&usage["cache_read_input_tokens"]);
                    if usage.get("input_tokens").is_some() {
                        found.input = input;
                    }
                    if usage.get("output_tokens").is_some() {
                        found.output = int(&usage["output_tokens"]);
                    }
                }
            }
        }
    }
    found
}

// Over 80 lines: one run against the real server, then each chat span's usage checked
// against what the server reported for that call, in order.
fn chat_spans_carry_the_servers_usage(server: &Server, provider: Provider) -> Result<(), Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    let receiver = runtime.block_on(Receiver::start(
        "127.0.0.1:0".parse()?,
        &dir.path().join("spans.jsonl"),
    ));
    let answers = Arc::new(Mutex::new(Vec::new()));
    let keeping = Keeping {
        server_root: server.anthropic_base(),
        answers: answers.clone(),
    };
    let (_proxy, base) = proxy(provider, keeping)?;
    let file = dir.path().join("agent.yaml");
    std::fs::write(&file, wire_agent(provider, &base, 12))?;
    let work = dir.path().join("work");
    let output = herd_runner_with_env(
        &[
            "run",
            "--json",
            "--non-interactive",
            "-f",
            file.to_str().ok_or("a UTF-8 path")?,
            "--workdir",
            work.to_str().ok_or("a UTF-8 path")?,
            "Reply with one word: hello.",
        ],
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint().as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    )?;
    // The small model at temperature 0 may still run past the 12-token cap (the system prompt
    // carries today's date, so its words change by the day): a run the limit stopped (exit 4)
    // made its calls all the same, and the calls are what this test is about.
    if !matches!(output.code, Some(0 | 4)) {
        return Err(format!(
            "herd-runner failed ({:?})\nstdout:\n{}\nstderr:\n{}",
            output.code, output.stdout, output.stderr
        )
        .into());
    }
    let mut from_server: Vec<Reported> = answers
        .lock()
        .map_err(|_| "the relay's lock is poisoned")?
        .iter()
        .map(|answer| reported(provider, answer))
        .collect();
    let spans = receiver.spans();
    let chats: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|span| span.name.starts_with("chat "))
        .collect();
    let mut on_spans: Vec<Reported> = chats
        .iter()
        .map(|span| Reported {
            input: span.int("gen_ai.usage.input_tokens").unwrap_or(-1),
            output: span.int("gen_ai.usage.output_tokens").unwrap_or(-1),
            model: span
                .str("gen_ai.response.model")
                .unwrap_or_default()
                .to_owned(),
        })
        .collect();
    from_server.sort();
    on_spans.sort();
    if from_server.is_empty() || on_spans != from_server {
        return Err(format!(
            "the chat spans {on_spans:?} are not what the server reported {from_server:?}"
        )
        .into());
    }
    if on_spans.iter().any(|r| r.input <= 0 || r.model.is_empty()) {
        return Err(format!("a chat span without tokens or model: {on_spans:?}").into());
    }
    Ok(())
}
