//! Asks clarification questions, and whether held tool calls may run, at the terminal.

use std::io::{BufRead, Write};
use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::approval::{ApprovalRequest, Verdict};
use herd_crds::report::Clarification;
use herd_crds::terminal_text::for_terminal;

use super::progress::Progress;
use crate::control::local::Prompter;

/// Reads answers from stdin; a number picks an offered option. The progress display's
/// spinner is hidden while it waits, so that it does not draw over the prompt.
pub struct TerminalPrompter {
    progress: Arc<Progress>,
}

impl TerminalPrompter {
    /// A prompter that pauses `progress` while it asks.
    pub fn over(progress: Arc<Progress>) -> Self {
        TerminalPrompter { progress }
    }
}

#[async_trait]
impl Prompter for TerminalPrompter {
    async fn ask(&self, question: &Clarification) -> Option<String> {
        let question = question.clone();
        let _paused = self.progress.pause();
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

    /// `run `bash: rm -rf build/`? [y/N/reason]`: `y` approves; Enter or `n` denies; any other
    /// text denies with it as the reason the model reads.
    async fn approve(&self, request: &ApprovalRequest) -> Option<Verdict> {
        let call = request.summary();
        let _paused = self.progress.pause();
        tokio::task::spawn_blocking(move || {
            let mut stderr = std::io::stderr();
            let _ = write!(stderr, "\nrun `{}`? [y/N/reason] ", for_terminal(&call));
            let _ = stderr.flush();
            let mut line = String::new();
            match std::io::stdin().lock().read_line(&mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(Verdict::from_line(&line)),
            }
        })
        .await
        .ok()
        .flatten()
    }
}
