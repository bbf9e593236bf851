//! `herd-runner run` against the server on both providers: what the runner sends is accepted,
//! and what the server answers is read.

use std::sync::atomic::{AtomicUsize, Ordering};

use libtest_mimic::{Failed, Trial};
use serde_json::{Value, json};
use wiremock::{Request, Respond, ResponseTemplate};

use crate::harness::{
    Provider, RunOutput, Server, block_on, proxy, relay, run_agent, wire_agent, with_server,
};

/// The tests of this module, each once per provider.
pub fn tests() -> Vec<Trial> {
    let tests: [(&str, Test); 3] = [
        (
            "a_streamed_answer_carries_usage",
            a_streamed_answer_carries_usage,
        ),
        (
            "calls_sharing_an_id_reach_the_server_paired",
            calls_sharing_an_id_reach_the_server_paired,
        ),
        (
            "a_context_overflow_is_reported_clearly",
            a_context_overflow_is_reported_clearly,
        ),
    ];
    Provider::ALL
        .into_iter()
        .flat_map(|provider| {
            tests.map(|(name, test)| {
                let name = format!("wire::{}::{name}", provider.name());
                Trial::test(name.clone(), move || {
                    with_server(&name, |server| test(server, provider))
                })
            })
        })
        .collect()
}

type Test = fn(&Server, Provider) -> Result<(), Failed>;

fn check(condition: bool, what: &str, output: &RunOutput) -> Result<(), Failed> {
    if condition {
        Ok(())
    } else {
        Err(format!(
            "{what}\nexit code: {:?}\nstdout:\n{}\nstderr:\n{}",
            output.code, output.stdout, output.stderr
        )
        .into())
    }
}

fn a_streamed_answer_carries_usage(server: &Server, provider: Provider) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let agent = wire_agent(provider, &provider.base_url(server), 12);
    let output = run_agent(&agent, dir.path(), &["Reply with one word: hello."])?;
    let result = output.result()?;
    let reason = result["stopReason"].as_str().unwrap_or_default();
    // The 135M model may use up its few tokens: a length stop is an answer too.
    check(
        reason == "completed" || reason == "modelLengthLimit",
        "the run answers",
        &output,
    )?;
    check(
        !result["answer"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .is_empty(),
        "the answer has text",
        &output,
    )?;
    let streamed = output
        .json_lines()
        .iter()
        .filter(|event| event["event"] == "text")
        .count();
    check(streamed >= 1, "the answer arrives as text deltas", &output)?;
    let usage = &result["usage"];
    check(
        usage["inputTokens"].as_u64().unwrap_or(0) > 50,
        "the server's prompt token count reaches the report",
        &output,
    )?;
    check(
        usage["outputTokens"].as_u64().unwrap_or(0) >= 1,
        "the server's output token count reaches the report",
        &output,
    )?;
    check(
        usage["modelCalls"].as_u64() == Some(1),
        "one model call",
        &output,
    )
}

fn a_context_overflow_is_reported_clearly(
    server: &Server,
    provider: Provider,
) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let agent = wire_agent(provider, &provider.base_url(server), 8);
    let task = "Summarize: ".to_owned() + &"lorem ipsum dolor sit amet ".repeat(500);
    let tokens = server.post("/tokenize", &json!({"content": task}))?;
    let count = tokens["tokens"].as_array().map_or(0, Vec::len);
    if count <= 4096 {
        return Err(format!("the task must not fit a 4,096-token context: {count} tokens").into());
    }
    let output = run_agent(&agent, dir.path(), &[&task])?;
    check(output.code == Some(1), "the run fails", &output)?;
    let result = output.result()?;
    check(
        result["stopReason"] == "modelError",
        "the stop reason is ModelError",
        &output,
    )?;
    let error = result["error"].as_str().unwrap_or_default();
    check(
        error.contains("does not fit the model's context window")
            && error.contains("exceeds the available context size"),
        "the error says the conversation does not fit, quoting the server",
        &output,
    )
}

/// Answers the first model request with `first` (a misbehaving model's answer) and relays every
/// later one to the real server.
struct MisbehavingFirst {
    first: ResponseTemplate,
    server_root: String,
    requests: AtomicUsize,
}

impl Respond for MisbehavingFirst {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        if self.requests.fetch_add(1, Ordering::SeqCst) == 0 {
            self.first.clone()
        } else {
            relay(&self.server_root, request)
        }
    }
}

/// The two files the calls present, one each.
const FILES: [&str; 2] = ["one.txt", "two.txt"];

fn present(file: &str) -> Value {
    json!({"filepaths": [format!("/mnt/user-data/outputs/{file}")]})
}

