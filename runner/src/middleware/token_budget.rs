//! TokenBudget (before_agent, after_model, wrap_model_call, after_agent): holds a run to
//! `runDefaults.tokenBudget`.
//!
//! Usage is the thread's running total (`state.usage`: provider-reported tokens of every model
//! call, resumed attempts included). At 80 % a warning is queued and delivered with the next
//! request only; at 100 % the answer's tool calls are stripped with a note and the run stops
//! with `StopReason::TokenBudgetExceeded`. An answer without tool calls is final anyway and is
//! left alone.
//!
//! Chain position (DeerFlow #30): right after LoopDetection, before TerminalResponse and the
//! finish-reason guards. `after_model` runs in reverse chain order, so this acts after
//! SafetyFinishReason and before LoopDetection and SubagentLimit: a budget stop strips the
//! calls first and those then see an answer without calls. UsageAndProgress sits earlier in the
//! chain, so its `after_model` runs after this one; usage it estimates in `wrap_model_call`
//! (for providers that report none) is already in `state.usage` when this runs. Its
//! `wrap_model_call` must be inside LLMErrorHandling so a retried request keeps the warning.

use crate::telemetry::{names, record_decision};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use herd_crds::report::StopReason;

use crate::agent::{Flow, Middleware, ModelCall, ModelNext, ModelResult};
use crate::thread::{MessageKind, ThreadState};

use super::shared::last_turn::{last_assistant_mut, settle_stop_reason, strip_tool_calls};
use super::shared::reminders::PendingReminders;

/// Share of the budget that triggers the warning, in percent (DeerFlow's `warn_threshold`
/// 0.8).
pub const WARN_PERCENT: u64 = 80;
/// Share of the budget that forces the stop, in percent (`hard_stop_threshold` 1.0).
pub const HARD_STOP_PERCENT: u64 = 100;

fn warning(used: u64, budget: u64) -> String {
    let percent = u128::from(used) * 100 / u128::from(budget.max(1));
    format!(
        "[TOKEN BUDGET WARNING] You have used {used} of your {budget} token budget ({percent}%). Wrap up your current work and produce a final answer. Avoid starting new tool calls unless absolutely necessary."
    )
}

fn exceeded(used: u64, budget: u64) -> String {
    format!(
        "[TOKEN BUDGET EXCEEDED] Token usage ({used}) has exceeded the run's budget ({budget}). Producing final answer with results collected so far."
    )
}

/// Whether `used` is at least `percent` % of `budget`.
fn reached(used: u64, budget: u64, percent: u64) -> bool {
    u128::from(used) * 100 >= u128::from(budget) * u128::from(percent)
}

/// Warns at 80 % of the run's token budget and stops the run at 100 %.
pub struct TokenBudget {
    max_tokens: u64,
    warned: Mutex<bool>,
    pending: PendingReminders,
}

impl TokenBudget {
    /// A budget of `max_tokens` input plus output tokens (at least 1).
    pub fn new(max_tokens: u64) -> Self {
        TokenBudget {
            max_tokens: max_tokens.max(1),
            warned: Mutex::new(false),
            pending: PendingReminders::new(MessageKind::BudgetWarning, 1),
        }
    }

    fn warned(&self) -> MutexGuard<'_, bool> {
        self.warned.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl Middleware for TokenBudget {
    fn name(&self) -> &'static str {
        "TokenBudget"
    }

    async fn before_agent(&self, _state: &mut ThreadState) -> Flow {
        *self.warned() = false;
        self.pending.clear();
        Flow::Continue
    }

    async fn after_model(&self, state: &mut ThreadState) -> Flow {
        let used = state.usage.total_tokens();
        let budget = self.max_tokens;
        if reached(used, budget, HARD_STOP_PERCENT) {
            let Some(message) = last_assistant_mut(state) else {
                return Flow::Continue;
            };
            if message.tool_calls.is_empty() {
                return Flow::Continue;
            }
            tracing::warn!(
                used,
                budget,
                "token budget exhausted: forcing a final answer"
            );
            record_decision(
                names::EVENT_BUDGET_STOP,
                &format!("{used} of {budget} tokens used"),
            );
            strip_tool_calls(message, &exceeded(used, budget));
            settle_stop_reason(state, StopReason::TokenBudgetExceeded);
            return Flow::Continue;
        }
        if reached(used, budget, WARN_PERCENT) {
            let mut warned = self.warned();
            if !*warned {
                *warned = true;
                tracing::info!(used, budget, "token budget warning");
                record_decision(
                    names::EVENT_BUDGET_WARNING,
                    &format!("{used} of {budget} tokens used"),
                );
                self.pending.push(warning(used, budget));
            }
        }
        Flow::Continue
    }

