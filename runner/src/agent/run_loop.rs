//! The agent loop (DeerFlow's `create_agent` graph): model, tools, repeat — with the chain's
//! hooks around each step.

use std::sync::Arc;

use futures::StreamExt;
use herd_crds::approval::{ApprovalRequest, Verdict};
use herd_crds::report::{Clarification, StopReason};
use herd_sandbox::ToolExecutor;
use herd_sandbox::truncation::truncate_chars;
use opentelemetry::context::FutureExt as _;

use crate::control::deadline::Deadline;
use crate::control::{ApprovalOutcome, AskOutcome, Budget, ControlError, ControlPlane};
use crate::model::{CallContext, CallOptions, ChatModel, ModelRequest, StreamDelta, record_call};
use crate::telemetry::Telemetry;
use crate::thread::{
    AssistantMessage, ImagePart, Message, MessageKind, ThreadState, ToolCall, ToolStatus,
};
use crate::tools::{ToolContext, ToolOutput};

use super::events::{AgentEvent, Observer};
use super::middleware::{Flow, Middleware, ModelCall, ModelNext, ToolNext, ToolRequest};
use super::tool_calls::{self, Refusals};
use super::tool_registry::ToolRegistry;

/// Limits of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Model calls allowed in the thread (resumed threads count earlier calls).
    pub max_model_calls: u32,
    /// Tool calls of one turn executed at once.
    pub max_parallel_tools: usize,
    /// When the run must stop (`TimedOut`), if it has a deadline; it may move (a question's
    /// wait in a cluster does not count).
    pub deadline: Option<Deadline>,
    /// Tokens the thread may use, when the run has a budget (what a child may claim).
    pub token_budget: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_model_calls: 50,
            max_parallel_tools: 8,
            deadline: None,
            token_budget: None,
        }
    }
}

/// A configured agent: prompt, model, tools and chain, ready to run threads.
pub struct Agent {
    /// Shown in events and logs (`lead`, `general-purpose#call_1`...).
    pub name: String,
    /// Built once per run; identical on every call so provider prefix caches hit.
    pub system_prompt: String,
    pub model: Arc<dyn ChatModel>,
    pub tools: ToolRegistry,
    pub chain: Vec<Arc<dyn Middleware>>,
    pub options: CallOptions,
    pub context: CallContext,
    pub limits: Limits,
    pub observer: Arc<dyn Observer>,
    /// Where the agent's spans go and whether they record content.
    pub telemetry: Telemetry,
}

/// Where a run's side effects go.
#[derive(Clone)]
pub struct RunEnv {
    pub executor: Arc<dyn ToolExecutor>,
    pub control: Arc<dyn ControlPlane>,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    pub stop_reason: StopReason,
    /// The final answer (the last assistant message's text).
    pub answer: String,
    /// What failed, when the run did not produce an answer.
    pub error: Option<String>,
    /// The open question, when `stop_reason` is `InputRequired`.
    pub question: Option<Clarification>,
}

/// The control plane failed in a way the run cannot recover from.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct RunError(#[from] pub ControlError);

/// What the model is told when its question could not be asked.
fn unasked(why: &str) -> String {
    format!(
        "Your question could not be asked ({why}). Go on without an answer: make the most \
         reasonable assumption and say in your answer which one you made."
    )
}

impl Agent {
    /// Runs the thread until a final answer, a question, a limit or an error, inside the
    /// agent's `invoke_agent` span.
    pub async fn run(&self, state: &mut ThreadState, env: &RunEnv) -> Result<RunOutcome, RunError> {
        let span = self.telemetry.agent_span(&self.name, &self.context);
        let result = self
            .run_traced(state, env)
            .with_context(span.context())
            .await;
        match &result {
            Ok(outcome) => span.finish(
                Some(outcome.stop_reason),
                &state.usage,
                outcome.error.as_deref(),
            ),
            Err(error) => span.finish(None, &state.usage, Some(&error.to_string())),
        }
        result
    }

    async fn run_traced(
        &self,
        state: &mut ThreadState,
        env: &RunEnv,
    ) -> Result<RunOutcome, RunError> {
        state.stop_reason = None;
        let mut ended = None;
        for middleware in &self.chain {
            if let Flow::End(reason) = middleware.before_agent(state).await {
                ended = Some(reason);
                break;
            }
        }
        let mut outcome = match ended {
            Some(reason) => self.outcome(state, reason, None),
            None => self.turns(state, env).await?,
        };
        // after_agent hooks (memory, final reports) need to know how the run ended.
        state.stop_reason = Some(outcome.stop_reason);
        for middleware in self.chain.iter().rev() {
            middleware.after_agent(state).await;
        }
        // after_agent hooks may have settled a different reason (e.g. a budget note).
        if let Some(reason) = state.stop_reason {
            outcome.stop_reason = reason;
        }
        state.stop_reason = Some(outcome.stop_reason);
        self.emit(AgentEvent::Stopped {
            agent: self.name.clone(),
            reason: outcome.stop_reason,
        });
        Ok(outcome)
    }

