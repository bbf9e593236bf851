//! `--follow` and `kubectl herd follow RUN`: watches the Run and shows it live — phase, todos,
//! children and their states, tokens, the question when one is asked (answered at the terminal
//! when someone is there), the answer at the end — with a spinner on a terminal and plain
//! lines otherwise. The watch is kube's watcher: when it expires (410 Gone) it lists again.

use std::collections::HashSet;
use std::io::Write;
use std::time::Duration;

use futures::StreamExt;
use herd_crds::approval::{ApprovalRequest, Verdict};
use herd_crds::reason::run::{AGENT_NOT_FOUND, AGENT_NOT_READY};
use herd_crds::run::Run;
use herd_crds::terminal_text::{for_terminal, json_line, one_line};
use indicatif::{ProgressBar, ProgressStyle};
use kube::runtime::{WatchStreamExt, watcher};

use crate::answer::answer;
use crate::approve::{decide, decided_line, pending_approvals};
use crate::connect::Cluster;
use crate::error::CliError;
use crate::io::{BoxFuture, Io, Prompt};
use crate::outcome::{EXIT_FAILED, EXIT_INPUT_REQUIRED, EXIT_INTERRUPTED, Outcome, outcome};
use crate::presence::{Presence, Seen};
use crate::result::{print_answer, read_answer, stopped};
use crate::runs::runs;
use crate::view::{View, changes, phase_name, status_line, usage_line, view};

/// How much `follow` shows on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Everything that changes (`follow`, `run --follow`).
    Live,
    /// Nothing until the end, and a Run waiting for its Agent is an error (`run --wait`).
    Quiet,
}

/// Where the live view goes: a spinner on a terminal (lines scroll above it), else lines;
/// nothing at all when quiet.
struct Display {
    spinner: Option<ProgressBar>,
    quiet: bool,
    /// When following began: a spinner made again after a question keeps counting from it.
    since: std::time::Instant,
}

