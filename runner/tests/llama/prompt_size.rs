//! The size of the first request as the server counts it (`/apply-template`, then
//! `/tokenize`): every feature on a 4k-token model must leave half the window to the
//! conversation and the answer, and the default agent stays within the 3,000 tokens of docs/runner.md.
//!
//! A mock server stands in front of the model: it keeps each request and answers at once, so
//! nothing is generated; only the counting goes to llama.cpp.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use libtest_mimic::{Failed, Trial};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::harness::{Server, block_on, herd_runner, with_server};

/// The tests of this module.
pub fn tests() -> Vec<Trial> {
    vec![
        Trial::test("prompt_size::all_features_fits_half_a_4k_window", || {
            with_server(
                "prompt_size::all_features",
                all_features_fits_half_a_4k_window,
            )
        }),
        Trial::test("prompt_size::the_default_agent_stays_under_3000", || {
            with_server(
                "prompt_size::default_agent",
                the_default_agent_stays_under_3000,
            )
        }),
    ]
}

/// Keeps every request body and answers with a short streamed reply.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Value>>>);

impl Respond for Recorder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        if let Ok(body) = serde_json::from_slice(&request.body) {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(body);
        }
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}]});
        let stream = format!("data: {chunk}\n\ndata: [DONE]\n\n");
        ResponseTemplate::new(200).set_body_raw(stream.into_bytes(), "text/event-stream")
    }
}

/// Runs `herd-runner run` on `files` against a recording mock and returns the first request.
fn first_request(dir: &Path, files: &[&Path]) -> Result<Value, Failed> {
    block_on(async {
        let mock = MockServer::start().await;
        let recorder = Recorder::default();
        Mock::given(method("POST"))
            .respond_with(recorder.clone())
            .mount(&mock)
            .await;
        let base = format!("{}/v1", mock.uri());
        let workdir = dir.join("work");
        let mut args = vec!["run", "--json", "--non-interactive", "--base-url", &base];
        let workdir = workdir.to_str().ok_or("the temp dir is not UTF-8")?;
        args.extend(["--workdir", workdir]);
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        for name in &names {
            args.extend(["-f", name.as_str()]);
        }
        args.push("Compare two command-line tools for JSON processing.");
        // The binary is synchronous; the mock keeps serving on this runtime meanwhile.
        let dir = dir.to_owned();
        let owned: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let output = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = owned.iter().map(String::as_str).collect();
            herd_runner(&args, &dir)
        })
        .await
        .map_err(|e| format!("herd-runner did not finish: {e}"))??;
        let requests = recorder
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        requests
            .into_iter()
            .next()
            .ok_or_else(|| format!("no request reached the model: {output:#?}").into())
    })
}

/// The server's token count of `request` as its chat template renders it.
fn server_tokens(server: &Server, request: &Value) -> Result<usize, Failed> {
    let mut body = json!({"messages": request["messages"]});
    if let Some(tools) = request.get("tools") {
        body["tools"] = tools.clone();
    }
    let rendered = server.post("/apply-template", &body)?;
    let prompt = rendered["prompt"]
        .as_str()
        .ok_or_else(|| format!("/apply-template answered {rendered}"))?;
    let tokens = server.post("/tokenize", &json!({"content": prompt}))?;
    tokens["tokens"]
        .as_array()
        .map(Vec::len)
        .ok_or_else(|| format!("/tokenize answered {tokens}").into())
}

fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn all_features_fits_half_a_4k_window(server: &Server) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let memory = dir.path().join("memory");
    std::fs::create_dir_all(&memory)?;
    std::fs::copy(
        repo_root().join("examples/local/all-features.memory.json"),
        memory.join("all-features.json"),
    )?;
    let fixture = repo_root().join("examples/local/all-features.yaml");
    let request = first_request(dir.path(), &[&fixture])?;
    let tokens = server_tokens(server, &request)?;
    eprintln!("all-features (contextWindow 4096): {tokens} tokens counted by llama.cpp");
    if tokens > 2048 {
        return Err(format!("the first request takes {tokens} of 4096 tokens (> 2048)").into());
    }
    if request["max_tokens"] != json!(1024) {
        return Err(format!(
            "max_tokens {} (want a quarter of 4096)",
            request["max_tokens"]
        )
        .into());
    }
    let sent = request.to_string();
    for part in [
        "<memory>",
        "<soul>",
        "deep-research",
        "source-check",
        "write_todos",
        "\"task\"",
        "web_search",
    ] {
        if !sent.contains(part) {
            return Err(format!("the request lost {part}: {sent}").into());
        }
    }
    Ok(())
}

fn the_default_agent_stays_under_3000(server: &Server) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let agent = dir.path().join("agent.yaml");
    std::fs::write(
        &agent,
        "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata: {name: default}\nspec:\n  model: {provider: openai, name: smollm2}\n",
    )?;
    let request = first_request(dir.path(), &[&agent])?;
    let tokens = server_tokens(server, &request)?;
    eprintln!("default agent: {tokens} tokens counted by llama.cpp");
    if tokens > 3000 {
        return Err(format!("the default agent's first request takes {tokens} tokens").into());
    }
    Ok(())
}