/// One answer calling `present_files` twice, both calls with the same id, as `provider` streams
/// it.
fn twin_calls(provider: Provider) -> String {
    let events: Vec<Value> = match provider {
        Provider::OpenAi => {
            let call = |index: usize| {
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index,
                    "id": "call_same", "type": "function", "function": {"name": "present_files",
                    "arguments": present(FILES[index]).to_string()}}]}}]})
            };
            vec![
                call(0),
                call(1),
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            ]
        }
        Provider::Anthropic => {
            let mut events = vec![json!({"type": "message_start", "message": {"id": "msg_1",
                "usage": {"input_tokens": 10, "output_tokens": 1}}})];
            for (index, file) in FILES.iter().enumerate() {
                events.extend([
                    json!({"type": "content_block_start", "index": index, "content_block":
                        {"type": "tool_use", "id": "toolu_same", "name": "present_files", "input": {}}}),
                    json!({"type": "content_block_delta", "index": index, "delta":
                        {"type": "input_json_delta", "partial_json": present(file).to_string()}}),
                    json!({"type": "content_block_stop", "index": index}),
                ]);
            }
            events.extend([
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                    "usage": {"output_tokens": 20}}),
                json!({"type": "message_stop"}),
            ]);
            events
        }
    };
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    if provider == Provider::OpenAi {
        body.push_str("data: [DONE]\n\n");
    }
    body
}

/// (call id, the file its arguments name, the text of its result) for each result of a request
/// body, in the provider's own format.
fn paired_results(provider: Provider, body: &Value) -> Vec<(String, String, String)> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for message in &messages {
        match provider {
            Provider::OpenAi => {
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let arguments = call["function"]["arguments"].as_str().unwrap_or_default();
                    calls.push((call["id"].clone(), arguments.to_owned()));
                }
                if message["role"] == "tool" {
                    let text = message["content"].as_str().unwrap_or_default();
                    results.push((message["tool_call_id"].clone(), text.to_owned()));
                }
            }
            Provider::Anthropic => {
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_use" {
                        calls.push((block["id"].clone(), block["input"].to_string()));
                    }
                    if block["type"] == "tool_result" {
                        let text = block["content"].as_str().unwrap_or_default();
                        results.push((block["tool_use_id"].clone(), text.to_owned()));
                    }
                }
            }
        }
    }
    results
        .into_iter()
        .map(|(id, text)| {
            let named: Vec<&str> = calls
                .iter()
                .filter(|(call_id, _)| *call_id == id)
                .flat_map(|(_, arguments)| FILES.iter().copied().filter(|f| arguments.contains(f)))
                .collect();
            (
                id.as_str().unwrap_or_default().to_owned(),
                named.join("+"),
                text,
            )
        })
        .collect()
}

fn calls_sharing_an_id_reach_the_server_paired(
    server: &Server,
    provider: Provider,
) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let outputs = dir.path().join("work/user-data/outputs");
    std::fs::create_dir_all(&outputs)?;
    for file in FILES {
        std::fs::write(outputs.join(file), file)?;
    }
    let root = server.anthropic_base();
    let misbehaving = MisbehavingFirst {
        first: ResponseTemplate::new(200).set_body_raw(twin_calls(provider), "text/event-stream"),
        server_root: root,
        requests: AtomicUsize::new(0),
    };
    let (proxy, base) = proxy(provider, misbehaving)?;
    let output = run_agent(
        &wire_agent(provider, &base, 12),
        dir.path(),
        &["Present both files."],
    )?;
    let result = output.result()?;
    let reason = result["stopReason"].as_str().unwrap_or_default();
    check(
        reason == "completed" || reason == "modelLengthLimit",
        "the server accepts the thread and answers",
        &output,
    )?;
    let requests = block_on(async { Ok(proxy.received_requests().await.unwrap_or_default()) })?;
    let last = requests.last().ok_or("no request reached the proxy")?;
    let body: Value = serde_json::from_slice(&last.body)?;
    let pairs = paired_results(provider, &body);
    let described = format!("{pairs:#?}");
    check(
        pairs.len() == 2,
        &format!("two results: {described}"),
        &output,
    )?;
    check(
        pairs[0].0 != pairs[1].0,
        &format!("each call has its own id: {described}"),
        &output,
    )?;
    for (id, file, text) in &pairs {
        check(
            FILES.contains(&file.as_str()) && text.contains(file.as_str()),
            &format!("the result for {id} is the one of its own call: {described}"),
            &output,
        )?;
    }
    Ok(())
}