impl Display {
    fn new(terminal: bool, quiet: bool, since: std::time::Instant) -> Self {
        let spinner = (terminal && !quiet).then(|| {
            let spinner = ProgressBar::new_spinner().with_elapsed(since.elapsed());
            spinner.set_style(
                ProgressStyle::with_template("{spinner} {elapsed:>4} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            spinner.enable_steady_tick(Duration::from_millis(120));
            spinner
        });
        Display {
            spinner,
            quiet,
            since,
        }
    }

    /// Writes a line of progress, with the spinner out of the way; nothing when quiet.
    fn progress(&self, out: &mut (dyn Write + Send), text: &str) {
        if !self.quiet {
            self.write(out, text);
        }
    }

    /// Writes with the spinner out of the way.
    fn write(&self, out: &mut (dyn Write + Send), text: &str) {
        match &self.spinner {
            Some(spinner) => spinner.suspend(|| {
                let _ = writeln!(out, "{text}");
            }),
            None => {
                let _ = writeln!(out, "{text}");
            }
        }
    }

    fn status(&self, text: String) {
        if let Some(spinner) = &self.spinner {
            spinner.set_message(text);
        }
    }

    fn done(&self) {
        if let Some(spinner) = &self.spinner {
            spinner.finish_and_clear();
        }
    }

    /// Clears the spinner away; whether there was one.
    fn pause(&mut self) -> bool {
        match self.spinner.take() {
            Some(spinner) => {
                spinner.finish_and_clear();
                true
            }
            None => false,
        }
    }
}

/// What the follower does after an event.
enum Step {
    Continue,
    Exit(u8),
}

/// The follower's memory between events.
struct Follower<'c> {
    cluster: &'c Cluster,
    name: String,
    display: Display,
    shown: Option<View>,
    /// Questions shown at the terminal already (answered there, or left for someone else).
    asked: HashSet<String>,
    last_error: Option<String>,
}

/// What the watch brought, or the interrupt.
enum Next {
    Event(Box<Option<Result<watcher::Event<Run>, watcher::Error>>>),
    Interrupted,
}

/// Follows the Run `name` until it finishes, or waits for an answer no terminal can take; the
/// exit code.
pub async fn follow(
    cluster: &Cluster,
    name: &str,
    mode: Mode,
    io: &mut Io<'_>,
) -> Result<u8, CliError> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(runs(cluster), config).default_backoff().boxed();
    let mut follower = Follower {
        cluster,
        name: name.to_owned(),
        display: Display::new(io.terminal, mode == Mode::Quiet, std::time::Instant::now()),
        shown: None,
        asked: HashSet::new(),
        last_error: None,
    };
    let mut presence = Presence::default();
    let code = loop {
        let next = tokio::select! {
            event = events.next() => Next::Event(Box::new(event)),
            () = &mut io.interrupt => Next::Interrupted,
        };
        let event = match next {
            Next::Interrupted => {
                follower.display.done();
                let _ = writeln!(
                    io.stderr,
                    "stopped following; Run {name} goes on (kubectl herd follow {name}, kubectl \
                     herd cancel {name})"
                );
                break EXIT_INTERRUPTED;
            }
            Next::Event(event) => *event,
        };
        let step = match event {
            None => {
                follower.display.done();
                return Err(CliError::new(format!(
                    "the watch of Run {name} ended (kubectl herd follow {name} starts it again)"
                )));
            }
            Some(Err(error)) => {
                if let Some(fatal) = refused(&error, cluster, name) {
                    follower.display.done();
                    return Err(fatal);
                }
                follower.watch_failed(&error.to_string(), io);
                Step::Continue
            }
            Some(Ok(event)) => {
                follower.last_error = None;
                match presence.see(&event) {
                    Seen::Nothing => Step::Continue,
                    Seen::Run(run) => follower.on_run(run, io).await?,
                    Seen::NotFound => {
                        follower.display.done();
                        return Err(CliError::new(format!(
                            "Run {name} not found in namespace {} ({})",
                            cluster.namespace,
                            crate::runs::RUN_NOT_FOUND
                        )));
                    }
                    Seen::Deleted => follower.gone(io, "was deleted while it was followed"),
                    Seen::Replaced => {
                        follower.gone(io, "was deleted and another Run of that name created")
                    }
                }
            }
        };
        if let Step::Exit(code) = step {
            break code;
        }
    };
    follower.display.done();
    Ok(code)
}

/// A watch error that retrying cannot mend: no right to list or watch Runs, or no Runs served.
fn refused(error: &watcher::Error, cluster: &Cluster, name: &str) -> Option<CliError> {
    let (watcher::Error::InitialListFailed(failed)
    | watcher::Error::WatchStartFailed(failed)
    | watcher::Error::WatchFailed(failed)) = error
    else {
        return None;
    };
    let kube::Error::Api(status) = failed else {
        return None;
    };
    match status.code {
        401 | 403 => {
            let object = format!("Run {name}");
            Some(crate::error::api_error(
                failed,
                crate::runs::run_target(cluster, &object, "watching"),
            ))
        }
        404 => Some(CliError::new(
            "the API server serves no Runs (runs.herd.dev/v1alpha1): Herd's CRDs are not \
             installed (kubectl apply --server-side -f charts/herd/crds/)",
        )),
        _ => None,
    }
}

