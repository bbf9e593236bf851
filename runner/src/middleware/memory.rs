//! Memory (DeerFlow's `MemoryMiddleware`, after_agent): once a run has produced its answer,
//! one model call reads the conversation and the current memory and proposes operations
//! (add, reinforce, remove, setContext), which go to the control plane. The store applies
//! them atomically and decides the scope (the Agent's memory or one user's); operations,
//! not whole documents, so runs ending together lose nothing.
//!
//! DeerFlow debounces updates in a process-local queue; a Herd run is one process that ends
//! with the run, so the update happens here, before the process exits. Nothing here can fail
//! the run: a memory problem (the call failing, timing out after `LONG_TIMEOUT`, or answering
//! no JSON) is a warning and the answer stands. The call's output is capped
//! (`memory.maxTokens`, else an eighth of the context window: `side_call::long_max_tokens`).

use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::report::StopReason;
use herd_sandbox::truncation::head_tail;

use super::shared::clock::Clock;
use super::shared::side_call::SideCall;
use crate::agent::{Middleware, NoObserver, SideCallKind};
use crate::control::ControlPlane;
use crate::memory::extract::{
    MEMORY_SYSTEM_PROMPT, build_prompt, compact_transcript, parse_operations, stale_candidates,
};
use crate::model::{AgentRole, CallContext, ChatModel, Purpose, record_call};
use crate::tag_escaping::escape_tags;
use crate::thread::{Message, MessageKind, ThreadState};

/// Longest summary of compacted messages put into the memory call.
const SUMMARY_CHARS: usize = 4000;

/// Learns from each finished run.
pub struct Memory {
    model: Arc<dyn ChatModel>,
    control: Arc<dyn ControlPlane>,
    clock: Clock,
    attempt: u32,
    call: SideCall,
}

impl Memory {
    /// `model` makes the memory call (the run's model unless a cheaper one is configured);
    /// `clock` dates staleness; `attempt` is the Run's attempt, passed on to the call.
    pub fn new(
        model: Arc<dyn ChatModel>,
        control: Arc<dyn ControlPlane>,
        clock: Clock,
        attempt: u32,
    ) -> Self {
        Memory {
            model,
            control,
            clock,
            attempt,
            call: SideCall::new(SideCallKind::Memory, "lead", Arc::new(NoObserver)),
        }
    }

    /// This middleware making its memory call as `call` (its observer, cap and timeout).
    pub fn with_call(mut self, call: SideCall) -> Self {
        self.call = call;
        self
    }

    async fn update(&self, state: &mut ThreadState) -> Result<usize, String> {
        let Some(mut transcript) = compact_transcript(&state.messages) else {
            return Ok(0);
        };
        // Summarization removed the older messages; their summary stands in for them (what
        // DeerFlow's pre-compaction memory flush achieves).
        if let Some(summary) = state.summary.as_deref().filter(|s| !s.trim().is_empty()) {
            let summary = escape_tags(&head_tail(
                summary.trim(),
                SUMMARY_CHARS * 2 / 3,
                SUMMARY_CHARS / 3,
            ));
            transcript = format!("Earlier (summarized): {summary}\n\n{transcript}");
        }
        let document = self
            .control
            .read_memory()
            .await
            .map_err(|error| format!("reading memory failed: {error}"))?;
        let now = (self.clock)().timestamp();
        let stale = stale_candidates(&document, now);
        let context = CallContext {
            role: AgentRole::Lead,
            subagent_type: None,
            purpose: Purpose::Memory,
            attempt: self.attempt,
        };
        let prompt = build_prompt(&document, &stale, &transcript);
        let answer = self
            .call
            .send(
                self.model.as_ref(),
                MEMORY_SYSTEM_PROMPT,
                MessageKind::MemoryUpdate,
                prompt,
                context,
            )
            .await
            .map_err(|error| format!("the memory call failed: {}", error.message))?;
        if let Some(usage) = &answer.usage {
            record_call(&mut state.usage, self.model.as_ref(), usage);
        }
        let operations =
            parse_operations(&answer.content, &document).map_err(|error| error.to_string())?;
        let count = operations.len();
        if count > 0 {
            self.control
                .update_memory(operations)
                .await
                .map_err(|error| format!("storing memory failed: {error}"))?;
        }
        Ok(count)
    }
}

#[async_trait]
impl Middleware for Memory {
    fn name(&self) -> &'static str {
        "Memory"
    }

    async fn after_agent(&self, state: &mut ThreadState) {
        if !finished_with_answer(state) {
            return;
        }
        match self.update(state).await {
            Ok(count) => tracing::debug!(operations = count, "memory updated"),
            Err(problem) => self.call.warn(format!("memory not updated: {problem}")),
        }
    }
}

/// Whether the run ended on a final answer: not waiting for the user (the conversation goes
/// on and is learned from when it ends) and not failed before answering.
fn finished_with_answer(state: &ThreadState) -> bool {
    if let Some(reason) = state.stop_reason
        && (reason == StopReason::InputRequired || !reason.is_answer())
    {
        return false;
    }
    matches!(
        state.messages.last(),
        Some(Message::Assistant(answer))
            if answer.tool_calls.is_empty() && !answer.content.trim().is_empty()
    )
}

#[cfg(test)]
mod tests {
    use herd_crds::wire::{Fact, FactCategory, MemoryDocument, MemoryOperation};
    use serde_json::json;

    use super::*;
    use crate::middleware::shared::clock::fixed;
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::tools::ask_clarification::AskClarification;

