//! Clarification (always last in the chain): an `ask_clarification` call becomes the question
//! the loop hands to the control plane, which answers it (a terminal) or suspends the run
//! (a cluster Run, until `spec.responses` carries the answer). The tool body never runs here;
//! validation is `AskClarification`'s, the text the model sees `Clarification::render`.
//!
//! Where nobody can answer (`can_ask` false), the model is told to go on with its best
//! judgment instead, and the run continues.

use async_trait::async_trait;

use crate::agent::{Middleware, ToolNext, ToolRequest};
use crate::tools::ask_clarification::AskClarification;
use crate::tools::{Tool, ToolOutput};

/// The tool this middleware intercepts.
pub const TOOL: &str = "ask_clarification";
/// What the model reads when nobody can answer.
pub const DISABLED_MESSAGE: &str = "Clarification is disabled in this context — proceed with \
your best judgment and state your assumptions.";

/// Turns `ask_clarification` into an interrupt, or declines it where nobody can answer.
#[derive(Debug)]
pub struct ClarificationMiddleware {
    can_ask: bool,
}

impl ClarificationMiddleware {
    /// `can_ask`: someone can answer the question (the run plan's `clarification`); without,
    /// questions are declined.
    pub fn new(can_ask: bool) -> Self {
        ClarificationMiddleware { can_ask }
    }
}

#[async_trait]
impl Middleware for ClarificationMiddleware {
    fn name(&self) -> &'static str {
        "Clarification"
    }

    async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
        if request.call.name != TOOL {
            return next.run(request).await;
        }
        if !self.can_ask {
            return ToolOutput::ok(DISABLED_MESSAGE);
        }
        let arguments = match request.call.parse_arguments() {
            Ok(arguments) => arguments,
            Err(error) => {
                return ToolOutput::error(format!(
                    "Error: the arguments of {TOOL} are not valid JSON ({error}). Send a JSON \
                     object."
                ));
            }
        };
        // Through the tool itself, so its argument check and answer are the tool's own.
        AskClarification.call(arguments, &request.ctx).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herd_crds::report::StopReason;
    use serde_json::json;

    use super::*;
    use crate::middleware::shared::test_doubles::{FixedTool, run_tool};
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::{ThreadState, ToolStatus};

    fn question() -> serde_json::Value {
        json!({"question": "Which format?", "clarification_type": "approach_choice",
               "options": ["PDF", "HTML"]})
    }

    #[tokio::test]
    async fn a_question_becomes_an_interrupt_without_running_the_tool() {
        let tool = Arc::new(FixedTool::ok(TOOL, "tool body ran"));
        let output = run_tool(
            Arc::new(ClarificationMiddleware::new(true)),
            tool.clone(),
            TOOL,
            question(),
        )
        .await;
        assert_eq!(tool.calls(), 0);
        assert_eq!(output.status, ToolStatus::Success);
        assert_eq!(output.content, "🔀 Which format?\n  1. PDF\n  2. HTML");
        let asked = output.effect.interrupt.unwrap();
        assert_eq!(asked.id, "q-c1");
        assert_eq!(asked.options, vec!["PDF", "HTML"]);
    }

    #[tokio::test]
    async fn invalid_questions_are_errors_for_the_model() {
        let tool = Arc::new(FixedTool::ok(TOOL, "x"));
        let middleware = Arc::new(ClarificationMiddleware::new(true));
        let empty = run_tool(
            middleware.clone(),
            tool.clone(),
            TOOL,
            json!({"question": " ", "clarification_type": "missing_info"}),
        )
        .await;
        assert_eq!(empty.status, ToolStatus::Error);
        assert!(empty.effect.interrupt.is_none());
        let wrong = run_tool(middleware, tool, TOOL, json!({"question": "Q?"})).await;
        assert!(
            wrong
                .content
                .starts_with("Error: invalid arguments for ask_clarification")
        );
    }

    #[tokio::test]
    async fn other_tools_run_normally() {
        let tool = Arc::new(FixedTool::ok("bash", "ran"));
        let output = run_tool(
            Arc::new(ClarificationMiddleware::new(true)),
            tool.clone(),
            "bash",
            json!({}),
        )
        .await;
        assert_eq!(output.content, "ran");
        assert_eq!(tool.calls(), 1);
    }

    #[tokio::test]
    async fn an_interactive_run_suspends_on_the_question() {
        let control = Arc::new(RecordingControl::default());
        let (agent, env) = test_doubles::agent(
            QueuedModel::new(vec![calls(&[(TOOL, question())]), text("unreachable")]),
            vec![],
            vec![Arc::new(ClarificationMiddleware::new(true))],
            control.clone(),
        );
        let outcome = agent
            .run(&mut ThreadState::new("report"), &env)
            .await
            .unwrap();
        assert_eq!(outcome.stop_reason, StopReason::InputRequired);
        assert_eq!(outcome.question.unwrap().question, "Which format?");
        assert_eq!(control.questions.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_disabled_run_declines_and_goes_on() {
        let control = Arc::new(RecordingControl::default());
        let model = QueuedModel::new(vec![calls(&[(TOOL, question())]), text("Assuming PDF.")]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![],
            vec![Arc::new(ClarificationMiddleware::new(false))],
            control.clone(),
        );
        let outcome = agent
            .run(&mut ThreadState::new("report"), &env)
            .await
            .unwrap();
        assert_eq!(outcome.stop_reason, StopReason::Completed);
        assert_eq!(outcome.answer, "Assuming PDF.");
        assert!(control.questions.lock().unwrap().is_empty());
        let second = &model.requests()[1];
        assert_eq!(second.messages.last().unwrap().text(), DISABLED_MESSAGE);
    }
}
