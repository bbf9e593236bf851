//! Asks clarification questions at the terminal.

use std::io::{BufRead, Write};

use async_trait::async_trait;
use herd_crds::report::Clarification;
use herd_crds::terminal_text::for_terminal;

use crate::control::local::Prompter;

/// Reads answers from stdin; a number picks an offered option.
pub struct TerminalPrompter;

#[async_trait]
impl Prompter for TerminalPrompter {
    async fn ask(&self, question: &Clarification) -> Option<String> {
        let question = question.clone();
        tokio::task::spawn_blocking(move || {
            let mut stderr = std::io::stderr();
            let text = question.render();
            let _ = writeln!(stderr, "\n{}", for_terminal(&text));
            let _ = write!(stderr, "> ");
            let _ = stderr.flush();
            let mut line = String::new();
            match std::io::stdin().lock().read_line(&mut line) {
                Ok(0) | Err(_) => None,
                // An empty line is an empty answer: the run goes on.
                Ok(_) => Some(question.answer_from(&line).unwrap_or_default()),
            }
        })
        .await
        .ok()
        .flatten()
    }
}