    async fn turns(&self, state: &mut ThreadState, env: &RunEnv) -> Result<RunOutcome, RunError> {
        loop {
            // Calls held for approval are settled before anything else, a resumed thread's too.
            if !state.awaiting_approval.is_empty()
                && let Some(outcome) = self.settle_approvals(state, env).await?
            {
                return Ok(outcome);
            }
            if let Some(reason) = self.stop_before_model(state).await {
                return Ok(self.outcome(state, reason, None));
            }
            let mut message = match self.call_model(state).await {
                Ok(message) => message,
                Err(error) => {
                    return Ok(self.outcome(state, StopReason::ModelError, Some(error.message)));
                }
            };
            // Before anything sees the answer: hooks, results and later requests pair calls
            // by id.
            let refusals = tool_calls::prepare(&mut message, &state.messages, &self.tools);
            state.messages.push(Message::Assistant(message));
            match self.hooks_after_model(state).await {
                Flow::End(reason) => return Ok(self.outcome(state, reason, None)),
                Flow::JumpToModel => continue,
                Flow::Continue => {}
            }
            let calls = state
                .last_assistant()
                .map(|message| message.tool_calls.clone())
                .unwrap_or_default();
            if calls.is_empty() {
                let reason = state.stop_reason.unwrap_or(StopReason::Completed);
                return Ok(self.outcome(state, reason, None));
            }
            if let Some(question) = self.run_tools(state, env, calls, &refusals).await
                && let Some(outcome) = self.ask(state, env, question).await?
            {
                return Ok(outcome);
            }
        }
    }

    /// Why the run stops before its next model call: the call limit, the deadline, or a
    /// before_model hook.
    async fn stop_before_model(&self, state: &mut ThreadState) -> Option<StopReason> {
        if state.usage.model_calls >= self.limits.max_model_calls {
            return Some(StopReason::ModelCallLimit);
        }
        if self
            .limits
            .deadline
            .as_ref()
            .is_some_and(Deadline::has_passed)
        {
            return Some(StopReason::TimedOut);
        }
        self.hooks_before_model(state).await
    }

    /// Asks `question` and adds the answer to the thread. `Some` when the run stops here
    /// instead: suspended until the answer comes, or ended.
    async fn ask(
        &self,
        state: &mut ThreadState,
        env: &RunEnv,
        question: Clarification,
    ) -> Result<Option<RunOutcome>, RunError> {
        self.emit(AgentEvent::Asked {
            agent: self.name.clone(),
            question: question.clone(),
        });
        match env.control.ask(&question, state).await {
            Ok(AskOutcome::Answered(answer)) => {
                self.emit(AgentEvent::Answered {
                    agent: self.name.clone(),
                    id: question.id.clone(),
                    answer: answer.clone(),
                });
                let id = format!("answer-{}", question.id);
                state.messages.push(Message::user(id, answer));
            }
            Ok(AskOutcome::Suspended) => {
                let mut outcome = self.outcome(state, StopReason::InputRequired, None);
                outcome.question = Some(question);
                return Ok(Some(outcome));
            }
            Ok(AskOutcome::Ended { reason, error }) => {
                return Ok(Some(self.outcome(state, reason, Some(error))));
            }
            // Where no one can be asked (a subagent), the model hears so and goes on.
            Err(ControlError::Refused(why)) => {
                self.emit(AgentEvent::Warning {
                    agent: self.name.clone(),
                    message: format!("the question was not asked: {why}"),
                });
                let id = format!("unasked-{}", question.id);
                state.messages.push(Message::user(id, unasked(&why)));
            }
            Err(error) => return Err(error.into()),
        }
        Ok(None)
    }

    /// Asks for the decisions on the calls held for approval (those without one yet),
    /// records them, and sends the held calls through the chain again, which runs or denies
    /// each; their results join the turn's others, before its images. `Some` when the run
    /// stops here instead: suspended until the decisions come, or ended.
    async fn settle_approvals(
        &self,
        state: &mut ThreadState,
        env: &RunEnv,
    ) -> Result<Option<RunOutcome>, RunError> {
        let held = state.awaiting_approval.clone();
        let undecided: Vec<ApprovalRequest> = held
            .iter()
            .filter(|r| !state.approval_verdicts.contains_key(&r.call_id))
            .cloned()
            .collect();
        if !undecided.is_empty()
            && let Some(outcome) = self.decide_approvals(state, env, &undecided).await?
        {
            return Ok(Some(outcome));
        }
        state.awaiting_approval.clear();
        self.run_held_calls(state, env, &held).await;
        Ok(None)
    }