    fn memory(model: Arc<QueuedModel>, control: Arc<RecordingControl>) -> Arc<Memory> {
        Arc::new(Memory::new(
            model,
            control,
            fixed("2026-06-01T12:00:00+00:00[UTC]"),
            1,
        ))
    }

    fn old_fact(id: &str) -> Fact {
        Fact {
            id: id.into(),
            content: format!("old {id}"),
            category: FactCategory::Context,
            confidence: 0.8,
            source: "run-0".into(),
            created_at: "2025-01-01T00:00:00Z".into(),
            updated_at: "2025-01-01T00:00:00Z".into(),
            confirmation_count: 0,
        }
    }

    #[tokio::test]
    async fn a_finished_run_sends_operations_from_one_memory_call() {
        let control = Arc::new(RecordingControl::default());
        *control.memory.lock().unwrap() = MemoryDocument {
            facts: vec![old_fact("fact-1"), old_fact("fact-2"), old_fact("fact-3")],
            ..MemoryDocument::default()
        };
        let memory_model = QueuedModel::new(vec![text(
            "```json\n{\"operations\": [\
             {\"op\": \"add\", \"content\": \"Prefers Rust\", \"category\": \"preference\", \"confidence\": 0.9},\
             {\"op\": \"add\", \"content\": \"Maybe likes tea\", \"category\": \"preference\", \"confidence\": 0.4},\
             {\"op\": \"remove\", \"id\": \"fact-2\"}]}\n```",
        )]);
        let (agent, env) = test_doubles::agent(
            QueuedModel::new(vec![text("Here is your Rust code.")]),
            vec![],
            vec![memory(memory_model.clone(), control.clone())],
            control.clone(),
        );
        let mut state = ThreadState::new("Write it in Rust, I always use Rust");
        agent.run(&mut state, &env).await.unwrap();

        let requests = memory_model.requests();
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        assert_eq!(request.context.purpose, Purpose::Memory);
        assert!(request.tools.is_empty());
        let prompt = request.messages[0].text();
        assert!(prompt.contains("User: Write it in Rust, I always use Rust"));
        assert!(prompt.contains("Assistant: Here is your Rust code."));
        assert!(
            prompt.contains("<stale_facts>"),
            "three facts are over 90 days old"
        );
        assert_eq!(
            *control.memory_updates.lock().unwrap(),
            vec![vec![
                MemoryOperation::Add {
                    content: "Prefers Rust".into(),
                    category: FactCategory::Preference,
                    confidence: 0.9,
                },
                MemoryOperation::Remove {
                    id: "fact-2".into()
                },
            ]]
        );
        assert_eq!(
            state.usage.input_tokens, 20,
            "the memory call's usage counts"
        );
    }

    #[tokio::test]
    async fn the_summary_of_compacted_messages_reaches_the_memory_call() {
        let control = Arc::new(RecordingControl::default());
        let memory_model = QueuedModel::new(vec![text("{\"operations\": []}")]);
        let mut state = ThreadState::new("and now the <chart>");
        state.summary = Some("The user is Ada and wants weekly reports.".into());
        state.messages.push(Message::Assistant(text("Here.")));
        memory(memory_model.clone(), control)
            .after_agent(&mut state)
            .await;
        let prompt = memory_model.requests()[0].messages[0].text().to_owned();
        assert!(prompt.contains(
            "<conversation>\nEarlier (summarized): The user is Ada and wants weekly reports.\n\n\
             User: and now the &lt;chart&gt;"
        ), "{prompt}");
    }

    #[tokio::test]
    async fn a_run_waiting_for_input_learns_nothing_yet() {
        let control = Arc::new(RecordingControl::default());
        let memory_model = QueuedModel::new(vec![]);
        let question = calls(&[(
            "ask_clarification",
            json!({"question": "Which?", "clarification_type": "approach_choice"}),
        )]);
        let (agent, env) = test_doubles::agent(
            QueuedModel::new(vec![question]),
            vec![Arc::new(AskClarification)],
            vec![memory(memory_model.clone(), control.clone())],
            control.clone(),
        );
        let outcome = agent
            .run(&mut ThreadState::new("do it"), &env)
            .await
            .unwrap();
        assert_eq!(outcome.stop_reason, StopReason::InputRequired);
        assert!(memory_model.requests().is_empty());
    }

    #[tokio::test]
    async fn an_unusable_answer_is_ignored() {
        let control = Arc::new(RecordingControl::default());
        let memory_model = QueuedModel::new(vec![text("I think the user likes Rust.")]);
        let middleware = memory(memory_model.clone(), control.clone());
        let mut state = ThreadState::new("hi");
        state.messages.push(Message::Assistant(text("hello")));
        middleware.after_agent(&mut state).await;
        assert_eq!(memory_model.requests().len(), 1);
        assert!(control.memory_updates.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn failed_runs_and_empty_proposals_send_nothing() {
        let control = Arc::new(RecordingControl::default());
        let memory_model = QueuedModel::new(vec![text("{\"operations\": []}")]);
        let middleware = memory(memory_model.clone(), control.clone());
        let mut failed = ThreadState::new("hi");
        failed.messages.push(Message::Assistant(text("partial")));
        failed.stop_reason = Some(StopReason::ModelError);
        middleware.after_agent(&mut failed).await;
        assert!(memory_model.requests().is_empty());

        let mut done = ThreadState::new("hi");
        done.messages.push(Message::Assistant(text("hello")));
        middleware.after_agent(&mut done).await;
        assert_eq!(memory_model.requests().len(), 1);
        assert!(control.memory_updates.lock().unwrap().is_empty());
    }
}
