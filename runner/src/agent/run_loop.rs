//! The agent loop (DeerFlow's `create_agent` graph): model, tools, repeat — with the chain's
//! hooks around each step.

use std::sync::Arc;

use futures::StreamExt;
use herd_crds::report::{Clarification, StopReason};

use crate::control::{AskOutcome, ControlError, ControlPlane};
use crate::model::{CallContext, CallOptions, ChatModel, ModelRequest, StreamDelta};
use crate::sandbox::executor::ToolExecutor;
use crate::thread::{AssistantMessage, Message, ThreadState, ToolCall, ToolStatus};
use crate::tools::{ToolContext, ToolOutput};

use super::events::{AgentEvent, Observer};
use super::middleware::{Flow, Middleware, ModelNext, ToolNext, ToolRequest};
use super::tool_registry::ToolRegistry;

/// Limits of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Model calls allowed in the thread (resumed threads count earlier calls).
    pub max_model_calls: u32,
    /// Tool calls of one turn executed at once.
    pub max_parallel_tools: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_model_calls: 50,
            max_parallel_tools: 8,
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

impl Agent {
    /// Runs the thread until a final answer, a question, a limit or an error.
    pub async fn run(&self, state: &mut ThreadState, env: &RunEnv) -> Result<RunOutcome, RunError> {
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
            if state.usage.model_calls >= self.limits.max_model_calls {
                return Ok(self.outcome(state, StopReason::ModelCallLimit, None));
            }
            if let Some(reason) = self.hooks_before_model(state).await {
                return Ok(self.outcome(state, reason, None));
            }
            let message = match self.call_model(state).await {
                Ok(message) => message,
                Err(error) => {
                    return Ok(self.outcome(state, StopReason::ModelError, Some(error.message)));
                }
            };
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
            if let Some(question) = self.run_tools(state, env, calls).await {
                match env.control.ask(&question, state).await? {
                    AskOutcome::Answered(answer) => {
                        let id = format!("answer-{}", question.id);
                        state.messages.push(Message::user(id, answer));
                    }
                    AskOutcome::Suspended => {
                        let mut outcome = self.outcome(state, StopReason::InputRequired, None);
                        outcome.question = Some(question);
                        return Ok(outcome);
                    }
                }
            }
        }
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
            tools: self.tools.schemas().to_vec(),
            options: self.options.clone(),
            context: self.context.clone(),
        };
        let on_delta = |delta: StreamDelta| match delta {
            StreamDelta::Text(text) => self.emit(AgentEvent::Text {
                agent: self.name.clone(),
                text,
            }),
            StreamDelta::Reasoning(text) => self.emit(AgentEvent::Reasoning {
                agent: self.name.clone(),
                text,
            }),
            StreamDelta::ToolCallStarted { .. } => {}
        };
        let next = ModelNext {
            rest: &self.chain,
            model: self.model.as_ref(),
            on_delta: &on_delta,
        };
        let result = next.run(state, request).await;
        state.usage.model_calls = call;
        let mut message = result?;
        if message.id.is_empty() {
            message.id = format!("ai-{call}");
        }
        if let Some(usage) = &message.usage {
            state.usage.input_tokens = state.usage.input_tokens.saturating_add(usage.input_tokens);
            state.usage.output_tokens =
                state.usage.output_tokens.saturating_add(usage.output_tokens);
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
    ) -> Option<Clarification> {
        let snapshot: &ThreadState = state;
        let outputs: Vec<(ToolCall, ToolOutput)> = futures::stream::iter(calls)
            .map(|call| self.run_tool(snapshot, env, call))
            .buffered(self.limits.max_parallel_tools.max(1))
            .collect()
            .await;
        let mut question = None;
        for (call, output) in outputs {
            state.usage.tool_calls = state.usage.tool_calls.saturating_add(1);
            let effect = output.effect;
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
            let mut result = Message::tool(&call, output.status, output.content);
            if let Message::Tool(tool_message) = &mut result {
                tool_message.meta.extra = output.meta;
            }
            state.messages.push(result);
            if let Some((path, image, part)) = effect.viewed_image {
                state.viewed_images.insert(path.clone(), image);
                let mut message = Message::hidden_user(
                    format!("view-image:{}", call.id),
                    "view_image",
                    format!("Here is the image {path} you asked to view."),
                );
                if let Message::User(user) = &mut message {
                    user.images.push(part);
                }
                state.messages.push(message);
            }
            if question.is_none() {
                question = effect.interrupt;
            }
        }
        question
    }

    async fn run_tool(
        &self,
        state: &ThreadState,
        env: &RunEnv,
        call: ToolCall,
    ) -> (ToolCall, ToolOutput) {
        self.emit(AgentEvent::ToolStarted {
            agent: self.name.clone(),
            id: call.id.clone(),
            name: call.name.clone(),
            summary: summarize_arguments(&call.arguments),
        });
        let request = ToolRequest {
            call: call.clone(),
            state,
            ctx: ToolContext {
                call_id: call.id.clone(),
                executor: env.executor.clone(),
                control: env.control.clone(),
                attempt: self.context.attempt,
            },
        };
        let next = ToolNext {
            rest: &self.chain,
            tools: &self.tools,
        };
        let output = next.run(request).await;
        self.emit(AgentEvent::ToolFinished {
            agent: self.name.clone(),
            id: call.id.clone(),
            name: call.name.clone(),
            ok: output.status == ToolStatus::Success,
            preview: first_line(&output.content, 120),
        });
        (call, output)
    }

    fn outcome(&self, state: &ThreadState, reason: StopReason, error: Option<String>) -> RunOutcome {
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

fn summarize_arguments(arguments: &str) -> String {
    first_line(arguments, 100)
}

fn first_line(text: &str, max_chars: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= max_chars {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(max_chars).collect();
    cut.push('…');
    cut
}