    async fn wrap_model_call(&self, call: ModelCall<'_>, next: ModelNext<'_>) -> ModelResult {
        self.pending.deliver(call, next).await
    }

    async fn after_agent(&self, _state: &mut ThreadState) {
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herd_crds::report::Usage;
    use serde_json::json;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::{AssistantMessage, Message};
    use crate::tools::write_todos::WriteTodos;

    fn costly(message: AssistantMessage, tokens: u64) -> AssistantMessage {
        AssistantMessage {
            usage: Some(Usage {
                input_tokens: tokens - 10,
                output_tokens: 10,
                ..Usage::default()
            }),
            ..message
        }
    }

    fn turn(index: usize) -> AssistantMessage {
        costly(
            calls(&[("write_todos", json!({"todos": [], "n": index}))]),
            30,
        )
    }

    #[tokio::test]
    async fn warns_at_eighty_percent_and_stops_at_the_budget() {
        let model = QueuedModel::new(vec![turn(1), turn(2), turn(3), turn(4), text("unreached")]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(WriteTodos)],
            vec![Arc::new(TokenBudget::new(100))],
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("t");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::TokenBudgetExceeded);
        assert_eq!(
            outcome.answer,
            "[TOKEN BUDGET EXCEEDED] Token usage (120) has exceeded the run's budget (100). Producing final answer with results collected so far."
        );
        let requests = model.requests();
        assert_eq!(requests.len(), 4);
        let warnings: Vec<Option<&str>> = requests
            .iter()
            .map(|request| {
                request
                    .messages
                    .last()
                    .map(Message::text)
                    .filter(|text| text.starts_with("[TOKEN BUDGET WARNING]"))
            })
            .collect();
        assert_eq!(
            warnings,
            [
                None,
                None,
                None,
                Some(
                    "[TOKEN BUDGET WARNING] You have used 90 of your 100 token budget (90%). Wrap up your current work and produce a final answer. Avoid starting new tool calls unless absolutely necessary."
                )
            ]
        );
        assert!(state.last_assistant().unwrap().tool_calls.is_empty());
    }

    #[tokio::test]
    async fn a_final_answer_over_budget_is_left_alone() {
        let budget = TokenBudget::new(10);
        let mut state = ThreadState::new("t");
        state.usage.input_tokens = 50;
        state.messages.push(Message::Assistant(text("the answer")));
        budget.after_model(&mut state).await;
        assert_eq!(state.stop_reason, None);
        assert_eq!(state.last_assistant().unwrap().content, "the answer");
    }

    #[tokio::test]
    async fn the_warning_is_given_once_per_run() {
        let budget = TokenBudget::new(100);
        let mut state = ThreadState::new("t");
        state.usage.input_tokens = 85;
        for _ in 0..3 {
            state.messages.push(Message::Assistant(turn(0)));
            budget.after_model(&mut state).await;
        }
        assert_eq!(budget.pending.len(), 1);
        budget.pending.clear();
        state.messages.push(Message::Assistant(turn(0)));
        budget.after_model(&mut state).await;
        assert!(budget.pending.is_empty(), "not warned twice");
        budget.before_agent(&mut state).await;
        state.messages.push(Message::Assistant(turn(0)));
        budget.after_model(&mut state).await;
        assert_eq!(budget.pending.len(), 1, "a new run warns again");
    }

    #[test]
    fn thresholds_do_not_overflow() {
        assert!(reached(u64::MAX, u64::MAX, HARD_STOP_PERCENT));
        assert!(!reached(79, 100, WARN_PERCENT));
        assert!(reached(80, 100, WARN_PERCENT));
    }
}
