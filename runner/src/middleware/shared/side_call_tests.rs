//! The side calls of a whole run over HTTP: the standard chain's Summarization, Title and
//! Memory against a fake OpenAI-compatible server, which records each request's `max_tokens`,
//! and against one whose streams never end.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use herd_crds::report::StopReason;
use herd_sandbox::SandboxResponse;
use herd_sandbox::testing::FakeExecutor;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::side_call::{DEFAULT_MAX_TOKENS, SideCall, TITLE_MAX_TOKENS};
use crate::agent::{AgentEvent, Middleware, RunResources, SideCallKind};
use crate::control::ControlPlane;
use crate::memory::extract::MEMORY_SYSTEM_PROMPT;
use crate::middleware::chain::{ChainRole, StandardChain};
use crate::middleware::summarization::SUMMARY_SYSTEM_PROMPT;
use crate::model::resolve::{ConfiguredModel, Provider, build_model};
use crate::model::{AgentRole, CallContext, ChatModel, ModelErrorKind};
use crate::plan::{RunPlan, test_plan};
use crate::test_doubles::{self, QueuedModel, RecordingControl, RecordingObserver, text};
use crate::thread::{Message, MessageKind, ThreadState};

const LEAD: ChainRole = ChainRole {
    role: AgentRole::Lead,
    name: "lead",
    delegates: false,
    prompt_tokens: 0,
};

/// What a request is for, told by its prompt.
fn kind_of(body: &Value) -> &'static str {
    let messages = body["messages"].to_string();
    if messages.contains(&json_text(&SUMMARY_SYSTEM_PROMPT[..40])) {
        "summary"
    } else if messages.contains(&json_text(&MEMORY_SYSTEM_PROMPT[..60])) {
        "memory"
    } else if messages.contains("Generate a concise title") {
        "title"
    } else {
        "main"
    }
}

