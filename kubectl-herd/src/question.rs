//! A question of the agent shown to a person, and what a typed line answers: a number picks
//! one of the offered options, anything else is the answer itself.

use herd_crds::report::{Clarification, ClarificationType};

use crate::terminal_text::for_terminal;

/// The question as `herd-runner run` shows it: the context, the question after an icon of its
/// kind, the options numbered; made safe to print.
pub fn render(question: &Clarification) -> String {
    let icon = match question.kind {
        ClarificationType::MissingInfo => "❓",
        ClarificationType::AmbiguousRequirement => "🤔",
        ClarificationType::ApproachChoice => "🔀",
        ClarificationType::RiskConfirmation => "⚠️",
        ClarificationType::Suggestion => "💡",
    };
    let mut text = String::new();
    if let Some(context) = &question.context {
        text.push_str(&for_terminal(context));
        text.push_str("\n\n");
    }
    text.push_str(icon);
    text.push(' ');
    text.push_str(&for_terminal(&question.question));
    for (index, option) in question.options.iter().enumerate() {
        text.push_str(&format!("\n  {}. {}", index + 1, for_terminal(option)));
    }
    text
}

/// The answer a typed line means: an option's text for its number, else the trimmed line;
/// `None` for an empty line (no answer given).
pub fn interpret(question: &Clarification, line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let picked = line
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|index| question.options.get(index));
    Some(picked.cloned().unwrap_or_else(|| line.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(options: &[&str], context: Option<&str>) -> Clarification {
        Clarification {
            id: "q".into(),
            question: "Format?".into(),
            kind: ClarificationType::ApproachChoice,
            context: context.map(str::to_owned),
            options: options.iter().map(|o| (*o).to_owned()).collect(),
            asked_at: None,
        }
    }

    #[test]
    fn renders_context_icon_question_and_numbered_options() {
        assert_eq!(
            render(&question(&["PDF", "HTML"], Some("Two ways work."))),
            "Two ways work.\n\n🔀 Format?\n  1. PDF\n  2. HTML"
        );
        assert_eq!(render(&question(&[], None)), "🔀 Format?");
        assert!(!render(&question(&["\u{1b}[2J"], None)).contains('\u{1b}'));
    }

    #[test]
    fn numbers_pick_options_and_text_passes_through() {
        let q = question(&["PDF", "HTML"], None);
        assert_eq!(interpret(&q, "2\n").as_deref(), Some("HTML"));
        assert_eq!(interpret(&q, "3").as_deref(), Some("3"));
        assert_eq!(interpret(&q, "0").as_deref(), Some("0"));
        assert_eq!(interpret(&q, " Markdown ").as_deref(), Some("Markdown"));
        assert_eq!(interpret(&q, "  \n"), None);
    }
}