    /// Asks for the decisions on `undecided` and records them. `Some` when the run stops
    /// here instead.
    async fn decide_approvals(
        &self,
        state: &mut ThreadState,
        env: &RunEnv,
        undecided: &[ApprovalRequest],
    ) -> Result<Option<RunOutcome>, RunError> {
        self.emit(AgentEvent::ApprovalAsked {
            agent: self.name.clone(),
            requests: undecided.to_vec(),
        });
        let verdicts = match env.control.ask_approval(undecided, state).await {
            Ok(ApprovalOutcome::Decided(verdicts)) => verdicts,
            Ok(ApprovalOutcome::Suspended) => {
                return Ok(Some(self.outcome(state, StopReason::InputRequired, None)));
            }
            Ok(ApprovalOutcome::Ended { reason, error }) => {
                return Ok(Some(self.outcome(state, reason, Some(error))));
            }
            // Where nobody can be asked, nobody approves: the model hears why.
            Err(ControlError::Refused(why)) => undecided
                .iter()
                .map(|r| {
                    let reason = format!("nobody can approve it here ({why})");
                    (r.id.clone(), Verdict::deny(Some(reason)))
                })
                .collect(),
            Err(error) => return Err(error.into()),
        };
        for (id, verdict) in verdicts {
            if let Some(request) = undecided.iter().find(|r| r.id == id) {
                self.emit(AgentEvent::ApprovalDecided {
                    agent: self.name.clone(),
                    call: request.summary(),
                    verdict: verdict.clone(),
                });
                state
                    .approval_verdicts
                    .insert(request.call_id.clone(), verdict);
            }
        }
        Ok(None)
    }