/// `text` as it appears inside a JSON string.
fn json_text(text: &str) -> String {
    let quoted = Value::String(text.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

/// A request's kind (`summary`, `title`, `memory`, `main`) and its `max_tokens`.
type Seen = (&'static str, Option<u64>);

/// Answers each kind of call in kind, and keeps what it saw of every request.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

impl Recorder {
    fn seen(&self) -> Vec<Seen> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Respond for Recorder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let kind = kind_of(&body);
        let max_tokens = body
            .get("max_tokens")
            .or_else(|| body.get("max_completion_tokens"))
            .and_then(Value::as_u64);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((kind, max_tokens));
        let content = match kind {
            "summary" => "The user asked for notes; forty were written.",
            "memory" => "{\"operations\": []}",
            "title" => "Forty Notes",
            _ => "Done.",
        };
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": "stop"}]});
        let stream = format!("data: {chunk}\n\ndata: [DONE]\n\n");
        ResponseTemplate::new(200).set_body_raw(stream.into_bytes(), "text/event-stream")
    }
}

fn openai_at(base_url: String) -> Arc<dyn ChatModel> {
    let spec = ConfiguredModel {
        base_url: Some(base_url),
        ..ConfiguredModel::new(Provider::Openai, "local-model")
    };
    build_model(&spec).unwrap()
}

/// The plan of a lead with memory and summarization on, on a model with `context_window`.
fn side_plan(context_window: Option<u32>) -> RunPlan {
    let mut plan = test_plan();
    plan.model.context_window = context_window;
    plan.memory.enabled = true;
    plan.summarization.enabled = true;
    plan.summarization.trigger_tokens = 1000;
    plan.summarization.keep_messages = 4;
    plan
}

/// The standard chain's side-call middlewares for `plan`, over `side_model`.
fn side_chain(
    plan: RunPlan,
    side_model: Arc<dyn ChatModel>,
    observer: Arc<RecordingObserver>,
    control: &Arc<dyn ControlPlane>,
) -> Vec<Arc<dyn Middleware>> {
    let chain = StandardChain::new(
        Arc::new(plan),
        RunResources {
            model: side_model,
            executor: Arc::new(FakeExecutor::answering(SandboxResponse::Done {
                path: None,
            })),
            skills: Vec::new(),
            observer,
        },
    );
    let chain: Vec<Arc<dyn Middleware>> = chain
        .build(LEAD, control)
        .into_iter()
        .filter(|middleware| ["Summarization", "Title", "Memory"].contains(&middleware.name()))
        .collect();
    assert_eq!(chain.len(), 3);
    chain
}

/// The first exchange of a long task: one user message and many long notes, well past a
/// 1000-token trigger, so one run makes all three side calls.
fn long_first_exchange() -> ThreadState {
    let mut state = ThreadState::new("Write forty notes about Rust.");
    for i in 0..40 {
        state.messages.push(Message::Assistant(text(&format!(
            "Note {i}: {}",
            "ownership and borrowing keep memory safe ".repeat(8)
        ))));
    }
    state
}

async fn run_with(
    plan: RunPlan,
    side_model: Arc<dyn ChatModel>,
    main: Arc<dyn ChatModel>,
) -> (ThreadState, Arc<RecordingObserver>, StopReason) {
    let observer = Arc::new(RecordingObserver::default());
    let control: Arc<dyn ControlPlane> = Arc::new(RecordingControl::default());
    let chain = side_chain(plan, side_model, observer.clone(), &control);
    let (agent, env) = test_doubles::agent(main, vec![], chain, control);
    let mut state = long_first_exchange();
    let outcome = agent.run(&mut state, &env).await.unwrap();
    (state, observer, outcome.stop_reason)
}

fn side_calls(observer: &RecordingObserver) -> Vec<SideCallKind> {
    observer
        .events()
        .into_iter()
        .filter_map(|event| match event {
            AgentEvent::SideCall { call, .. } => Some(call),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn every_side_call_carries_its_own_cap() {
    let server = MockServer::start().await;
    let recorder = Recorder::default();
    Mock::given(method("POST"))
        .respond_with(recorder.clone())
        .mount(&server)
        .await;
    let model = openai_at(format!("{}/v1", server.uri()));

    // A 4k window: the title 32, memory and summary an eighth of the window.
    let (state, observer, stop) =
        run_with(side_plan(Some(4096)), model.clone(), model.clone()).await;
    assert_eq!(stop, StopReason::Completed);
    let side: Vec<_> = recorder
        .seen()
        .into_iter()
        .filter(|(kind, _)| *kind != "main")
        .collect();
    assert_eq!(
        side,
        [
            ("summary", Some(512)),
            ("title", Some(u64::from(TITLE_MAX_TOKENS))),
            ("memory", Some(512)),
        ]
    );
    assert_eq!(
        side_calls(&observer),
        [
            SideCallKind::Summary,
            SideCallKind::Title,
            SideCallKind::Memory
        ]
    );
    assert!(observer.warnings().is_empty(), "{:?}", observer.warnings());
    assert_eq!(state.title.as_deref(), Some("Forty Notes"));
    assert!(state.summary.is_some());

    // No window: the fixed default; the Agent's settings win over both.
    let recorder_before = recorder.seen().len();
    run_with(side_plan(None), model.clone(), model.clone()).await;
    let mut overridden = side_plan(Some(4096));
    overridden.memory.max_tokens = Some(300);
    overridden.summarization.max_tokens = Some(200);
    run_with(overridden, model.clone(), model).await;
    let caps: Vec<_> = recorder.seen()[recorder_before..]
        .iter()
        .filter(|(kind, _)| *kind != "main")
        .copied()
        .collect();
    let default = Some(u64::from(DEFAULT_MAX_TOKENS));
    assert_eq!(
        caps,
        [
            ("summary", default),
            ("title", Some(32)),
            ("memory", default),
            ("summary", Some(200)),
            ("title", Some(32)),
            ("memory", Some(300)),
        ]
    );
}

/// A server that answers every request with the headers and one chunk of a stream it never
/// ends; counts the requests and the connections closed by the client.
async fn never_ending_server() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (seen, dropped) = (requests.clone(), closed.clone());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (seen, dropped) = (seen.clone(), dropped.clone());
            tokio::spawn(async move {
                let mut buffer = vec![0; 64 * 1024];
                let mut read = Vec::new();
                // The request head is enough: the body is never looked at.
                while !read.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read.extend_from_slice(&buffer[..n]),
                    }
                }
                seen.fetch_add(1, Ordering::SeqCst);
                let chunk = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Thinking\"}}]}\n\n";
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                     transfer-encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n",
                    chunk.len()
                );
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                // Holds the stream open until the client gives up.
                loop {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                dropped.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (format!("http://{address}/v1"), requests, closed)
}

#[tokio::test]
async fn a_stream_that_never_ends_times_out_and_is_dropped() {
    let (base, requests, closed) = never_ending_server().await;
    let observer = Arc::new(RecordingObserver::default());
    let call = SideCall::new(SideCallKind::Memory, "lead", observer)
        .with_timeout(Duration::from_millis(300));
    let error = call
        .send(
            openai_at(base).as_ref(),
            "",
            MessageKind::MemoryUpdate,
            "remember".into(),
            CallContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Timeout);
    assert_eq!(error.message, "no answer within 0.3 s");
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    for _ in 0..100 {
        if closed.load(Ordering::SeqCst) == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the timed-out call kept its connection open");
}

#[tokio::test(start_paused = true)]
async fn side_calls_that_never_end_time_out_and_the_run_completes() {
    let (base, requests, _) = never_ending_server().await;
    let main = QueuedModel::new(vec![text("Here are the notes.")]);
    let (state, observer, stop) = run_with(side_plan(Some(4096)), openai_at(base), main).await;
    assert_eq!(stop, StopReason::Completed);
    assert_eq!(
        requests.load(Ordering::SeqCst),
        3,
        "summary, title and memory"
    );
    assert_eq!(
        side_calls(&observer),
        [
            SideCallKind::Summary,
            SideCallKind::Title,
            SideCallKind::Memory
        ]
    );
    assert_eq!(
        observer.warnings(),
        [
            "summarizing failed (no answer within 120 s); the conversation is kept as it was",
            "the title call failed (no answer within 30 s); the title is the user's text",
            "memory not updated: the memory call failed: no answer within 120 s",
        ]
    );
    // The failed summary kept the thread whole: the user, the forty notes, the answer.
    assert_eq!(state.summary, None);
    assert_eq!(state.messages.len(), 42);
    assert_eq!(
        state.title.as_deref(),
        Some("Write forty notes about Rust.")
    );
    assert_eq!(
        state.last_assistant().map(|a| a.content.as_str()),
        Some("Here are the notes.")
    );
}
