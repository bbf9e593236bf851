//! Asks clarification questions at the terminal.

use std::io::{BufRead, Write};

use async_trait::async_trait;
use herd_crds::report::Clarification;

use super::terminal_text::for_terminal;
use crate::control::local::Prompter;
use crate::tools::ask_clarification::AskClarification;

/// Reads answers from stdin; a number picks an offered option.
pub struct TerminalPrompter;

/// The answer a typed line means: an option's text for its number, else the line itself.
pub fn interpret_answer(question: &Clarification, line: &str) -> String {
    let line = line.trim();
    line.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|index| question.options.get(index))
        .cloned()
        .unwrap_or_else(|| line.to_owned())
}

#[async_trait]
impl Prompter for TerminalPrompter {
    async fn ask(&self, question: &Clarification) -> Option<String> {
        let question = question.clone();
        tokio::task::spawn_blocking(move || {
            let mut stderr = std::io::stderr();
            let text = AskClarification::render(&question);
            let _ = writeln!(stderr, "\n{}", for_terminal(&text));
            let _ = write!(stderr, "> ");
            let _ = stderr.flush();
            let mut line = String::new();
            match std::io::stdin().lock().read_line(&mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(interpret_answer(&question, &line)),
            }
        })
        .await
        .ok()
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::report::ClarificationType;

    use super::*;

    #[test]
    fn numbers_pick_options_and_text_passes_through() {
        let question = Clarification {
            id: "q".into(),
            question: "Format?".into(),
            kind: ClarificationType::ApproachChoice,
            context: None,
            options: vec!["PDF".into(), "HTML".into()],
            asked_at: None,
        };
        assert_eq!(interpret_answer(&question, "2\n"), "HTML");
        assert_eq!(interpret_answer(&question, "3"), "3");
        assert_eq!(interpret_answer(&question, "0"), "0");
        assert_eq!(interpret_answer(&question, " Markdown "), "Markdown");
    }
}
