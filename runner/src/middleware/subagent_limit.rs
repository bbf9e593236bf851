//! SubagentLimit (after_model): caps `task` delegations per answer (`maxConcurrent`) and per
//! run (`maxTotal`) by cutting the excess `task` calls from the model's answer, which is more
//! reliable than asking in the prompt.
//!
//! Allowed this answer: `min(max_concurrent, max_total − earlier delegations)`. Earlier
//! delegations are the larger of the `task` calls in earlier assistant messages and the
//! delegation ledger (`state.delegations`), so a summarized-away call still counts. Excess
//! calls are cut (first come, first kept) and a note says so; once the run's total is used up
//! the note is DeerFlow's "[SUBAGENT LIMIT REACHED]", and when no tool call is left the run
//! ends with `StopReason::SubagentLimitReached`.
//!
//! Chain position: after LoopDetection, before TokenBudget. `after_model` runs in reverse
//! chain order, so the safety and budget guards act on the answer first (when one of them
//! stripped every call, this sees no `task` call and neither cuts nor notes anything), and
//! this trims before LoopDetection counts: DeerFlow lists it before LoopDetection, whose
//! per-tool limit of 50 then counted calls this cuts and stopped a run that asked for 50
//! subagents at once. Only agents with the `task` tool get it.

use async_trait::async_trait;
use herd_crds::report::StopReason;
use herd_crds::rules::{MAX_CONCURRENT_RANGE, MAX_TOTAL_RANGE};

use crate::agent::{Flow, Middleware};
use crate::thread::{Message, ThreadState};

use super::shared::last_turn::{append_note, last_assistant_mut, settle_stop_reason};

/// The subagent tool's name.
const TASK_TOOL: &str = "task";

/// Appended when the run's total is used up.
pub const LIMIT_REACHED: &str = "[SUBAGENT LIMIT REACHED] The subagent delegation limit for this run has been reached. Continue using the subagent results already collected, execute remaining simple work directly, or summarize the remaining work instead of launching more subagents.";

fn concurrency_note(cut: usize, max_concurrent: u32) -> String {
    format!(
        "[SUBAGENT LIMIT] {cut} task call(s) were not run: at most {max_concurrent} subagents run per response. Delegate the rest in a later response if still needed."
    )
}

/// Cuts an answer's `task` calls to what `maxConcurrent` and the rest of `maxTotal` allow.
pub struct SubagentLimit {
    max_concurrent: u32,
    max_total: u32,
}

impl SubagentLimit {
    /// Caps of `max_concurrent` task calls per answer and `max_total` per run, each clamped
    /// to the range the Agent's validation allows.
    pub fn new(max_concurrent: u32, max_total: u32) -> Self {
        SubagentLimit {
            max_concurrent: max_concurrent
                .clamp(*MAX_CONCURRENT_RANGE.start(), *MAX_CONCURRENT_RANGE.end()),
            max_total: max_total.clamp(*MAX_TOTAL_RANGE.start(), *MAX_TOTAL_RANGE.end()),
        }
    }
}

/// Delegations made before the newest answer.
fn prior_delegations(state: &ThreadState) -> usize {
    let earlier = state.messages.len().saturating_sub(1);
    let in_messages = state.messages[..earlier]
        .iter()
        .filter_map(Message::as_assistant)
        .flat_map(|message| &message.tool_calls)
        .filter(|call| call.name == TASK_TOOL)
        .count();
    in_messages.max(state.delegations.len())
}

