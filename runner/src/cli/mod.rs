//! The `herd-runner` command line.
//!
//! `herd-runner pod` and `herd-runner sandbox` are the two containers of a Run's pod (see
//! `crate::pod` for the agent's exit codes). `herd-runner sandbox` exits 0 when it is stopped
//! (SIGTERM or SIGINT: the kubelet stops the sidecar once the agent has exited, or the Pod is
//! deleted) and 1 when it fails (it cannot open its folders or bind its socket, accepting
//! fails).
//!
//! Exit codes of `herd-runner run`: 0 the agent answered; 1 the run failed (model error,
//! timeout...); 2 bad usage or manifests; 3 the agent asked a question and a checkpoint was
//! saved (answer with `--resume <workdir> --answer "..."`); 4 the run was stopped by a limit
//! (`maxModelCalls`, loop detection, token budget, subagent limit, the model's output limit,
//! a safety stop): the partial answer is on stdout and `stopped: <reason>` on stderr; 130 and
//! 143 a first SIGINT (Ctrl-C) or SIGTERM stopped it at its next safe point and a checkpoint
//! was saved (continue with `--resume <workdir>`); a second signal exits at once with the
//! same code.
//!
//! Everything printed for a person passes through `herd_crds::terminal_text::for_terminal`;
//! `--json` lines through its `json_line`.

pub(crate) mod args;
pub(crate) mod log;
pub(crate) mod progress;
pub(crate) mod prompter;
mod runs;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use futures::FutureExt as _;
use herd_crds::approval::ApprovalDecision;
use herd_crds::report::StopReason;
use herd_crds::terminal_text::{for_terminal, json_line};
use herd_crds::wire::Answer;
use herd_sandbox::{Listener, SocketOptions, UnixSocketExecutor};
use opentelemetry::context::FutureExt as _;
use tokio::signal::unix::{Signal, SignalKind, signal};

use self::args::{Cli, Command, RunArgs, SandboxArgs};
use self::progress::{Progress, timed_json_line};
use self::prompter::TerminalPrompter;
use crate::runtime::interrupt::{Interrupt, StopSignal};
use crate::runtime::local::{LocalRequest, LocalResult, run_local};
use crate::runtime::local_plan::Overrides;
use crate::telemetry;

/// The run failed.
pub const EXIT_FAILED: u8 = 1;
/// Bad usage or manifests.
pub const EXIT_USAGE: u8 = 2;
/// The agent asked a question; a checkpoint was saved.
pub const EXIT_INPUT_REQUIRED: u8 = 3;
/// A limit stopped the run: the answer is partial.
pub const EXIT_STOPPED: u8 = 4;

/// The whole `herd-runner` process: a confined sandbox child's entry, else [`main`] on a
/// multi-threaded runtime. The binary's `main`, and whatever else runs as `herd-runner` (the e2e
/// suite's `local-kubelet` re-executes itself under that name).
pub fn process_main() -> ExitCode {
    // A confined sandbox child unshares namespaces, which the kernel allows only while the
    // process has a single thread: before the tokio runtime starts its workers.
    #[cfg(target_os = "linux")]
    let layers = match herd_sandbox::enter_if_requested() {
        herd_sandbox::Entry::Continue(layers) => layers,
        herd_sandbox::Entry::Exit(code) => return code,
    };
    #[cfg(not(target_os = "linux"))]
    let layers = Vec::new();
    let cli = Cli::parse();
    // A Pod's sandbox binds its socket and restricts itself with Landlock while it has a
    // single thread too: Landlock binds the calling thread and what it starts later.
    let command = match cli.command {
        Command::Sandbox(args) if !args.ready && !args.listen_stdin => {
            let signals = watch_stop_signals_early();
            match herd_sandbox::bind_listener(&args.socket) {
                Ok(listener) => Started::PodSandbox {
                    signals,
                    layers: herd_sandbox::restrict_pod_sandbox(&args.root),
                    args,
                    listener,
                },
                Err(error) => {
                    eprintln!("error: {error:#}");
                    return ExitCode::from(EXIT_FAILED);
                }
            }
        }
        command => Started::Command { command, layers },
    };
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(main(command)),
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The command line, with what was done before the runtime started.
enum Started {
    /// A Pod's sandbox: its socket bound, Landlock applied (as `layers` say).
    PodSandbox {
        /// SIGTERM and SIGINT, watched since before the socket was bound.
        signals: Option<StopSignals>,
        args: SandboxArgs,
        listener: std::os::unix::net::UnixListener,
        layers: Vec<herd_crds::report::SandboxLayer>,
    },
    /// Any other command; `layers` of a confined sandbox child.
    Command {
        command: Command,
        layers: Vec<herd_crds::report::SandboxLayer>,
    },
}

/// Runs the command line.
async fn main(started: Started) -> ExitCode {
    // reqwest is built without a default TLS provider; choose ring, which kube also uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let colour = use_colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR"),
    );
    if !matches!(
        started,
        Started::Command {
            command: Command::Run(_),
            ..
        }
    ) {
        log::init_container_logging(colour);
    }
    match started {
        Started::PodSandbox {
            signals,
            args,
            listener,
            layers,
        } => sandbox(args, Some(listener), layers, signals).await,
        Started::Command { command, layers } => match command {
            Command::Run(args) => {
                let export = telemetry::export::init_from_env();
                let code = run(*args)
                    .with_context(telemetry::propagation::context_from_env())
                    .await;
                flush_traces(export).await;
                code
            }
            Command::Runs(args) => runs::list(&args),
            Command::Sandbox(args) => sandbox(args, None, layers, None).await,
            Command::Pod => pod().await,
        },
    }
}

