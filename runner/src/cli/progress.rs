//! Live progress on stderr: a spinner with the current step on a terminal, plain lines
//! otherwise, or JSON events on stdout with `--json`.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use herd_crds::report::TodoStatus;
use indicatif::{ProgressBar, ProgressStyle};

use crate::agent::{AgentEvent, Observer};

/// How progress is shown.
pub enum Progress {
    /// A spinner with the current step; finished steps scroll above it.
    Terminal(ProgressBar),
    /// One line per step on stderr (logs, CI).
    Lines(Mutex<std::io::Stderr>),
    /// One JSON object per event on stdout.
    Json(Mutex<std::io::Stdout>),
}

impl Progress {
    /// Picks the display: JSON when asked, a spinner when stderr is a terminal, else lines.
    pub fn new(json: bool, terminal: bool) -> Self {
        if json {
            return Progress::Json(Mutex::new(std::io::stdout()));
        }
        if terminal {
            let spinner = ProgressBar::new_spinner();
            spinner.set_style(
                ProgressStyle::with_template("{spinner} {elapsed:>4} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            spinner.enable_steady_tick(Duration::from_millis(120));
            return Progress::Terminal(spinner);
        }
        Progress::Lines(Mutex::new(std::io::stderr()))
    }

    /// Removes the spinner before the answer is printed.
    pub fn finish(&self) {
        if let Progress::Terminal(spinner) = self {
            spinner.finish_and_clear();
        }
    }

    fn line(&self, text: String) {
        match self {
            Progress::Terminal(spinner) => spinner.println(text),
            Progress::Lines(stderr) => {
                if let Ok(mut stderr) = stderr.lock() {
                    let _ = writeln!(stderr, "{text}");
                }
            }
            Progress::Json(_) => {}
        }
    }

    fn status(&self, text: String) {
        if let Progress::Terminal(spinner) = self {
            spinner.set_message(text);
        }
    }
}

impl Observer for Progress {
    fn on_event(&self, event: AgentEvent) {
        if let Progress::Json(stdout) = self {
            if let (Ok(mut stdout), Ok(json)) = (stdout.lock(), serde_json::to_string(&event)) {
                let _ = writeln!(stdout, "{json}");
            }
            return;
        }
        match event {
            AgentEvent::ModelCall { agent, call, .. } => {
                self.status(format!("[{agent}] thinking (model call {call})"));
            }
            AgentEvent::Text { agent, text } | AgentEvent::Reasoning { agent, text } => {
                if let Some(last) = text.lines().rfind(|l| !l.trim().is_empty()) {
                    self.status(format!("[{agent}] {}", last.trim()));
                }
            }
            AgentEvent::ToolStarted {
                agent,
                name,
                summary,
                ..
            } => {
                self.line(format!("[{agent}] → {name} {summary}"));
                self.status(format!("[{agent}] running {name}"));
            }
            AgentEvent::ToolFinished {
                agent,
                name,
                ok,
                preview,
                ..
            } => {
                let mark = if ok { "✓" } else { "✗" };
                self.line(format!("[{agent}] {mark} {name}: {preview}"));
            }
            AgentEvent::Asked { agent, question } => {
                self.line(format!("[{agent}] ? {}", question.question));
            }
            AgentEvent::Answered { agent, answer, .. } => {
                self.line(format!("[{agent}] answer: {answer}"));
            }
            AgentEvent::Todos { agent, todos } => {
                let mut text = format!("[{agent}] plan:");
                for todo in todos {
                    let mark = match todo.status {
                        TodoStatus::Completed => "[x]",
                        TodoStatus::InProgress => "[>]",
                        TodoStatus::Pending => "[ ]",
                    };
                    text.push_str(&format!("\n    {mark} {}", todo.content));
                }
                self.line(text);
            }
            AgentEvent::Warning { agent, message } => {
                self.line(format!("[{agent}] warning: {message}"));
            }
            AgentEvent::Stopped { agent, reason } => {
                self.line(format!("[{agent}] stopped: {reason:?}"));
            }
        }
    }
}
