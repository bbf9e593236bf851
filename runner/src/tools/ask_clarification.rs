//! `ask_clarification`: the model asks the user a question and the run waits for the answer.

use async_trait::async_trait;
use herd_crds::report::{Clarification, ClarificationType};
use herd_sandbox::truncation::truncate_chars;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolContext, ToolOutput, TypedTool};

/// Most options offered with one question (DeerFlow's form limit).
pub const MAX_OPTIONS: usize = 24;
/// Longest option text.
pub const MAX_OPTION_CHARS: usize = 200;
/// Longest question or context.
pub const MAX_TEXT_CHARS: usize = 4096;

/// Arguments of `ask_clarification`.
#[derive(Deserialize, JsonSchema)]
pub struct AskClarificationArgs {
    /// The question, specific and answerable.
    pub question: String,
    /// Why you ask.
    pub clarification_type: ClarificationType,
    /// What you know so far and why it is not enough.
    #[serde(default)]
    pub context: Option<String>,
    /// Choices to offer, if the answer is one of a few.
    #[serde(default)]
    pub options: Option<Vec<String>>,
}

/// The `ask_clarification` tool.
pub struct AskClarification;

impl AskClarification {
    /// Turns validated arguments into the question the control plane reports.
    pub fn question(call_id: &str, args: AskClarificationArgs) -> Result<Clarification, String> {
        let question = args.question.trim();
        if question.is_empty() {
            return Err("Error: the question is empty.".into());
        }
        let options = args.options.unwrap_or_default();
        if options.len() > MAX_OPTIONS {
            return Err(format!("Error: at most {MAX_OPTIONS} options are allowed."));
        }
        if options.iter().any(|o| o.chars().count() > MAX_OPTION_CHARS) {
            return Err(format!(
                "Error: each option must be at most {MAX_OPTION_CHARS} characters."
            ));
        }
        Ok(Clarification {
            id: question_id(call_id),
            question: truncate_chars(question, MAX_TEXT_CHARS),
            kind: args.clarification_type,
            context: args
                .context
                .map(|c| truncate_chars(c.trim(), MAX_TEXT_CHARS)),
            options,
            asked_at: Some(jiff::Timestamp::now().to_string()),
        })
    }

    /// The question `args` ask, as the output that interrupts the run with it; arguments
    /// that do not make a question are an error for the model.
    pub fn ask(call_id: &str, args: AskClarificationArgs) -> ToolOutput {
        match AskClarification::question(call_id, args) {
            Ok(question) => {
                let mut output = ToolOutput::ok(question.render());
                output.effect.interrupt = Some(question);
                output
            }
            Err(message) => ToolOutput::error(message),
        }
    }
}

/// Question ids go into `spec.responses[].id` (≤ 64 characters).
fn question_id(call_id: &str) -> String {
    let cleaned: String = call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(48)
        .collect();
    if cleaned.is_empty() {
        "q".to_owned()
    } else {
        format!("q-{cleaned}")
    }
}

#[async_trait]
impl TypedTool for AskClarification {
    const NAME: &'static str = "ask_clarification";
    // When to ask is in the system prompt's `<clarification_system>`; this only says what it does.
    const DESCRIPTION: &'static str = "Ask the user a question; the run pauses until they answer.";
    type Args = AskClarificationArgs;

    async fn run(&self, args: AskClarificationArgs, ctx: &ToolContext) -> ToolOutput {
        AskClarification::ask(&ctx.call_id, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(question: &str, options: Vec<&str>) -> AskClarificationArgs {
        AskClarificationArgs {
            question: question.into(),
            clarification_type: ClarificationType::ApproachChoice,
            context: Some("Two ways work.".into()),
            options: Some(options.into_iter().map(String::from).collect()),
        }
    }

    #[test]
    fn renders_context_icon_question_and_numbered_options() {
        let q = AskClarification::question("call_1", args("Which one?", vec!["A", "B"])).unwrap();
        assert_eq!(q.id, "q-call_1");
        assert_eq!(
            q.render(),
            "Two ways work.\n\n🔀 Which one?\n  1. A\n  2. B"
        );
    }

    #[test]
    fn rejects_empty_questions_and_too_many_options() {
        assert!(AskClarification::question("c", args("  ", vec![])).is_err());
        let many: Vec<&str> = std::iter::repeat_n("x", MAX_OPTIONS + 1).collect();
        assert!(AskClarification::question("c", args("Q?", many)).is_err());
    }

    #[test]
    fn question_ids_are_short_and_label_safe() {
        let id = question_id(&format!("{}/!{}", "a".repeat(80), "b"));
        assert!(id.len() <= 64);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_eq!(question_id("!!"), "q");
    }
}
