//! Live progress: a spinner with the current step when stderr is a terminal, plain lines on
//! stderr otherwise, or JSON events on stdout with `--json`.
//!
//! Text from the model and tools goes through `for_terminal` (or `json_line`) on its way out:
//! nothing they say can drive the terminal. Without a terminal there is no spinner to show
//! that a long model call is alive, so a heartbeat line says so every `HEARTBEAT`.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use console::Style;
use herd_crds::report::{StopReason, TodoStatus};
use herd_crds::terminal_text::{for_terminal, json_line};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::time::Instant;

use crate::agent::{AgentEvent, Observer};

/// How often a line reports a model call that is still streaming (plain-lines display only).
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// Where progress goes.
pub enum Display {
    /// A spinner with the current step; finished steps scroll above it.
    Terminal(ProgressBar),
    /// One line per step (logs, CI).
    Lines(Mutex<Box<dyn Write + Send>>),
    /// One JSON object per event.
    Json(Mutex<Box<dyn Write + Send>>),
}

/// A model call in flight, for the heartbeat.
struct Waiting {
    /// What is awaited: `the model (call 2)`, or a side call's `writing the title`.
    what: String,
    /// Whether it streams to the display (side calls do not: no characters to count).
    streams: bool,
    since: Instant,
    /// Characters of answer and reasoning streamed so far.
    streamed: usize,
    /// When the next heartbeat line is due.
    next: Instant,
}

/// Shows a run's events.
pub struct Progress {
    display: Display,
    /// Agents whose model call is streaming, by agent name.
    waiting: Mutex<BTreeMap<String, Waiting>>,
    heartbeat: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Marks (✓, ✗, warnings, questions) in colour: a terminal, and no `NO_COLOR`.
    colour: bool,
    /// Set while the terminal prompt waits: the spinner is hidden and lines print plainly.
    paused: AtomicBool,
}