impl Follower<'_> {
    /// A watch error: said once (until the watch works again), retried with backoff.
    fn watch_failed(&mut self, error: &str, io: &mut Io<'_>) {
        let error = one_line(error);
        if self.last_error.as_deref() != Some(error.as_str()) {
            self.display.write(
                io.stderr,
                &format!(
                    "warning: the watch of Run {} failed: {error}; retrying",
                    self.name
                ),
            );
        }
        self.last_error = Some(error);
    }

    /// The Run is gone: said, exit code 1.
    fn gone(&self, io: &mut Io<'_>, what: &str) -> Step {
        self.display.done();
        let _ = writeln!(io.stderr, "Run {} {what}", self.name);
        Step::Exit(EXIT_FAILED)
    }

    async fn on_run(&mut self, run: &Run, io: &mut Io<'_>) -> Result<Step, CliError> {
        let next = view(run);
        if self.display.quiet && matches!(next.reason.as_str(), AGENT_NOT_READY | AGENT_NOT_FOUND) {
            self.display.done();
            return Err(CliError::new(format!(
                "Run {} waits for its Agent ({}): {} (kubectl herd agents shows what it misses; \
                 the Run goes on)",
                self.name,
                one_line(&next.reason),
                one_line(&next.message)
            )));
        }
        for line in changes(self.shown.as_ref(), &next) {
            self.display.progress(io.stderr, &line);
        }
        self.display.status(status_line(&self.name, &next));
        self.shown = Some(next);
        match outcome(run) {
            Outcome::Going => self.approvals(run, io).await,
            Outcome::Waiting(question) if self.asked.contains(&question.id) => Ok(Step::Continue),
            Outcome::Waiting(question) => self.ask(&question, io).await,
            Outcome::Answered(stop) => {
                self.display.done();
                let answer = read_answer(self.cluster, run).await?;
                print_answer(&self.name, &answer, io);
                self.summary(run, io);
                Ok(Step::Exit(stopped(stop, io)))
            }
            Outcome::Failed { reason, message } => {
                self.display.done();
                let _ = writeln!(
                    io.stderr,
                    "Run {} failed ({}): {}",
                    self.name,
                    one_line(&reason),
                    one_line(&message)
                );
                self.summary(run, io);
                Ok(Step::Exit(EXIT_FAILED))
            }
        }
    }

    /// The line the person types, or `None` on an interrupt. The spinner would draw over the
    /// typed line: it goes while the person types.
    async fn read_typed(
        &mut self,
        prompt: &mut dyn Prompt,
        interrupt: &mut BoxFuture<'_, ()>,
    ) -> Option<Option<String>> {
        let spinning = self.display.pause();
        let typed = tokio::select! {
            typed = prompt.read_line() => Some(typed),
            () = interrupt => None,
        };
        if spinning {
            self.display = Display::new(true, false, self.display.since);
        }
        typed
    }

    /// Shows the question; answers it with what the person at the terminal types, or without
    /// one prints it as JSON on stdout and stops with exit code 3.
    async fn ask(
        &mut self,
        question: &herd_crds::report::Clarification,
        io: &mut Io<'_>,
    ) -> Result<Step, CliError> {
        let name = self.name.clone();
        self.asked.insert(question.id.clone());
        self.display.write(
            io.stderr,
            &format!(
                "\nRun {name} asks (question {}):\n{}",
                one_line(&question.id),
                for_terminal(&question.render())
            ),
        );
        let Some(prompt) = io.prompt.as_mut() else {
            self.display.done();
            let value = serde_json::to_value(question).unwrap_or_default();
            let _ = writeln!(io.stdout, "{}", json_line(&value));
            let _ = writeln!(
                io.stderr,
                "\nRun {name} waits for an answer. Give it with:\n  kubectl herd answer {name} \
                 \"...\"\nthen follow it again with: kubectl herd follow {name}"
            );
            return Ok(Step::Exit(EXIT_INPUT_REQUIRED));
        };
        let typed = self.read_typed(&mut **prompt, &mut io.interrupt).await;
        let Some(typed) = typed else {
            self.display.done();
            let _ = writeln!(
                io.stderr,
                "\nstopped following; Run {name} still waits (kubectl herd answer {name} \"...\")"
            );
            return Ok(Step::Exit(EXIT_INTERRUPTED));
        };
        let Some(line) = typed else {
            self.display.done();
            let _ = writeln!(
                io.stderr,
                "no answer typed; Run {name} still waits (kubectl herd answer {name} \"...\")"
            );
            return Ok(Step::Exit(EXIT_INPUT_REQUIRED));
        };
        match question.answer_from(&line) {
            None => self.display.write(
                io.stderr,
                &format!(
                    "not answered here; waiting for an answer from elsewhere (kubectl herd answer \
                     {name} \"...\")"
                ),
            ),
            Some(text) => match answer(self.cluster, &name, &text).await {
                Ok(_) => self
                    .display
                    .write(io.stderr, &format!("answered: {}", one_line(&text))),
                Err(error) => self
                    .display
                    .write(io.stderr, &format!("warning: {}", error.message)),
            },
        }
        Ok(Step::Continue)
    }

    /// Asks about each tool call the Run holds for approval and was not asked about yet: `y`
    /// approves it, Enter or `n` denies it, other text denies it with that as the reason.
    /// Without a terminal the request goes to stdout as JSON and following stops with exit
    /// code 3.
    async fn approvals(&mut self, run: &Run, io: &mut Io<'_>) -> Result<Step, CliError> {
        let held: Vec<ApprovalRequest> = pending_approvals(run)
            .into_iter()
            .filter(|r| !self.asked.contains(&r.id))
            .cloned()
            .collect();
        let name = self.name.clone();
        for request in held {
            self.asked.insert(request.id.clone());
            let Some(prompt) = io.prompt.as_mut() else {
                self.display.done();
                let value = serde_json::to_value(&request).unwrap_or_default();
                let _ = writeln!(io.stdout, "{}", json_line(&value));
                let _ = writeln!(
                    io.stderr,
                    "\nRun {name} holds a tool call for approval ({}): {}\nDecide with:\n  \
                     kubectl herd approve {name} {}\n  kubectl herd deny {name} {} --reason \
                     \"...\"\nthen follow it again with: kubectl herd follow {name}",
                    one_line(&request.id),
                    for_terminal(&request.summary()),
                    one_line(&request.id),
                    one_line(&request.id)
                );
                return Ok(Step::Exit(EXIT_INPUT_REQUIRED));
            };
            self.display.write(
                io.stderr,
                &format!(
                    "\nRun {name} holds a tool call for approval ({}):\nrun `{}`? [y/N/reason]",
                    one_line(&request.id),
                    for_terminal(&request.summary())
                ),
            );
            let typed = self.read_typed(&mut **prompt, &mut io.interrupt).await;
            let still = format!(
                "Run {name} still holds {} (kubectl herd approve {name} {})",
                one_line(&request.id),
                one_line(&request.id)
            );
            let Some(typed) = typed else {
                self.display.done();
                let _ = writeln!(io.stderr, "\nstopped following; {still}");
                return Ok(Step::Exit(EXIT_INTERRUPTED));
            };
            let Some(line) = typed else {
                self.display.done();
                let _ = writeln!(io.stderr, "nothing typed; {still}");
                return Ok(Step::Exit(EXIT_INPUT_REQUIRED));
            };
            let verdict = Verdict::from_line(&line);
            let decided = decide(
                self.cluster,
                &name,
                Some(&request.id),
                verdict.decision,
                verdict.reason.as_deref(),
            )
            .await;
            match decided {
                Ok(request) => {
                    let line = decided_line(&name, verdict.decision, &request);
                    self.display.write(io.stderr, &line);
                }
                Err(error) => self
                    .display
                    .write(io.stderr, &format!("warning: {}", error.message)),
            }
        }
        Ok(Step::Continue)
    }

    /// The last lines: the phase, the usage and where the files are.
    fn summary(&self, run: &Run, io: &mut Io<'_>) {
        let shown = view(run);
        let _ = writeln!(
            io.stderr,
            "\n{} · {}",
            phase_name(shown.phase),
            usage_line(&shown.usage)
        );
        let files = run
            .status
            .as_ref()
            .and_then(|s| s.report.as_ref())
            .and_then(|r| r.result.as_ref())
            .map(|r| r.artifacts.len())
            .unwrap_or(0);
        if files > 0 {
            let (count, them) = if files == 1 {
                ("1 file".to_owned(), "it")
            } else {
                (format!("{files} files"), "them")
            };
            let _ = writeln!(
                io.stderr,
                "{count} presented: kubectl herd result {} -o DIR writes {them}",
                self.name
            );
        }
    }
}
