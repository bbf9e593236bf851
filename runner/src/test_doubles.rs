//! Test doubles shared by the unit tests: a queued model, a recording control plane, tools
//! with fixed answers and a recording observer (the executor's is `herd_sandbox::testing`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use herd_crds::report::{Clarification, ClarificationType, StopReason, Usage};
use herd_crds::wire::{
    ChildOutcome, ChildRequest, ChildStatus, MemoryDocument, MemoryOperation, ProgressReport,
    ResultReport,
};
use herd_sandbox::SandboxResponse;
use herd_sandbox::testing::FakeExecutor;

use crate::agent::{
    Agent, AgentEvent, Limits, Middleware, NoObserver, Observer, RunEnv, ToolRegistry,
};
use crate::control::checkpoint::Checkpoint;
use crate::control::{AskOutcome, Budget, ControlError, ControlPlane};
use crate::model::{CallContext, CallOptions, ChatModel, DeltaSink, ModelError, ModelRequest};
use crate::thread::{AssistantMessage, ThreadState, ToolCall};
use crate::tools::{Tool, ToolContext, ToolOutput};

/// Tools of the file, bash and web groups: the prompt of an Agent without those groups names
/// none of them.
pub const GROUP_TOOLS: [&str; 5] = [
    "read_file",
    "write_file",
    "str_replace",
    "bash",
    "web_fetch",
];

/// The checkpoint of a run that asked "Which market?" (a question for missing information,
/// offering `options`) with its thread at `state`.
pub fn market_question(options: &[&str], state: ThreadState) -> Checkpoint {
    Checkpoint::question(
        Clarification {
            id: "q-call_1_0".into(),
            question: "Which market?".into(),
            kind: ClarificationType::MissingInfo,
            context: None,
            options: options.iter().map(|&option| option.to_owned()).collect(),
            asked_at: None,
        },
        state,
    )
}

/// Answers model calls from a queue and records every request.
#[derive(Default)]
pub struct QueuedModel {
    pub answers: Mutex<VecDeque<Result<AssistantMessage, ModelError>>>,
    pub requests: Mutex<Vec<ModelRequest>>,
}

impl QueuedModel {
    pub fn new(answers: Vec<AssistantMessage>) -> Arc<Self> {
        Arc::new(QueuedModel {
            answers: Mutex::new(answers.into_iter().map(Ok).collect()),
            requests: Mutex::new(Vec::new()),
        })
    }

    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait]
impl ChatModel for QueuedModel {
    fn name(&self) -> &str {
        "queued"
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _on_delta: DeltaSink<'_>,
    ) -> Result<AssistantMessage, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        self.answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| Ok(text("(queue empty)")))
    }
}

/// A final answer.
pub fn text(content: &str) -> AssistantMessage {
    AssistantMessage {
        content: content.into(),
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        }),
        ..AssistantMessage::default()
    }
}

/// A turn calling tools: `(name, arguments)`.
pub fn calls(calls: &[(&str, serde_json::Value)]) -> AssistantMessage {
    AssistantMessage {
        tool_calls: calls
            .iter()
            .enumerate()
            .map(|(index, (name, arguments))| ToolCall {
                id: format!("call_{index}_{name}"),
                name: (*name).into(),
                arguments: arguments.to_string(),
            })
            .collect(),
        ..AssistantMessage::default()
    }
}

/// Records what the run reported; answers questions with `answer` (or suspends).
#[derive(Default)]
pub struct RecordingControl {
    pub answer: Option<String>,
    /// Refuse questions with this reason (as a subagent's control plane does).
    pub refuse_questions: Option<String>,
    /// End the run at a question so (as the run API's control plane does when the checkpoint
    /// does not fit).
    pub end_questions: Option<(StopReason, String)>,
    pub questions: Mutex<Vec<Clarification>>,
    /// Every progress report, in order.
    pub progress: Mutex<Vec<ProgressReport>>,
    pub children: Mutex<Vec<(ChildRequest, Budget)>>,
    pub results: Mutex<Vec<ResultReport>>,
    /// The memory document `read_memory` returns.
    pub memory: Mutex<MemoryDocument>,
    /// Every `update_memory` call's operations, in order.
    pub memory_updates: Mutex<Vec<Vec<MemoryOperation>>>,
    /// Verdicts handed out to approval requests, in order (one a request; none left: the run
    /// suspends).
    pub verdicts: Mutex<std::collections::VecDeque<herd_crds::approval::Verdict>>,
    /// Every approval request asked, each turn's together.
    pub approvals: Mutex<Vec<Vec<herd_crds::approval::ApprovalRequest>>>,
}

#[async_trait]
impl ControlPlane for RecordingControl {
    async fn report_progress(&self, report: ProgressReport) -> Result<(), ControlError> {
        self.progress.lock().unwrap().push(report);
        Ok(())
    }

    async fn run_child(
        &self,
        request: ChildRequest,
        parent: Budget,
    ) -> Result<ChildOutcome, ControlError> {
        let name = format!("child-{}", request.tool_call_id);
        self.children.lock().unwrap().push((request, parent));
        Ok(ChildOutcome {
            name,
            status: Some(ChildStatus::Completed),
            stop_reason: None,
            result: "child done".into(),
            error: None,
            usage: Usage::default(),
            artifacts: vec![],
        })
    }