/// `herd-runner pod`: see `crate::pod` for the exit codes. SIGTERM (the Pod deleted: cancel,
/// timeout, eviction) stops it within `pod::TERM_BUDGET`.
async fn pod() -> ExitCode {
    let export = telemetry::export::init_from_env();
    let facts = crate::plan::EnvFacts::from_process();
    let progress = Progress::new(false, false, false);
    let code = crate::pod::run_pod(&facts, progress.clone(), sigterm())
        .with_context(telemetry::propagation::context_from_env())
        .await;
    progress.finish();
    flush_traces(export).await;
    // Exits without waiting for work still running (a blocking read in flight): the pod is
    // done, and after SIGTERM the kubelet's grace period is short.
    std::process::exit(i32::from(code))
}

/// Sends the spans still queued, waiting at most [`TRACE_FLUSH_WAIT`]: an unreachable
/// collector must not keep a finished run's process alive.
async fn flush_traces(export: Option<telemetry::export::TraceExport>) {
    if let Some(export) = export {
        let flush = tokio::task::spawn_blocking(move || export.shutdown());
        if tokio::time::timeout(TRACE_FLUSH_WAIT, flush).await.is_err() {
            tracing::warn!("the last spans were not exported in time");
        }
    }
}

/// How long a finished run waits for its last spans to be exported.
const TRACE_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Resolves at the first SIGTERM; never if it cannot be watched (said in the log).
fn sigterm() -> crate::pod::Stop {
    let watched = signal(SignalKind::terminate());
    async move {
        match watched {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot watch for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    }
    .boxed()
    .shared()
}

/// Colour only for a person at a terminal, and never when `NO_COLOR` is set to anything but
/// the empty string (<https://no-color.org>).
fn use_colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

/// `herd-runner sandbox`: serves on `listener` when it is bound already (a Pod's sandbox),
/// else on standard input (`--listen-stdin`), telling `layers` in its handshake; it stops at
/// the first of `signals` (watched now when not given).
async fn sandbox(
    args: SandboxArgs,
    listener: Option<std::os::unix::net::UnixListener>,
    layers: Vec<herd_crds::report::SandboxLayer>,
    signals: Option<StopSignals>,
) -> ExitCode {
    if args.ready {
        return sandbox_ready(&args.socket).await;
    }
    if listener.is_some() && !layers.is_empty() {
        // The container's log says once which layers hold the tools (also in the handshake;
        // a local run's confined child leaves saying it to the run's own display).
        let report = herd_crds::report::SandboxReport {
            layers: layers.clone(),
        };
        eprintln!("sandbox: {}", for_terminal(&report.summary()));
    }
    let listener = match listener {
        Some(listener) => Listener::Bound(listener),
        None if args.listen_stdin => Listener::Stdin,
        None => Listener::Path(args.socket.clone()),
    };
    // As a container's PID 1 a signal without a handler is ignored: without this, every Pod
    // would wait its whole grace period for the sidecar. Being stopped is how every Run's
    // sandbox ends (the kubelet stops a native sidecar once the agent has exited), so it is
    // a clean ending, exit code 0: a non-zero code would read as a container error on every
    // Run. The commands still running get SIGTERM and a moment, then SIGKILL, well within
    // the Pod's grace period.
    let signals = signals.unwrap_or_else(StopSignals::watch);
    let stopped = async move {
        signals.next().await;
    };
    match herd_sandbox::serve(&args.root, listener, layers, stopped).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `herd-runner sandbox --ready`: whether a sandbox on `socket` answers the handshake, within
/// the kubelet's default probe timeout (1 s).
async fn sandbox_ready(socket: &std::path::Path) -> ExitCode {
    const WAIT: std::time::Duration = std::time::Duration::from_millis(800);
    let options = SocketOptions {
        connect_wait: WAIT,
        request_timeout: WAIT,
        ..SocketOptions::default()
    };
    match tokio::time::timeout(WAIT, UnixSocketExecutor::connect_with(socket, options)).await {
        Ok(Ok(_)) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            eprintln!("not ready: {error}");
            ExitCode::from(EXIT_FAILED)
        }
        Err(_) => {
            eprintln!(
                "not ready: no handshake on {} within {WAIT:?}",
                socket.display()
            );
            ExitCode::from(EXIT_FAILED)
        }
    }
}

async fn run(args: RunArgs) -> ExitCode {
    let interactive = !args.non_interactive && !args.json && std::io::stdin().is_terminal();
    if args.answer.is_some() && args.resume.is_none() {
        eprintln!("error: --answer answers the question of a run being resumed: add --resume DIR");
        return ExitCode::from(EXIT_USAGE);
    }
    if args.resume.is_none() && args.files.is_empty() {
        eprintln!("error: no manifests given: herd-runner run -f agent.yaml \"task\"");
        return ExitCode::from(EXIT_USAGE);
    }
    let workdir = match (&args.resume, &args.workdir) {
        (Some(dir), _) => runs::resolve(dir),
        (None, Some(dir)) => dir.clone(),
        (None, None) => match runs::new_run_dir() {
            Ok(dir) => dir,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_USAGE);
            }
        },
    };
    let terminal = std::io::stderr().is_terminal();
    let colour = use_colour(terminal, std::env::var_os("NO_COLOR"));
    let warnings = log::init_run_logging(args.log_format, colour);
    let progress = Progress::new(args.json, terminal, colour);
    let _ = warnings.set(progress.clone());
    let interrupt = interrupt_on_signals(args.json);
    let request = LocalRequest {
        files: args.files,
        overrides: Overrides {
            task: args.task,
            model: args.model,
            base_url: args.base_url,
            plan: args.plan,
            thinking: args.thinking,
        },
        api_key_env: args.api_key_env,
        workdir,
        inputs: args.inputs,
        prompter: interactive.then(|| Arc::new(TerminalPrompter::over(progress.clone())) as _),
        resume: args.resume.is_some(),
        answer: args.answer,
        decisions: decisions(&args.approve, &args.deny, args.reason.as_deref()),
        interrupt: Some(interrupt),
        memory_dir: args.memory_dir.unwrap_or_else(default_memory_dir),
        sandbox: args.sandbox,
    };
    let result = run_local(request, progress.clone()).await;
    progress.finish();
    match result {
        Ok(result) if result.interrupted.is_some() => {
            let code = report(&result, args.json);
            // The terminal prompt may still block a thread reading stdin: exit without it.
            std::process::exit(i32::from(code))
        }
        Ok(result) => ExitCode::from(report(&result, args.json)),
        Err(error) => {
            if args.json {
                println!(
                    "{}",
                    timed_json_line(
                        &serde_json::json!({"event": "error", "message": error.to_string()})
                    )
                );
            } else {
                eprintln!("error: {}", for_terminal(&error.to_string()));
            }
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Resolves at the first SIGINT or SIGTERM, saying on stderr that the run is stopping; at the
/// second, exits at once (130 or 143, by that signal). A signal that cannot be watched is said
/// in the log and never comes.
fn interrupt_on_signals(json: bool) -> Interrupt {
    let (first, caught) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let signal = next_stop_signal().await;
        if !json {
            eprintln!(
                "\n{}: stopping at the next safe point and saving a checkpoint (again to quit at once)",
                signal.name()
            );
        }
        let _ = first.send(signal);
        let again = next_stop_signal().await;
        std::process::exit(i32::from(again.exit_code()));
    });
    async move { caught.await.unwrap_or(StopSignal::Terminate) }
        .boxed()
        .shared()
}