    /// Sends the `held` calls of the newest answer through the chain again; their results
    /// join that turn's others, before its images.
    async fn run_held_calls(
        &self,
        state: &mut ThreadState,
        env: &RunEnv,
        held: &[ApprovalRequest],
    ) {
        let Some(turn) = state
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant(_)))
        else {
            return;
        };
        let calls: Vec<ToolCall> = match &state.messages[turn] {
            Message::Assistant(message) => message
                .tool_calls
                .iter()
                .filter(|call| held.iter().any(|r| r.call_id == call.id))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        let results_end = state.messages[turn + 1..]
            .iter()
            .position(|m| !matches!(m, Message::Tool(_)))
            .map_or(state.messages.len(), |offset| turn + 1 + offset);
        let before = state.messages.len();
        // A held call is never a question (ToolApproval passes `ask_clarification` through).
        let _ = self
            .run_tools(state, env, calls, &tool_calls::Refusals::default())
            .await;
        let added = state.messages.split_off(before);
        let (results, rest): (Vec<Message>, Vec<Message>) = added
            .into_iter()
            .partition(|m| matches!(m, Message::Tool(_)));
        state.messages.splice(results_end..results_end, results);
        state.messages.extend(rest);
    }

    async fn hooks_before_model(&self, state: &mut ThreadState) -> Option<StopReason> {
        for middleware in &self.chain {
            if let Flow::End(reason) = middleware.before_model(state).await {
                return Some(reason);
            }
        }
        None
    }

    async fn hooks_after_model(&self, state: &mut ThreadState) -> Flow {
        let mut flow = Flow::Continue;
        for middleware in self.chain.iter().rev() {
            match middleware.after_model(state).await {
                Flow::Continue => {}
                Flow::End(reason) => return Flow::End(reason),
                Flow::JumpToModel => flow = Flow::JumpToModel,
            }
        }
        flow
    }

    async fn call_model(
        &self,
        state: &mut ThreadState,
    ) -> Result<AssistantMessage, crate::model::ModelError> {
        let call = state.usage.model_calls.saturating_add(1);
        self.emit(AgentEvent::ModelCall {
            agent: self.name.clone(),
            role: self.context.role,
            call,
        });
        let request = ModelRequest {
            system: self.system_prompt.clone(),
            messages: state.messages.clone(),
            tools: self.tools.shared_schemas(),
            options: self.options.clone(),
            context: self.context.clone(),
        };
        let span =
            self.telemetry
                .model_call_span(self.model.provider(), self.model.name(), &request);
        let on_delta = |delta: StreamDelta| {
            span.first_chunk();
            match delta {
                StreamDelta::Text(text) => self.emit(AgentEvent::Text {
                    agent: self.name.clone(),
                    text,
                }),
                StreamDelta::Reasoning(text) => self.emit(AgentEvent::Reasoning {
                    agent: self.name.clone(),
                    text,
                }),
                StreamDelta::ToolCallStarted { .. } => {}
            }
        };
        let next = ModelNext {
            rest: &self.chain,
            model: self.model.as_ref(),
            on_delta: &on_delta,
        };
        let result = next
            .run(ModelCall { state, request })
            .with_context(span.context())
            .await;
        span.finish(&result, self.model.name());
        state.usage.model_calls = call;
        let mut message = result?;
        if message.id.is_empty() {
            message.id = format!("ai-{call}");
        }
        if let Some(usage) = &message.usage {
            record_call(&mut state.usage, self.model.as_ref(), usage);
        }
        Ok(message)
    }

    /// Executes one turn's tool calls (concurrently, results in call order), applies their
    /// effects, and returns the first clarification question asked, if any.
    async fn run_tools(
        &self,
        state: &mut ThreadState,
        env: &RunEnv,
        calls: Vec<ToolCall>,
        refusals: &Refusals,
    ) -> Option<Clarification> {
        let snapshot: &ThreadState = state;
        let outputs: Vec<(ToolCall, ToolOutput)> = futures::stream::iter(calls)
            .map(|call| self.run_tool(snapshot, env, call, refusals))
            .buffered(self.limits.max_parallel_tools.max(1))
            .collect()
            .await;
        let mut question = None;
        // Images follow all of the turn's results: strict providers want every result
        // right after the assistant message that called for it.
        let mut images = Vec::new();
        let failed_large: Vec<String> = outputs
            .iter()
            .filter(|(call, output)| {
                output.status == ToolStatus::Error
                    && call.arguments.len() > tool_calls::KEEP_FAILED_ARGUMENT_BYTES
            })
            .map(|(call, _)| call.id.clone())
            .collect();
        tool_calls::forget_arguments(&mut state.messages, &failed_large);
        for (call, output) in outputs {
            let asked = self.apply_output(state, &call, output, &mut images);
            if question.is_none() {
                question = asked;
            }
        }
        state.messages.extend(images);
        question
    }

    /// Adds `call`'s result to the thread and applies its effects; the images it brings go
    /// to `images`. Returns the question it asks, if any.
    fn apply_output(
        &self,
        state: &mut ThreadState,
        call: &ToolCall,
        output: ToolOutput,
        images: &mut Vec<Message>,
    ) -> Option<Clarification> {
        let effect = output.effect;
        // A held call has no result until a person decides (`settle_approvals`).
        if let Some(request) = effect.approval {
            state.awaiting_approval.push(request);
            return None;
        }
        state.usage.tool_calls = state.usage.tool_calls.saturating_add(1);
        if let Some(todos) = effect.todos {
            self.emit(AgentEvent::Todos {
                agent: self.name.clone(),
                todos: todos.clone(),
            });
            state.todos = todos;
        }
        state.add_artifacts(effect.artifacts);
        if let Some(delegation) = effect.delegation {
            state.record_delegation(delegation);
        }
        if let Some(usage) = &effect.child_usage {
            state.children_usage.add(usage);
        }
        let mut result = Message::tool(call, output.status, output.content);
        if let Message::Tool(tool_message) = &mut result {
            tool_message.meta.extra = output.meta.into();
        }
        state.messages.push(result);
        if let Some((path, image, part)) = effect.viewed_image {
            state.viewed_images.insert(path.clone(), image);
            images.push(image_message(
                format!("view-image:{}", call.id),
                format!("Here is the image {path} you asked to view."),
                vec![part],
            ));
        }
        if !effect.images.is_empty() {
            images.push(image_message(
                format!("tool-images:{}", call.id),
                format!("Here are the images {} returned.", call.name),
                effect.images,
            ));
        }
        state.promoted_tools.extend(effect.promoted);
        effect.interrupt
    }

    async fn run_tool(
        &self,
        state: &ThreadState,
        env: &RunEnv,
        call: ToolCall,
        refusals: &Refusals,
    ) -> (ToolCall, ToolOutput) {
        self.emit(AgentEvent::ToolStarted {
            agent: self.name.clone(),
            id: call.id.clone(),
            name: call.name.clone(),
            summary: summarize_arguments(&call.arguments),
        });
        let span = self.telemetry.tool_call_span(&call);
        let output = match refusals.get(&call.id) {
            Some(error) => ToolOutput::error(error),
            None => {
                self.execute(state, env, &call)
                    .with_context(span.context())
                    .await
            }
        };
        span.finish(output.status, &output.content);
        // A held call has not finished: `ApprovalAsked` says what it waits for.
        if output.effect.approval.is_some() {
            return (call, output);
        }
        self.emit(AgentEvent::ToolFinished {
            agent: self.name.clone(),
            id: call.id.clone(),
            name: call.name.clone(),
            ok: output.status == ToolStatus::Success,
            preview: first_line(&output.content, 120),
        });
        (call, output)
    }

    /// One call through the chain's wrap_tool_call hooks to its tool.
    async fn execute(&self, state: &ThreadState, env: &RunEnv, call: &ToolCall) -> ToolOutput {
        let request = ToolRequest {
            call: call.clone(),
            state,
            ctx: ToolContext {
                call_id: call.id.clone(),
                executor: env.executor.clone(),
                control: env.control.clone(),
                attempt: self.context.attempt,
                budget: Budget {
                    model_calls_left: self
                        .limits
                        .max_model_calls
                        .saturating_sub(state.usage.model_calls),
                    tokens_left: self
                        .limits
                        .token_budget
                        .map(|budget| budget.saturating_sub(state.usage.total_tokens())),
                    deadline: self.limits.deadline.as_ref().map(Deadline::instant),
                },
            },
        };
        let next = ToolNext {
            rest: &self.chain,
            tools: &self.tools,
        };
        next.run(request).await
    }

    fn outcome(
        &self,
        state: &ThreadState,
        reason: StopReason,
        error: Option<String>,
    ) -> RunOutcome {
        let answer = state
            .last_assistant()
            .map(|message| message.content.clone())
            .unwrap_or_default();
        RunOutcome {
            stop_reason: reason,
            answer,
            error,
            question: None,
        }
    }

    fn emit(&self, event: AgentEvent) {
        self.observer.on_event(event);
    }
}