    async fn ask(
        &self,
        question: &Clarification,
        _checkpoint: &ThreadState,
    ) -> Result<AskOutcome, ControlError> {
        self.questions.lock().unwrap().push(question.clone());
        if let Some(why) = &self.refuse_questions {
            return Err(ControlError::Refused(why.clone()));
        }
        if let Some((reason, error)) = &self.end_questions {
            return Ok(AskOutcome::Ended {
                reason: *reason,
                error: error.clone(),
            });
        }
        Ok(match &self.answer {
            Some(answer) => AskOutcome::Answered(answer.clone()),
            None => AskOutcome::Suspended,
        })
    }

    async fn ask_approval(
        &self,
        requests: &[herd_crds::approval::ApprovalRequest],
        _checkpoint: &ThreadState,
    ) -> Result<crate::control::ApprovalOutcome, ControlError> {
        self.approvals.lock().unwrap().push(requests.to_vec());
        let mut verdicts = self.verdicts.lock().unwrap();
        if verdicts.len() < requests.len() {
            return Ok(crate::control::ApprovalOutcome::Suspended);
        }
        Ok(crate::control::ApprovalOutcome::Decided(
            requests
                .iter()
                .filter_map(|r| Some((r.id.clone(), verdicts.pop_front()?)))
                .collect(),
        ))
    }

    async fn post_result(&self, result: ResultReport) -> Result<(), ControlError> {
        self.results.lock().unwrap().push(result);
        Ok(())
    }

    async fn read_memory(&self) -> Result<MemoryDocument, ControlError> {
        Ok(self.memory.lock().unwrap().clone())
    }

    async fn update_memory(&self, operations: Vec<MemoryOperation>) -> Result<(), ControlError> {
        self.memory_updates.lock().unwrap().push(operations);
        Ok(())
    }
}

/// A tool that always answers the same and counts its calls.
pub struct FixedTool {
    pub name: String,
    pub output: ToolOutput,
    pub calls: AtomicUsize,
}

impl FixedTool {
    pub fn new(name: &str, output: ToolOutput) -> Self {
        FixedTool {
            name: name.into(),
            output,
            calls: AtomicUsize::new(0),
        }
    }

    pub fn ok(name: &str, content: &str) -> Self {
        Self::new(name, ToolOutput::ok(content))
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for FixedTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn group(&self) -> Option<crate::tools::ToolGroup> {
        None
    }
    fn schema(&self) -> crate::model::ToolSchema {
        crate::model::ToolSchema {
            name: self.name.clone(),
            description: "test".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    async fn call(&self, _arguments: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.output.clone()
    }
}

/// Echoes its call: the `text` argument, or the whole arguments when there is none.
pub struct EchoTool;

#[async_trait]
impl Tool for EchoTool {
    fn name(&self) -> &str {
        "echo"
    }
    fn group(&self) -> Option<crate::tools::ToolGroup> {
        None
    }
    fn schema(&self) -> crate::model::ToolSchema {
        crate::model::ToolSchema {
            name: "echo".into(),
            description: "Prints text.".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    async fn call(&self, arguments: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        ToolOutput::ok(
            match arguments.get("text").and_then(serde_json::Value::as_str) {
                Some(text) => text.to_owned(),
                None => arguments.to_string(),
            },
        )
    }
}

/// An observer that keeps every event.
#[derive(Default)]
pub struct RecordingObserver(Mutex<Vec<AgentEvent>>);

impl Observer for RecordingObserver {
    fn on_event(&self, event: AgentEvent) {
        if let Ok(mut events) = self.0.lock() {
            events.push(event);
        }
    }
}

impl RecordingObserver {
    /// Every event so far, in order.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.0
            .lock()
            .map(|events| events.clone())
            .unwrap_or_default()
    }

    /// The warnings' messages, in order.
    pub fn warnings(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|events| {
                events
                    .iter()
                    .filter_map(|event| match event {
                        AgentEvent::Warning { message, .. } => Some(message.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// An agent with no tools and only `middleware`, reporting to a recording control plane.
pub fn middleware_agent(
    model: Arc<dyn ChatModel>,
    middleware: Arc<dyn Middleware>,
) -> (Agent, RunEnv) {
    agent(
        model,
        Vec::new(),
        vec![middleware],
        Arc::new(RecordingControl::default()),
    )
}

/// An agent over `model` with `tools` and `chain`, plus an environment around `control`.
pub fn agent(
    model: Arc<dyn ChatModel>,
    tools: Vec<Arc<dyn Tool>>,
    chain: Vec<Arc<dyn Middleware>>,
    control: Arc<dyn ControlPlane>,
) -> (Agent, RunEnv) {
    let agent = Agent {
        name: "lead".into(),
        system_prompt: "You are a test agent.".into(),
        model,
        tools: ToolRegistry::new(tools, None, &[]),
        chain,
        options: CallOptions::default(),
        context: CallContext::default(),
        limits: Limits::default(),
        observer: Arc::new(NoObserver),
        telemetry: crate::telemetry::Telemetry::default(),
    };
    let env = RunEnv {
        executor: Arc::new(FakeExecutor::answering(SandboxResponse::FileInfo {
            exists: true,
            size: 1,
            sha256: None,
        })),
        control,
    };
    (agent, env)
}