/// SIGINT and SIGTERM watched before the sandbox's socket is bound: a client may connect, and
/// the kubelet stop the sidecar, before the runtime that serves the socket starts, and their
/// default action would kill the process. Watched from a runtime without threads (the process
/// must keep its single thread here), whose watch goes on in the serving runtime: tokio's
/// watches are process-wide, so the serving runtime hears a signal even from before it started.
fn watch_stop_signals_early() -> Option<StopSignals> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(early) => Some(early.block_on(async { StopSignals::watch() })),
        Err(error) => {
            eprintln!("warning: cannot watch for SIGTERM and SIGINT yet: {error}");
            None
        }
    }
}

/// The next SIGINT or SIGTERM.
async fn next_stop_signal() -> StopSignal {
    StopSignals::watch().next().await
}

/// SIGINT and SIGTERM, watched from the moment this is made: a signal that comes before
/// anything awaits it is kept for [`StopSignals::next`], not taken by its default action
/// (which would kill the process).
struct StopSignals {
    interrupt: Option<Signal>,
    terminate: Option<Signal>,
}

impl StopSignals {
    /// Watches both now; one that cannot be watched is said in the log and never comes.
    fn watch() -> Self {
        let watch = |kind: SignalKind, which: StopSignal| match signal(kind) {
            Ok(watched) => Some(watched),
            Err(error) => {
                tracing::warn!(%error, "cannot watch for {}", which.name());
                None
            }
        };
        StopSignals {
            interrupt: watch(SignalKind::interrupt(), StopSignal::Interrupt),
            terminate: watch(SignalKind::terminate(), StopSignal::Terminate),
        }
    }

