//! ToolApproval: a tool call the Agent's (and Run's) `approval` rules name does not run until
//! a person says yes. The call becomes an approval request (the tool result is held back);
//! the loop asks for all of a turn's requests together (`ControlPlane::ask_approval`, the
//! same wait as a clarification question's), records each verdict in the thread, and sends
//! the calls through the chain again: an approved call then runs as the model sent it, a
//! denied one returns `denied by a person: <reason>` and the run goes on.
//!
//! It sits right inside SandboxAudit (see `chain.rs`): a command the audit blocks is refused
//! without asking anyone (nobody may approve it), and a person is asked only about what would
//! otherwise run.

use async_trait::async_trait;
use herd_crds::approval::{ApprovalDecision, ApprovalRequest, ApprovalRules, denied_message};

use super::clarification::TOOL as CLARIFICATION_TOOL;
use crate::agent::{Middleware, ToolNext, ToolRequest};
use crate::tools::ToolOutput;

/// What the model would read of a held call, were it ever shown (the loop replaces it with
/// the call's real result or its denial before the next model call).
pub const HELD_MESSAGE: &str = "This call waits for a person's approval.";

/// Holds the calls the approval rules name until a person decides.
#[derive(Debug)]
pub struct ToolApproval {
    rules: ApprovalRules,
}

impl ToolApproval {
    /// A middleware asking for approval of the calls `rules` name.
    pub fn new(rules: ApprovalRules) -> Self {
        ToolApproval { rules }
    }
}

#[async_trait]
impl Middleware for ToolApproval {
    fn name(&self) -> &'static str {
        "ToolApproval"
    }

    async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
        let call = &request.call;
        // A question is no action: it is asked, never held.
        if call.name == CLARIFICATION_TOOL || !self.rules.requires(&call.name, &call.arguments) {
            return next.run(request).await;
        }
        match request.state.approval_verdicts.get(&call.id) {
            Some(verdict) if verdict.decision == ApprovalDecision::Approve => {
                next.run(request).await
            }
            Some(verdict) => ToolOutput::error(denied_message(verdict.reason.as_deref())),
            None => {
                let mut held = ToolOutput::ok(HELD_MESSAGE);
                held.effect.approval =
                    Some(ApprovalRequest::new(&call.id, &call.name, &call.arguments));
                held
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herd_crds::approval::{ApprovalSpec, Verdict};
    use herd_crds::report::StopReason;
    use serde_json::json;

    use super::*;
    use crate::agent::RunOutcome;
    use crate::middleware::shared::test_doubles::{FixedTool, run_tool};
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::{Message, ThreadState, ToolStatus};

    fn rules(tools: &[&str], commands: &[&str]) -> ApprovalRules {
        ApprovalSpec {
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            commands: commands.iter().map(|c| (*c).to_owned()).collect(),
            ..ApprovalSpec::default()
        }
        .compile()
        .unwrap()
    }

    fn middleware(commands: &[&str]) -> Arc<dyn Middleware> {
        Arc::new(ToolApproval::new(rules(&[], commands)))
    }

    fn tool_results(state: &ThreadState) -> Vec<(String, String, ToolStatus)> {
        state
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(t) => Some((t.tool_call_id.clone(), t.content.clone(), t.status)),
                _ => None,
            })
            .collect()
    }

    /// Runs a thread whose model calls `bash` with both `commands` in one turn, then answers
    /// `answer`; commands matching `pattern` need the approval of `control`.
    async fn run_one_turn(
        bash: &Arc<FixedTool>,
        control: Arc<RecordingControl>,
        pattern: &str,
        commands: [&str; 2],
        answer: &str,
    ) -> (Arc<QueuedModel>, ThreadState, RunOutcome) {
        let model = QueuedModel::new(vec![
            calls(&commands.map(|command| ("bash", json!({"command": command})))),
            text(answer),
        ]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![bash.clone()],
            vec![middleware(&[pattern])],
            control,
        );
        let mut state = ThreadState::new("run the commands");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        (model, state, outcome)
    }

    #[tokio::test]
    async fn a_matching_call_is_held_with_its_request_and_others_run() {
        let tool = Arc::new(FixedTool::ok("bash", "ran"));
        let run_bash = |command: &str| {
            run_tool(
                middleware(&["rm -rf"]),
                tool.clone(),
                "bash",
                json!({"command": command}),
            )
        };
        let held = run_bash("rm -rf build/").await;
        assert_eq!(tool.calls(), 0, "the tool did not run");
        let request = held.effect.approval.unwrap();
        assert_eq!(request.tool, "bash");
        assert_eq!(request.summary(), "bash: rm -rf build/");
        assert_eq!(request.id, "a-c1");
        let free = run_bash("ls").await;
        assert_eq!(free.content, "ran");
        assert!(free.effect.approval.is_none());
    }

    /// A scripted model calls bash twice in one turn, both needing approval: the run waits
    /// for both together; the first is denied (the model reads why), the second approved (it
    /// runs), and the model goes on.
    #[tokio::test]
    async fn a_turns_calls_are_asked_together_then_denied_or_run() {
        let bash = Arc::new(FixedTool::ok("bash", "deleted"));
        let control = Arc::new(RecordingControl::default());
        control.verdicts.lock().unwrap().extend([
            Verdict::deny(Some("keep the cache".into())),
            Verdict::approve(),
        ]);
        let (model, state, outcome) = run_one_turn(
            &bash,
            control.clone(),
            "^rm ",
            ["rm -rf cache/", "rm -rf build/"],
            "Removed build/ only.",
        )
        .await;
        assert_eq!(outcome.stop_reason, StopReason::Completed);
        let asked = control.approvals.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "one ask for the whole turn");
        assert_eq!(asked[0].len(), 2);
        assert_eq!(bash.calls(), 1, "only the approved call ran");
        let results = tool_results(&state);
        assert_eq!(results.len(), 2);
        assert_eq!(results[0].1, "denied by a person: keep the cache");
        assert_eq!(results[0].2, ToolStatus::Error);
        assert_eq!(
            (results[1].1.as_str(), results[1].2),
            ("deleted", ToolStatus::Success)
        );
        // The model's second request carries both results, the denial first.
        let second = &model.requests()[1];
        assert!(
            second
                .messages
                .iter()
                .any(|m| m.text() == "denied by a person: keep the cache")
        );
        assert!(state.awaiting_approval.is_empty());
    }

    #[tokio::test]
    async fn an_undecided_request_suspends_and_the_resumed_thread_settles_it() {
        let bash = Arc::new(FixedTool::ok("bash", "pushed"));
        let waiting = Arc::new(RecordingControl::default());
        let (model, mut state, outcome) = run_one_turn(
            &bash,
            waiting,
            "git push",
            ["git push", "git status"],
            "Pushed.",
        )
        .await;
        assert_eq!(outcome.stop_reason, StopReason::InputRequired);
        assert_eq!(bash.calls(), 1, "git status ran, git push waits");
        assert_eq!(state.awaiting_approval.len(), 1);
        assert_eq!(
            tool_results(&state).len(),
            1,
            "the held call has no result yet"
        );

        // Resumed (the checkpoint's thread) with the decision at hand: the held call runs
        // first, then the model goes on.
        let decided = Arc::new(RecordingControl::default());
        decided
            .verdicts
            .lock()
            .unwrap()
            .push_back(Verdict::approve());
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![bash.clone()],
            vec![middleware(&["git push"])],
            decided,
        );
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::Completed);
        assert_eq!(bash.calls(), 2);
        assert_eq!(tool_results(&state).len(), 2);
        assert_eq!(model.requests().len(), 2, "no model call while waiting");
    }
}