#[async_trait]
impl Middleware for SubagentLimit {
    fn name(&self) -> &'static str {
        "SubagentLimit"
    }

    async fn after_model(&self, state: &mut ThreadState) -> Flow {
        let prior = prior_delegations(state);
        let max_total = self.max_total as usize;
        let remaining = max_total.saturating_sub(prior);
        let allowed = remaining.min(self.max_concurrent as usize);
        let Some(message) = last_assistant_mut(state) else {
            return Flow::Continue;
        };
        let requested = message
            .tool_calls
            .iter()
            .filter(|call| call.name == TASK_TOOL)
            .count();
        if requested <= allowed {
            return Flow::Continue;
        }
        let mut kept = 0;
        message.tool_calls.retain(|call| {
            if call.name != TASK_TOOL {
                return true;
            }
            kept += 1;
            kept <= allowed
        });
        let cut = requested - allowed;
        tracing::warn!(
            cut,
            prior,
            max_concurrent = self.max_concurrent,
            max_total,
            "cut excess task calls"
        );
        let total_used_up = prior + allowed >= max_total;
        if total_used_up {
            append_note(message, LIMIT_REACHED);
        } else {
            append_note(message, &concurrency_note(cut, self.max_concurrent));
        }
        if total_used_up && message.tool_calls.is_empty() {
            settle_stop_reason(state, StopReason::SubagentLimitReached);
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::test_doubles::calls;
    use crate::thread::ToolCall;
    use crate::thread::state::{Delegation, DelegationStatus};

    fn task_calls(count: usize, extra: &[&str]) -> Message {
        let mut list: Vec<(&str, serde_json::Value)> = (0..count)
            .map(|i| ("task", json!({"description": format!("job {i}")})))
            .collect();
        list.extend(extra.iter().map(|name| (*name, json!({}))));
        Message::Assistant(calls(&list))
    }

    fn names(state: &ThreadState) -> Vec<String> {
        state
            .last_assistant()
            .unwrap()
            .tool_calls
            .iter()
            .map(|call: &ToolCall| call.name.clone())
            .collect()
    }

    #[tokio::test]
    async fn excess_calls_beyond_the_concurrency_cap_are_cut_with_a_note() {
        let limit = SubagentLimit::new(3, 6);
        let mut state = ThreadState::new("t");
        state.messages.push(task_calls(5, &["web_search"]));
        limit.after_model(&mut state).await;
        assert_eq!(names(&state), ["task", "task", "task", "web_search"]);
        let last = state.last_assistant().unwrap();
        assert_eq!(
            last.tool_calls[2].id, "call_2_task",
            "the first calls are kept"
        );
        assert!(
            last.content.starts_with("[SUBAGENT LIMIT] 2 task call(s)"),
            "{}",
            last.content
        );
        assert_eq!(state.stop_reason, None);
    }

    #[tokio::test]
    async fn the_run_total_counts_earlier_answers() {
        let limit = SubagentLimit::new(4, 6);
        let mut state = ThreadState::new("t");
        state.messages.push(task_calls(4, &[]));
        state.messages.push(task_calls(4, &["ls"]));
        limit.after_model(&mut state).await;
        assert_eq!(names(&state), ["task", "task", "ls"]);
        let last = state.last_assistant().unwrap();
        assert!(last.content.starts_with("[SUBAGENT LIMIT REACHED]"));
        assert_eq!(state.stop_reason, None, "other calls still run");
    }

    #[tokio::test]
    async fn an_exhausted_total_with_nothing_left_stops_the_run() {
        let limit = SubagentLimit::new(3, 2);
        let mut state = ThreadState::new("t");
        for id in ["a", "b"] {
            state.delegations.push(Delegation {
                id: id.into(),
                description: "d".into(),
                subagent_type: "general-purpose".into(),
                status: DelegationStatus::Completed,
                result_brief: None,
            });
        }
        state.messages.push(task_calls(1, &[]));
        limit.after_model(&mut state).await;
        assert!(names(&state).is_empty());
        assert_eq!(state.last_assistant().unwrap().content, LIMIT_REACHED);
        assert_eq!(state.stop_reason, Some(StopReason::SubagentLimitReached));
    }

    #[tokio::test]
    async fn answers_within_the_limits_are_untouched() {
        let limit = SubagentLimit::new(3, 6);
        let mut state = ThreadState::new("t");
        state.messages.push(task_calls(3, &["ls"]));
        let before = state.clone();
        limit.after_model(&mut state).await;
        assert_eq!(state, before);
    }

    #[test]
    fn caps_are_clamped() {
        let low = SubagentLimit::new(0, 0);
        assert_eq!((low.max_concurrent, low.max_total), (1, 1));
        let high = SubagentLimit::new(9, 500);
        assert_eq!((high.max_concurrent, high.max_total), (4, 50));
    }
}