    /// The first of them to come.
    async fn next(mut self) -> StopSignal {
        async fn first(watched: Option<&mut Signal>) {
            match watched {
                Some(watched) => {
                    watched.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = first(self.interrupt.as_mut()) => StopSignal::Interrupt,
            () = first(self.terminate.as_mut()) => StopSignal::Terminate,
        }
    }
}

/// `--approve` and `--deny` as the decisions a Run's `spec.responses` would carry.
fn decisions(approve: &[String], deny: &[String], reason: Option<&str>) -> Vec<Answer> {
    let decided = |id: &String, decision, reason: Option<&str>| Answer {
        decision: Some(decision),
        reason: reason.map(str::to_owned),
        ..Answer::text(id, "")
    };
    approve
        .iter()
        .map(|id| decided(id, ApprovalDecision::Approve, None))
        .chain(
            deny.iter()
                .map(|id| decided(id, ApprovalDecision::Deny, reason)),
        )
        .collect()
}

/// Prints the answer (stdout) and where things are (stderr), and picks the exit code.
fn report(result: &LocalResult, json: bool) -> u8 {
    let outcome = &result.outcome;
    let code = match result.interrupted {
        Some(signal) => signal.exit_code(),
        None => exit_code(outcome.stop_reason),
    };
    if json {
        println!("{}", timed_json_line(&result_line(result)));
        return code;
    }
    let workdir = result.workdir.display().to_string();
    if let Some(question) = &outcome.question {
        println!("{}", json_line(question));
        eprintln!(
            "\nThe agent needs an answer. Continue with:\n  herd-runner run --resume {} --answer \"...\"",
            for_terminal(&workdir)
        );
        return code;
    }
    if !result.approvals.is_empty() {
        for request in &result.approvals {
            println!("{}", json_line(request));
        }
        eprintln!(
            "\nA tool call waits for approval. Continue with:\n  herd-runner run --resume {} \
             --approve ID (or --deny ID --reason \"...\")",
            for_terminal(&workdir)
        );
        return code;
    }
    if !outcome.answer.is_empty() {
        println!("{}", for_terminal(&outcome.answer));
    }
    if let Some(error) = &outcome.error {
        eprintln!("error: {}", for_terminal(error));
    }
    if code == EXIT_STOPPED {
        eprintln!(
            "stopped: {:?} ({})",
            outcome.stop_reason,
            stop_explanation(outcome.stop_reason)
        );
    }
    if let Some(signal) = result.interrupted {
        eprintln!(
            "\nInterrupted by {}: the checkpoint is saved. Continue with:\n  herd-runner run --resume {}",
            signal.name(),
            for_terminal(&workdir)
        );
    }
    if !result.artifacts.is_empty() {
        eprintln!("\nFiles:");
        for (path, host) in &result.artifacts {
            let line = format!("  {path}  ->  {}", host.display());
            eprintln!("{}", for_terminal(&line));
        }
    }
    eprintln!(
        "\n{:?} · {} model calls · {} tool calls · {} tokens in / {} out · {}",
        outcome.stop_reason,
        result.usage.model_calls,
        result.usage.tool_calls,
        result.usage.input_tokens,
        result.usage.output_tokens,
        for_terminal(&workdir)
    );
    code
}

/// The `result` event of `--json`: the whole result in one line.
fn result_line(result: &LocalResult) -> serde_json::Value {
    let outcome = &result.outcome;
    let artifacts: Vec<_> = result
        .artifacts
        .iter()
        .map(|(path, host)| serde_json::json!({"path": path, "file": host}))
        .collect();
    serde_json::json!({
        "event": "result",
        "stopReason": outcome.stop_reason,
        "answer": outcome.answer,
        "error": outcome.error,
        "question": outcome.question,
        "approvals": result.approvals,
        "title": result.title,
        "usage": result.usage,
        "artifacts": artifacts,
        "workdir": result.workdir,
        "interrupted": result.interrupted.map(StopSignal::name),
    })
}

/// The exit code for how the run ended (see the module docs).
pub fn exit_code(reason: StopReason) -> u8 {
    match reason {
        StopReason::Completed => 0,
        StopReason::InputRequired => EXIT_INPUT_REQUIRED,
        reason if reason.is_answer() => EXIT_STOPPED,
        _ => EXIT_FAILED,
    }
}

/// What the limit behind a stop is, for the `stopped:` line.
fn stop_explanation(reason: StopReason) -> &'static str {
    match reason {
        StopReason::ModelCallLimit => "the run used its maxModelCalls",
        StopReason::LoopDetected => "the agent kept repeating the same tool calls",
        StopReason::TokenBudgetExceeded => "the run used its token budget",
        StopReason::SubagentLimitReached => "the run used its subagents.maxTotal",
        StopReason::ModelLengthLimit => "the answer was cut at the model's output limit",
        StopReason::SafetyStop => "the provider's safety system stopped the answer",
        _ => "stopped by a limit",
    }
}

fn default_memory_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("HERD_HOME") {
        return PathBuf::from(home).join("memory");
    }
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".herd").join("memory"))
        .unwrap_or_else(|| PathBuf::from(".herd").join("memory"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_stop_exits_4_and_only_completed_exits_0() {
        let cases = [
            (StopReason::Completed, 0),
            (StopReason::InputRequired, EXIT_INPUT_REQUIRED),
            (StopReason::ModelCallLimit, EXIT_STOPPED),
            (StopReason::LoopDetected, EXIT_STOPPED),
            (StopReason::TokenBudgetExceeded, EXIT_STOPPED),
            (StopReason::SubagentLimitReached, EXIT_STOPPED),
            (StopReason::ModelLengthLimit, EXIT_STOPPED),
            (StopReason::SafetyStop, EXIT_STOPPED),
            (StopReason::ModelError, EXIT_FAILED),
            (StopReason::Cancelled, EXIT_FAILED),
            (StopReason::TimedOut, EXIT_FAILED),
            // The signal's code, 130 or 143, is the CLI's: see `report`.
            (StopReason::Interrupted, EXIT_FAILED),
        ];
        for (reason, code) in cases {
            assert_eq!(exit_code(reason), code, "{reason:?}");
            if code == EXIT_STOPPED {
                assert_ne!(stop_explanation(reason), "stopped by a limit", "{reason:?}");
            }
        }
    }

    #[test]
    fn colour_needs_a_terminal_and_no_no_color() {
        assert!(use_colour(true, None));
        assert!(use_colour(true, Some("".into())));
        assert!(!use_colour(true, Some("1".into())));
        assert!(!use_colour(false, None));
    }
}