/// A hidden user message carrying `images` to the model, with `text`.
fn image_message(id: String, text: String, images: Vec<ImagePart>) -> Message {
    let mut message = Message::hidden_user(id, MessageKind::ViewImage, text);
    if let Message::User(user) = &mut message {
        user.images = images;
    }
    message
}

fn summarize_arguments(arguments: &str) -> String {
    first_line(arguments, 100)
}

fn first_line(text: &str, max_chars: usize) -> String {
    truncate_chars(text.lines().next().unwrap_or_default(), max_chars)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use serde_json::json;

    use super::*;
    use crate::agent::ModelResult;
    use crate::model::ModelError;
    use crate::test_doubles::{
        self, EchoTool, FixedTool, QueuedModel, RecordingControl, RecordingObserver, calls, text,
    };
    use crate::thread::ToolStatus;
    use crate::tools::ask_clarification::AskClarification;
    use crate::tools::write_todos::WriteTodos;

    /// Records every hook it sees into a shared log, as `<name>.<hook>`.
    struct Recorder {
        name: &'static str,
        log: Arc<Mutex<Vec<String>>>,
    }

    impl Recorder {
        fn push(&self, hook: &str) {
            self.log
                .lock()
                .unwrap()
                .push(format!("{}.{hook}", self.name));
        }
    }

    #[async_trait]
    impl Middleware for Recorder {
        fn name(&self) -> &'static str {
            self.name
        }
        async fn before_agent(&self, _state: &mut ThreadState) -> Flow {
            self.push("before_agent");
            Flow::Continue
        }
        async fn before_model(&self, _state: &mut ThreadState) -> Flow {
            self.push("before_model");
            Flow::Continue
        }
        async fn wrap_model_call(&self, call: ModelCall<'_>, next: ModelNext<'_>) -> ModelResult {
            self.push("wrap_model:in");
            let result = next.run(call).await;
            self.push("wrap_model:out");
            result
        }
        async fn after_model(&self, _state: &mut ThreadState) -> Flow {
            self.push("after_model");
            Flow::Continue
        }
        async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
            self.push("wrap_tool:in");
            let output = next.run(request).await;
            self.push("wrap_tool:out");
            output
        }
        async fn after_agent(&self, _state: &mut ThreadState) {
            self.push("after_agent");
        }
    }

    fn recorders(log: &Arc<Mutex<Vec<String>>>) -> Vec<Arc<dyn Middleware>> {
        ["a", "b"]
            .into_iter()
            .map(|name| {
                Arc::new(Recorder {
                    name,
                    log: log.clone(),
                }) as Arc<dyn Middleware>
            })
            .collect()
    }

    #[tokio::test]
    async fn hooks_run_in_deerflow_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let model = QueuedModel::new(vec![
            calls(&[("write_todos", json!({"todos": []}))]),
            text("done"),
        ]);
        let (agent, env) = test_doubles::agent(
            model,
            vec![Arc::new(WriteTodos)],
            recorders(&log),
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("go");
        agent.run(&mut state, &env).await.unwrap();
        let turn = [
            "a.before_model",
            "b.before_model",
            "a.wrap_model:in",
            "b.wrap_model:in",
            "b.wrap_model:out",
            "a.wrap_model:out",
            "b.after_model",
            "a.after_model",
        ];
        let mut expected = vec!["a.before_agent", "b.before_agent"];
        expected.extend(turn);
        expected.extend([
            "a.wrap_tool:in",
            "b.wrap_tool:in",
            "b.wrap_tool:out",
            "a.wrap_tool:out",
        ]);
        expected.extend(turn);
        expected.extend(["b.after_agent", "a.after_agent"]);
        assert_eq!(*log.lock().unwrap(), expected);
    }

    #[tokio::test]
    async fn a_final_answer_completes_the_run() {
        let model = QueuedModel::new(vec![text("42")]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![],
            vec![],
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("question");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::Completed);
        assert_eq!(outcome.answer, "42");
        assert_eq!(state.usage.model_calls, 1);
        assert_eq!(state.usage.input_tokens, 10);
        assert_eq!(state.stop_reason, Some(StopReason::Completed));
        let requests = model.requests();
        assert_eq!(requests[0].system, "You are a test agent.");
    }

    #[tokio::test]
    async fn the_model_call_limit_stops_the_run() {
        let turns = (0..10)
            .map(|_| calls(&[("write_todos", json!({"todos": []}))]))
            .collect();
        let (mut agent, env) = test_doubles::agent(
            QueuedModel::new(turns),
            vec![Arc::new(WriteTodos)],
            vec![],
            Arc::new(RecordingControl::default()),
        );
        agent.limits.max_model_calls = 3;
        let mut state = ThreadState::new("loop");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::ModelCallLimit);
        assert_eq!(state.usage.model_calls, 3);
        assert_eq!(state.usage.tool_calls, 3);
    }

    #[tokio::test]
    async fn a_passed_deadline_times_the_run_out() {
        let (mut agent, env) = test_doubles::agent(
            QueuedModel::new(vec![text("never")]),
            vec![],
            vec![],
            Arc::new(RecordingControl::default()),
        );
        agent.limits.deadline = Some(Deadline::at(tokio::time::Instant::now()));
        let outcome = agent.run(&mut ThreadState::new("t"), &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::TimedOut);
    }

    #[tokio::test]
    async fn a_model_error_stops_with_its_message() {
        let model = Arc::new(QueuedModel::default());
        model.answers.lock().unwrap().push_back(Err(ModelError::new(
            crate::model::ModelErrorKind::Auth,
            "invalid API key",
        )));
        let (agent, env) =
            test_doubles::agent(model, vec![], vec![], Arc::new(RecordingControl::default()));
        let outcome = agent.run(&mut ThreadState::new("t"), &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::ModelError);
        assert_eq!(outcome.error.as_deref(), Some("invalid API key"));
    }

    fn question_turn() -> AssistantMessage {
        calls(&[(
            "ask_clarification",
            json!({"question": "Which format?", "clarification_type": "approach_choice",
                   "options": ["PDF", "HTML"]}),
        )])
    }

    #[tokio::test]
    async fn an_unanswered_question_suspends_the_run() {
        let control = Arc::new(RecordingControl::default());
        let (agent, env) = test_doubles::agent(
            QueuedModel::new(vec![question_turn(), text("unreachable")]),
            vec![Arc::new(AskClarification)],
            vec![],
            control.clone(),
        );
        let mut state = ThreadState::new("make a report");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::InputRequired);
        let question = outcome.question.unwrap();
        assert_eq!(question.question, "Which format?");
        assert_eq!(control.questions.lock().unwrap().len(), 1);
        assert_eq!(state.usage.model_calls, 1);
    }

    #[tokio::test]
    async fn a_question_whose_checkpoint_cannot_be_kept_ends_the_run_so() {
        let control = Arc::new(RecordingControl {
            end_questions: Some((
                StopReason::CheckpointTooLarge,
                "the checkpoint is 2000000 bytes of gzip even summarized".into(),
            )),
            ..RecordingControl::default()
        });
        let (agent, env) = test_doubles::agent(
            QueuedModel::new(vec![question_turn(), text("unreachable")]),
            vec![Arc::new(AskClarification)],
            vec![],
            control,
        );
        let outcome = agent
            .run(&mut ThreadState::new("make a report"), &env)
            .await
            .unwrap();
        assert_eq!(outcome.stop_reason, StopReason::CheckpointTooLarge);
        assert!(
            outcome
                .error
                .as_deref()
                .unwrap()
                .contains("even summarized"),
            "{outcome:?}"
        );
        assert_eq!(outcome.question, None, "no question left open");
    }

    #[tokio::test]
    async fn a_tool_sees_the_model_calls_tokens_and_time_left() {
        let control = Arc::new(RecordingControl::default());
        let (mut agent, env) = test_doubles::agent(
            QueuedModel::new(vec![
                calls(&[(
                    "task",
                    json!({"description": "d", "prompt": "p", "subagent_type": "bash"}),
                )]),
                text("done"),
            ]),
            vec![Arc::new(crate::tools::task::Task)],
            vec![],
            control.clone(),
        );
        let deadline =
            Deadline::at(tokio::time::Instant::now() + std::time::Duration::from_secs(60));
        agent.limits.max_model_calls = 9;
        agent.limits.token_budget = Some(1000);
        agent.limits.deadline = Some(deadline.clone());
        let mut state = ThreadState::new("delegate");
        state.usage.input_tokens = 300;
        agent.run(&mut state, &env).await.unwrap();
        let children = control.children.lock().unwrap();
        let (_, budget) = &children[0];
        assert_eq!(budget.model_calls_left, 8);
        assert_eq!(budget.tokens_left, Some(1000 - 300));
        assert_eq!(budget.deadline, Some(deadline.instant()));
    }

    #[tokio::test]
    async fn a_question_no_one_can_be_asked_is_told_to_the_model_and_the_run_goes_on() {
        let control = Arc::new(RecordingControl {
            refuse_questions: Some("a subagent cannot ask the user".into()),
            ..RecordingControl::default()
        });
        let model = QueuedModel::new(vec![question_turn(), text("Assuming PDF: done")]);
        let observer = Arc::new(RecordingObserver::default());
        let (mut agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(AskClarification)],
            vec![],
            control.clone(),
        );
        agent.observer = observer.clone();
        let mut state = ThreadState::new("make a report");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::Completed);
        assert_eq!(outcome.answer, "Assuming PDF: done");
        let told = model.requests().pop().unwrap();
        let told = told.messages.last().unwrap().text();
        assert!(
            told.starts_with("Your question could not be asked (a subagent cannot ask the user)."),
            "{told}"
        );
        assert_eq!(
            observer.warnings(),
            ["the question was not asked: a subagent cannot ask the user"]
        );
    }

    #[tokio::test]
    async fn an_answered_question_continues_the_run() {
        let control = Arc::new(RecordingControl {
            answer: Some("PDF".into()),
            ..RecordingControl::default()
        });
        let model = QueuedModel::new(vec![question_turn(), text("PDF it is")]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(AskClarification)],
            vec![],
            control,
        );
        let mut state = ThreadState::new("make a report");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::Completed);
        assert_eq!(outcome.answer, "PDF it is");
        let last_request = model.requests().pop().unwrap();
        assert_eq!(last_request.messages.last().unwrap().text(), "PDF");
    }

    #[tokio::test]
    async fn tool_results_follow_call_order_and_errors_reach_the_model() {
        let model = QueuedModel::new(vec![
            calls(&[
                (
                    "write_todos",
                    json!({"todos": [{"content": "x", "status": "pending"}]}),
                ),
                ("no_such_tool", json!({})),
                ("write_todos", json!({"todos": "not a list"})),
            ]),
            text("ok"),
        ]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(WriteTodos)],
            vec![],
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("t");
        agent.run(&mut state, &env).await.unwrap();
        let results: Vec<_> = state
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(t) => Some((t.tool_call_id.clone(), t.status)),
                _ => None,
            })
            .collect();
        assert_eq!(
            results,
            vec![
                ("call_0_write_todos".to_string(), ToolStatus::Success),
                ("call_1_no_such_tool".to_string(), ToolStatus::Error),
                ("call_2_write_todos".to_string(), ToolStatus::Error),
            ]
        );
        assert_eq!(state.todos.len(), 1);
    }

    struct JumpOnce(Mutex<bool>);

    #[async_trait]
    impl Middleware for JumpOnce {
        fn name(&self) -> &'static str {
            "jump"
        }
        async fn after_model(&self, _state: &mut ThreadState) -> Flow {
            let mut jumped = self.0.lock().unwrap();
            if *jumped {
                Flow::Continue
            } else {
                *jumped = true;
                Flow::JumpToModel
            }
        }
    }

    #[tokio::test]
    async fn a_hook_can_jump_back_to_the_model() {
        let model = QueuedModel::new(vec![text("first"), text("second")]);
        let (agent, env) =
            test_doubles::middleware_agent(model, Arc::new(JumpOnce(Mutex::new(false))));
        let outcome = agent.run(&mut ThreadState::new("t"), &env).await.unwrap();
        assert_eq!(outcome.answer, "second");
    }

    struct EndBeforeModel;

    #[async_trait]
    impl Middleware for EndBeforeModel {
        fn name(&self) -> &'static str {
            "end"
        }
        async fn before_model(&self, _state: &mut ThreadState) -> Flow {
            Flow::End(StopReason::TokenBudgetExceeded)
        }
    }

    #[tokio::test]
    async fn a_hook_can_end_the_run() {
        let model = QueuedModel::new(vec![text("never")]);
        let (agent, env) = test_doubles::middleware_agent(model.clone(), Arc::new(EndBeforeModel));
        let outcome = agent.run(&mut ThreadState::new("t"), &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::TokenBudgetExceeded);
        assert!(model.requests().is_empty());
    }

    /// Adds a message to the request only: the thread must not keep it.
    struct RequestOnly;

    #[async_trait]
    impl Middleware for RequestOnly {
        fn name(&self) -> &'static str {
            "request-only"
        }
        fn rewrite_request(&self, _state: &ThreadState, request: &mut ModelRequest) {
            request.messages.push(Message::hidden_user(
                "r",
                MessageKind::LoopWarning,
                "be brief",
            ));
        }
    }

    #[tokio::test]
    async fn request_changes_are_not_persisted() {
        let model = QueuedModel::new(vec![text("ok")]);
        let (agent, env) = test_doubles::middleware_agent(model.clone(), Arc::new(RequestOnly));
        let mut state = ThreadState::new("t");
        agent.run(&mut state, &env).await.unwrap();
        assert_eq!(model.requests()[0].messages.len(), 2);
        assert_eq!(state.messages.len(), 2, "user + assistant only");
    }

    fn call_with_id(id: &str, name: &str, arguments: String) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }

    /// (call id, call name, result id, result text) of each result of the thread.
    fn pairs(messages: &[Message]) -> Vec<(String, String, String)> {
        messages
            .iter()
            .filter_map(|message| match message {
                Message::Tool(result) => Some((
                    result.tool_call_id.clone(),
                    result.name.clone(),
                    result.content.clone(),
                )),
                _ => None,
            })
            .collect()
    }

    /// An agent with only the echo tool, no middleware and a recording control plane.
    fn echo_agent(model: Arc<QueuedModel>) -> (Agent, RunEnv) {
        test_doubles::agent(
            model,
            vec![Arc::new(EchoTool)],
            vec![],
            Arc::new(RecordingControl::default()),
        )
    }

    #[tokio::test]
    async fn calls_sharing_an_id_get_their_own_ids_and_results() {
        let mut twins = calls(&[]);
        twins.tool_calls = vec![
            call_with_id("same", "echo", json!({"text": "ONE"}).to_string()),
            call_with_id("same", "echo", json!({"text": "TWO"}).to_string()),
        ];
        let model = QueuedModel::new(vec![twins, text("done")]);
        let (agent, env) = echo_agent(model.clone());
        let mut state = ThreadState::new("echo twice");
        agent.run(&mut state, &env).await.unwrap();
        // The next request carries the rewritten answer, each result right after its call.
        let sent = &model.requests()[1].messages;
        let answer = sent[1].as_assistant().unwrap();
        let ids: Vec<&str> = answer.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, vec!["same", "same_2"]);
        assert_eq!(
            pairs(sent),
            vec![
                ("same".into(), "echo".into(), "ONE".into()),
                ("same_2".into(), "echo".into(), "TWO".into()),
            ]
        );
        assert_eq!(pairs(&state.messages), pairs(sent), "the stored thread too");
    }

    #[tokio::test]
    async fn a_nameless_call_gets_an_error_result_and_the_run_goes_on() {
        let mut nameless = calls(&[("echo", json!({"text": "fine"}))]);
        nameless
            .tool_calls
            .insert(0, call_with_id("x", "", "{}".into()));
        let model = QueuedModel::new(vec![nameless, text("done")]);
        let (agent, env) = echo_agent(model.clone());
        let mut state = ThreadState::new("go");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::Completed);
        assert_eq!(outcome.answer, "done");
        let results = pairs(&model.requests()[1].messages);
        assert_eq!(results[0].1, tool_calls::NAMELESS);
        assert!(results[0].2.contains("no tool name"), "{}", results[0].2);
        assert!(
            results[0].2.contains("echo"),
            "names the tools: {}",
            results[0].2
        );
        assert_eq!(results[1].2, "fine");
        let statuses: Vec<ToolStatus> = state
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(t) => Some(t.status),
                _ => None,
            })
            .collect();
        assert_eq!(statuses, vec![ToolStatus::Error, ToolStatus::Success]);
    }

    #[tokio::test]
    async fn large_arguments_of_a_failed_call_are_not_sent_again() {
        let large = json!({"text": "y".repeat(tool_calls::KEEP_FAILED_ARGUMENT_BYTES)});
        let small = json!({"text": "keep me"});
        let model = QueuedModel::new(vec![
            calls(&[
                ("refuse", large),
                ("refuse", small.clone()),
                ("echo", json!({"text": "z".repeat(100_000)})),
            ]),
            text("done"),
        ]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![
                Arc::new(EchoTool),
                Arc::new(FixedTool::new(
                    "refuse",
                    ToolOutput::error("Error: too large for this tool."),
                )),
            ],
            vec![],
            Arc::new(RecordingControl::default()),
        );
        agent.run(&mut ThreadState::new("go"), &env).await.unwrap();
        let sent = &model.requests()[1].messages;
        let arguments: Vec<&str> = sent[1]
            .as_assistant()
            .unwrap()
            .tool_calls
            .iter()
            .map(|c| c.arguments.as_str())
            .collect();
        assert!(arguments[0].contains("dropped"), "{}", arguments[0]);
        assert_eq!(arguments[1], small.to_string(), "small failed calls stay");
        assert!(arguments[2].len() > 100_000, "successful calls stay");
        assert_eq!(pairs(sent)[0].2, "Error: too large for this tool.");
    }

    #[tokio::test]
    async fn oversized_arguments_are_not_run_nor_sent_again() {
        let text_arg = "x".repeat(tool_calls::MAX_ARGUMENT_BYTES);
        let mut huge = calls(&[]);
        huge.tool_calls = vec![call_with_id(
            "big",
            "echo",
            json!({"text": text_arg}).to_string(),
        )];
        let model = QueuedModel::new(vec![huge, text("sorry"), text("unused")]);
        let (agent, env) = echo_agent(model.clone());
        let mut state = ThreadState::new("go");
        agent.run(&mut state, &env).await.unwrap();
        let sent = &model.requests()[1].messages;
        let arguments = &sent[1].as_assistant().unwrap().tool_calls[0].arguments;
        assert!(arguments.len() < 100, "a placeholder is sent: {arguments}");
        let results = pairs(sent);
        assert!(results[0].2.starts_with("Error:"), "{}", results[0].2);
        assert!(results[0].2.len() < 500, "nothing was echoed");
        let stored = serde_json::to_string(&state.messages).unwrap();
        assert!(stored.len() < 10_000, "the thread holds no copy");
    }
}