/// How a line is marked.
#[derive(Clone, Copy)]
enum Mark {
    Plain,
    Done,
    Failed,
    Warning,
    Question,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Progress {
    /// Picks the display: JSON when asked, a spinner when stderr is a terminal (marks in
    /// `colour` if asked), else lines with a heartbeat every `HEARTBEAT`. Must be called
    /// inside the Tokio runtime.
    pub fn new(json: bool, terminal: bool, colour: bool) -> Arc<Self> {
        if json {
            return Self::with_display(Display::Json(Mutex::new(Box::new(std::io::stdout()))));
        }
        if terminal {
            let spinner = ProgressBar::new_spinner();
            spinner.set_style(
                ProgressStyle::with_template("{spinner} {elapsed:>4} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            spinner.enable_steady_tick(SPINNER_TICK);
            let mut progress = Self::with_display(Display::Terminal(spinner));
            if let Some(only) = Arc::get_mut(&mut progress) {
                only.colour = colour;
            }
            return progress;
        }
        let progress = Self::with_display(Display::Lines(Mutex::new(Box::new(std::io::stderr()))));
        progress.start_heartbeat(HEARTBEAT);
        progress
    }

    /// Progress on `display`, with no heartbeat.
    pub fn with_display(display: Display) -> Arc<Self> {
        Arc::new(Progress {
            display,
            waiting: Mutex::new(BTreeMap::new()),
            heartbeat: Mutex::new(None),
            colour: false,
            paused: AtomicBool::new(false),
        })
    }

    /// Hides the spinner until the guard is dropped, so that it does not draw over a prompt
    /// waiting for the user's answer; lines shown meanwhile print plainly above the prompt.
    pub fn pause(self: &Arc<Self>) -> PausedDisplay {
        if let Display::Terminal(spinner) = &self.display
            && !self.paused.swap(true, Ordering::SeqCst)
        {
            spinner.disable_steady_tick();
            spinner.set_draw_target(ProgressDrawTarget::hidden());
        }
        PausedDisplay(self.clone())
    }

    fn unpause(&self) {
        if let Display::Terminal(spinner) = &self.display
            && self.paused.swap(false, Ordering::SeqCst)
        {
            spinner.set_draw_target(ProgressDrawTarget::stderr());
            spinner.enable_steady_tick(SPINNER_TICK);
        }
    }

    /// Reports each streaming model call every `every`, until `finish`.
    pub fn start_heartbeat(self: &Arc<Self>, every: Duration) {
        let weak: Weak<Progress> = Arc::downgrade(self);
        // A second is fine enough for a heartbeat counted in tens of seconds.
        let tick = every.min(Duration::from_secs(1));
        let task = tokio::spawn(async move {
            let mut interval = tokio::time::interval(tick);
            loop {
                interval.tick().await;
                let Some(progress) = weak.upgrade() else {
                    return;
                };
                progress.beat(every);
            }
        });
        if let Some(old) = lock(&self.heartbeat).replace(task) {
            old.abort();
        }
    }

    /// Removes the spinner and stops the heartbeat before the answer is printed.
    pub fn finish(&self) {
        if let Some(task) = lock(&self.heartbeat).take() {
            task.abort();
        }
        if let Display::Terminal(spinner) = &self.display {
            spinner.finish_and_clear();
        }
    }

    fn beat(&self, every: Duration) {
        let now = Instant::now();
        let mut due = Vec::new();
        for (agent, waiting) in lock(&self.waiting).iter_mut() {
            if now >= waiting.next {
                waiting.next = now + every;
                let seconds = now.duration_since(waiting.since).as_secs();
                due.push(if waiting.streams {
                    format!(
                        "[{agent}] still {}: {seconds} s, {} characters so far",
                        waiting.what, waiting.streamed
                    )
                } else {
                    format!("[{agent}] still {}: {seconds} s", waiting.what)
                });
            }
        }
        for line in due {
            self.line(&line);
        }
    }

    /// Tracks which agents wait on a model call: from `ModelCall` until any event other than
    /// streamed text or a warning (a retry is still the same wait).
    fn track(&self, event: &AgentEvent, every: Duration) {
        let mut waiting = lock(&self.waiting);
        match event {
            AgentEvent::ModelCall { agent, call, .. } => {
                let now = Instant::now();
                waiting.insert(
                    agent.clone(),
                    Waiting {
                        what: format!("waiting for the model (call {call})"),
                        streams: true,
                        since: now,
                        streamed: 0,
                        next: now + every,
                    },
                );
            }
            // A side call is a wait of its own, after (or between) the loop's model calls.
            AgentEvent::SideCall { agent, call } => {
                let now = Instant::now();
                waiting.insert(
                    agent.clone(),
                    Waiting {
                        what: call.doing().to_owned(),
                        streams: false,
                        since: now,
                        streamed: 0,
                        next: now + every,
                    },
                );
            }
            AgentEvent::Text { agent, text } | AgentEvent::Reasoning { agent, text } => {
                if let Some(entry) = waiting.get_mut(agent) {
                    entry.streamed += text.chars().count();
                }
            }
            AgentEvent::Warning { .. } | AgentEvent::Sandbox { .. } => {}
            AgentEvent::ToolStarted { agent, .. }
            | AgentEvent::ToolFinished { agent, .. }
            | AgentEvent::Asked { agent, .. }
            | AgentEvent::Answered { agent, .. }
            | AgentEvent::ApprovalAsked { agent, .. }
            | AgentEvent::ApprovalDecided { agent, .. }
            | AgentEvent::Todos { agent, .. }
            | AgentEvent::Stopped { agent, .. } => {
                waiting.remove(agent);
            }
        }
    }

    fn line(&self, text: &str) {
        self.marked(Mark::Plain, text);
    }

    /// A line, in its mark's colour on a colour terminal (a finished tool green, a failed one
    /// red, a warning yellow, a question cyan). The colour is added after the text is
    /// neutralized: nothing from the model picks it.
    fn marked(&self, mark: Mark, text: &str) {
        let text = for_terminal(text);
        match &self.display {
            Display::Terminal(spinner) => {
                let text = self.paint(mark, &text);
                if self.paused.load(Ordering::SeqCst) {
                    eprintln!("{text}");
                } else {
                    spinner.println(text);
                }
            }
            Display::Lines(out) => {
                let _ = writeln!(lock(out), "{text}");
            }
            Display::Json(_) => {}
        }
    }

    fn paint(&self, mark: Mark, text: &str) -> String {
        if !self.colour {
            return text.to_owned();
        }
        let style = match mark {
            Mark::Plain => return text.to_owned(),
            Mark::Done => Style::new().green(),
            Mark::Failed => Style::new().red(),
            Mark::Warning => Style::new().yellow(),
            Mark::Question => Style::new().cyan().bold(),
        };
        style.force_styling(true).apply_to(text).to_string()
    }

    fn status(&self, text: &str) {
        if let Display::Terminal(spinner) = &self.display {
            spinner.set_message(for_terminal(text).into_owned());
        }
    }
}

/// Keeps the spinner hidden; dropping it shows the spinner again.
#[must_use = "the spinner shows again as soon as the guard is dropped"]
pub struct PausedDisplay(Arc<Progress>);

impl Drop for PausedDisplay {
    fn drop(&mut self) {
        self.0.unpause();
    }
}

/// How often the spinner redraws.
const SPINNER_TICK: Duration = Duration::from_millis(120);

/// An event as a `--json` line, its fields first, then the time it was shown (RFC 3339).
pub fn timed_json_line(event: &impl serde::Serialize) -> String {
    #[derive(serde::Serialize)]
    struct Timed<'a, T> {
        #[serde(flatten)]
        event: &'a T,
        time: String,
    }
    json_line(&Timed {
        event,
        time: jiff::Timestamp::now().to_string(),
    })
}

impl Observer for Progress {
    // Over 80 lines: one short arm per kind of event, so what the terminal shows for each
    // reads in one match.
    fn on_event(&self, event: AgentEvent) {
        if let Display::Json(out) = &self.display {
            let _ = writeln!(lock(out), "{}", timed_json_line(&event));
            return;
        }
        self.track(&event, HEARTBEAT);
        match event {
            AgentEvent::ModelCall { agent, call, .. } => {
                self.status(&format!("[{agent}] thinking (model call {call})"));
            }
            AgentEvent::SideCall { agent, call } => {
                self.status(&format!("[{agent}] {}", call.doing()));
            }
            AgentEvent::Text { agent, text } | AgentEvent::Reasoning { agent, text } => {
                if let Some(last) = text.lines().rfind(|l| !l.trim().is_empty()) {
                    self.status(&format!("[{agent}] {}", last.trim()));
                }
            }
            AgentEvent::ToolStarted {
                agent,
                name,
                summary,
                ..
            } => {
                self.line(&format!("[{agent}] → {name} {summary}"));
                self.status(&format!("[{agent}] running {name}"));
            }
            AgentEvent::ToolFinished {
                agent,
                name,
                ok,
                preview,
                ..
            } => {
                let (sign, mark) = if ok {
                    ("✓", Mark::Done)
                } else {
                    ("✗", Mark::Failed)
                };
                self.marked(mark, &format!("[{agent}] {sign} {name}: {preview}"));
            }
            AgentEvent::Asked { agent, question } => {
                self.marked(
                    Mark::Question,
                    &format!("[{agent}] ? {}", question.question),
                );
            }
            AgentEvent::Answered { agent, answer, .. } => {
                self.line(&format!("[{agent}] answer: {answer}"));
            }
            AgentEvent::ApprovalAsked { agent, requests } => {
                for request in requests {
                    self.marked(
                        Mark::Question,
                        &format!("[{agent}] ? approve {} ({})", request.summary(), request.id),
                    );
                }
            }
            AgentEvent::ApprovalDecided {
                agent,
                call,
                verdict,
            } => {
                let decided = match (verdict.decision, &verdict.reason) {
                    (herd_crds::approval::ApprovalDecision::Approve, _) => "approved".to_owned(),
                    (_, Some(reason)) => format!("denied ({reason})"),
                    (_, None) => "denied".to_owned(),
                };
                self.line(&format!("[{agent}] {decided}: {call}"));
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
                self.line(&text);
            }
            AgentEvent::Warning { agent, message } => {
                self.marked(Mark::Warning, &format!("[{agent}] warning: {message}"));
            }
            AgentEvent::Sandbox { mode, layers } => {
                let report = herd_crds::report::SandboxReport { layers };
                if report.layers.is_empty() {
                    self.line(&format!("sandbox: {mode}"));
                } else {
                    self.line(&format!("sandbox: {mode}: {}", report.summary()));
                }
            }
            // The lead's end is reported once, with the answer; a finished subagent's result
            // shows as its `task` call's.
            AgentEvent::Stopped { agent, reason } => {
                if agent != "lead" && reason != StopReason::Completed {
                    self.line(&format!("[{agent}] stopped: {reason:?}"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AgentRole;

    /// A writer whose bytes the test can read.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8_lossy(&lock(&self.0)).into_owned()
        }
    }

    /// A JSON line without its `time`, which every line ends with.
    fn untimed(line: &str) -> String {
        let time = regex::Regex::new(r#","time":"[^"]+"\}"#).unwrap();
        time.replace_all(line, "}").into_owned()
    }

    fn lines() -> (Arc<Progress>, Shared) {
        let out = Shared::default();
        let progress = Progress::with_display(Display::Lines(Mutex::new(Box::new(out.clone()))));
        (progress, out)
    }

    fn model_call(agent: &str, call: u32) -> AgentEvent {
        AgentEvent::ModelCall {
            agent: agent.into(),
            role: AgentRole::Lead,
            call,
        }
    }

    #[tokio::test]
    async fn the_prompt_hides_the_spinner_until_it_is_answered() {
        let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        let progress = Progress::with_display(Display::Terminal(spinner));
        {
            let _paused = progress.pause();
            let _again = progress.pause();
            assert!(progress.paused.load(Ordering::SeqCst));
        }
        assert!(!progress.paused.load(Ordering::SeqCst), "shown again");
        let (lines, _) = lines();
        drop(lines.pause());
        assert!(
            !lines.paused.load(Ordering::SeqCst),
            "only a spinner pauses"
        );
    }

    #[tokio::test]
    async fn marks_are_coloured_only_on_a_colour_terminal_and_json_lines_are_timed() {
        let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        let mut progress = Progress::with_display(Display::Terminal(spinner));
        assert_eq!(progress.paint(Mark::Failed, "✗ bash"), "✗ bash");
        Arc::get_mut(&mut progress).unwrap().colour = true;
        assert_eq!(
            progress.paint(Mark::Failed, "✗ bash"),
            "\u{1b}[31m✗ bash\u{1b}[0m"
        );
        assert_eq!(progress.paint(Mark::Plain, "plain"), "plain");
        let line: serde_json::Value =
            serde_json::from_str(&timed_json_line(&AgentEvent::Warning {
                agent: "lead".into(),
                message: "m".into(),
            }))
            .unwrap();
        assert_eq!(line["event"], "warning");
        assert!(
            line["time"]
                .as_str()
                .unwrap()
                .parse::<jiff::Timestamp>()
                .is_ok(),
            "{line}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_streaming_model_call_gets_a_line_every_heartbeat() {
        let (progress, out) = lines();
        progress.start_heartbeat(HEARTBEAT);
        progress.on_event(model_call("lead", 2));
        tokio::time::sleep(Duration::from_secs(5)).await;
        progress.on_event(AgentEvent::Text {
            agent: "lead".into(),
            text: "Half an ans".into(),
        });
        tokio::time::sleep(Duration::from_millis(25_500)).await;
        let text = out.text();
        let beats: Vec<&str> = text.lines().collect();
        assert_eq!(
            beats,
            [
                "[lead] still waiting for the model (call 2): 10 s, 11 characters so far",
                "[lead] still waiting for the model (call 2): 20 s, 11 characters so far",
                "[lead] still waiting for the model (call 2): 30 s, 11 characters so far",
            ]
        );
        // Once the answer is in (a tool starts), the heartbeat stops.
        progress.on_event(AgentEvent::ToolStarted {
            agent: "lead".into(),
            id: "c".into(),
            name: "ls".into(),
            summary: String::new(),
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(out.text().lines().count(), 4, "{}", out.text());
        progress.finish();
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_warning_is_still_the_same_wait_and_finish_stops_the_heartbeat() {
        let (progress, out) = lines();
        progress.start_heartbeat(HEARTBEAT);
        progress.on_event(model_call("lead", 1));
        progress.on_event(AgentEvent::Warning {
            agent: "lead".into(),
            message: "retrying".into(),
        });
        tokio::time::sleep(Duration::from_millis(10_500)).await;
        assert!(
            out.text()
                .ends_with("(call 1): 10 s, 0 characters so far\n")
        );
        progress.finish();
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(out.text().lines().count(), 2, "{}", out.text());
    }

    #[tokio::test(start_paused = true)]
    async fn a_side_call_replaces_the_model_wait_and_says_what_it_waits_for() {
        let (progress, out) = lines();
        progress.start_heartbeat(HEARTBEAT);
        progress.on_event(model_call("lead", 1));
        progress.on_event(AgentEvent::Text {
            agent: "lead".into(),
            text: "Done.".into(),
        });
        progress.on_event(AgentEvent::SideCall {
            agent: "lead".into(),
            call: crate::agent::SideCallKind::Title,
        });
        tokio::time::sleep(Duration::from_millis(10_500)).await;
        progress.on_event(AgentEvent::SideCall {
            agent: "lead".into(),
            call: crate::agent::SideCallKind::Memory,
        });
        tokio::time::sleep(Duration::from_millis(11_000)).await;
        assert_eq!(
            out.text(),
            "[lead] still writing the title: 10 s\n[lead] still updating memory: 10 s\n"
        );
        progress.finish();

        let out = Shared::default();
        let json = Progress::with_display(Display::Json(Mutex::new(Box::new(out.clone()))));
        json.on_event(AgentEvent::SideCall {
            agent: "lead".into(),
            call: crate::agent::SideCallKind::Summary,
        });
        assert_eq!(
            untimed(&out.text()),
            "{\"event\":\"side_call\",\"agent\":\"lead\",\"call\":\"summary\"}\n"
        );
    }

    #[test]
    fn lines_neutralize_terminal_escapes() {
        let (progress, out) = lines();
        progress.on_event(AgentEvent::ToolFinished {
            agent: "lead".into(),
            id: "c".into(),
            name: "bash".into(),
            ok: true,
            preview: "\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}gnp.exe".into(),
        });
        assert_eq!(
            out.text(),
            "[lead] ✓ bash: \\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{202e}gnp.exe\n"
        );
    }

    #[test]
    fn json_keeps_the_text_json_escaped() {
        let out = Shared::default();
        let progress = Progress::with_display(Display::Json(Mutex::new(Box::new(out.clone()))));
        progress.on_event(AgentEvent::Text {
            agent: "lead".into(),
            text: "\u{1b}[31mred\u{9b}\u{2066}".into(),
        });
        assert_eq!(
            untimed(&out.text()),
            "{\"event\":\"text\",\"agent\":\"lead\",\"text\":\"\\u001b[31mred\\u009b\\u2066\"}\n"
        );
    }

    #[test]
    fn only_subagents_cut_short_report_their_stop() {
        let (progress, out) = lines();
        for (agent, reason) in [
            ("lead", StopReason::LoopDetected),
            ("general-purpose#c1", StopReason::Completed),
            ("general-purpose#c2", StopReason::ModelCallLimit),
        ] {
            progress.on_event(AgentEvent::Stopped {
                agent: agent.into(),
                reason,
            });
        }
        assert_eq!(out.text(), "[general-purpose#c2] stopped: ModelCallLimit\n");
    }
}
