//! The `herd-runner` command line.
//!
//! Exit codes of `herd-runner run`: 0 the agent answered; 1 the run failed (model error,
//! timeout...); 2 bad usage or manifests; 3 the agent asked a question and a checkpoint was
//! saved (answer with `--resume <workdir> --answer "..."`).

pub mod args;
pub mod progress;
pub mod prompter;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use herd_crds::report::StopReason;

use self::args::{Cli, Command, RunArgs, SandboxArgs};
use self::progress::Progress;
use self::prompter::TerminalPrompter;
use crate::runtime::local::{LocalRequest, LocalResult, run_local};
use crate::runtime::settings::Overrides;
use crate::sandbox::{Sandbox, SandboxRoots};

/// The run failed.
pub const EXIT_FAILED: u8 = 1;
/// Bad usage or manifests.
pub const EXIT_USAGE: u8 = 2;
/// The agent asked a question; a checkpoint was saved.
pub const EXIT_INPUT_REQUIRED: u8 = 3;

/// Parses the command line and runs it.
pub async fn main() -> ExitCode {
    // reqwest is built without a default TLS provider; choose ring, which kube also uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Command::Run(args) => run(args).await,
        Command::Sandbox(args) => sandbox(args).await,
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HERD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn sandbox(args: SandboxArgs) -> ExitCode {
    let roots = SandboxRoots::under(&args.root);
    let sandbox = match Sandbox::new(&roots) {
        Ok(sandbox) => sandbox,
        Err(error) => {
            eprintln!(
                "error: cannot open the sandbox under {}: {error}",
                args.root.display()
            );
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let served = if args.listen_stdin {
        crate::sandbox::socket::serve_stdin(sandbox).await
    } else {
        crate::sandbox::socket::serve(&args.socket, sandbox).await
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

async fn run(args: RunArgs) -> ExitCode {
    let interactive = !args.non_interactive && !args.json && std::io::stdin().is_terminal();
    let progress = Arc::new(Progress::new(args.json, std::io::stderr().is_terminal()));
    let workdir = match (&args.resume, &args.workdir) {
        (Some(dir), _) | (None, Some(dir)) => dir.clone(),
        (None, None) => default_workdir(),
    };
    if args.resume.is_none() && args.files.is_empty() {
        eprintln!("error: no manifests given: herd-runner run -f agent.yaml \"task\"");
        return ExitCode::from(EXIT_USAGE);
    }
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
        prompter: interactive.then(|| Arc::new(TerminalPrompter) as _),
        answer: args.answer,
        memory_dir: args.memory_dir.unwrap_or_else(default_memory_dir),
        sandbox: args.sandbox,
    };
    let result = run_local(request, progress.clone()).await;
    progress.finish();
    match result {
        Ok(result) => report(&result, args.json),
        Err(error) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({"event": "error", "message": error.to_string()})
                );
            } else {
                eprintln!("error: {error}");
            }
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Prints the answer (stdout) and where things are (stderr), and picks the exit code.
fn report(result: &LocalResult, json: bool) -> ExitCode {
    let outcome = &result.outcome;
    let code = match outcome.stop_reason {
        StopReason::InputRequired => EXIT_INPUT_REQUIRED,
        reason if reason.is_answer() => 0,
        _ => EXIT_FAILED,
    };
    if json {
        let artifacts: Vec<_> = result
            .artifacts
            .iter()
            .map(|(path, host)| serde_json::json!({"path": path, "file": host}))
            .collect();
        let line = serde_json::json!({
            "event": "result",
            "stopReason": outcome.stop_reason,
            "answer": outcome.answer,
            "error": outcome.error,
            "question": outcome.question,
            "title": result.title,
            "usage": result.usage,
            "artifacts": artifacts,
            "workdir": result.workdir,
        });
        println!("{line}");
        return ExitCode::from(code);
    }
    if let Some(question) = &outcome.question {
        let question_json = serde_json::to_string(question).unwrap_or_default();
        println!("{question_json}");
        eprintln!(
            "\nThe agent needs an answer. Continue with:\n  herd-runner run --resume {} --answer \"...\"",
            result.workdir.display()
        );
        return ExitCode::from(code);
    }
    if !outcome.answer.is_empty() {
        println!("{}", outcome.answer);
    }
    if let Some(error) = &outcome.error {
        eprintln!("error: {error}");
    }
    if !result.artifacts.is_empty() {
        eprintln!("\nFiles:");
        for (path, host) in &result.artifacts {
            eprintln!("  {path}  ->  {}", host.display());
        }
    }
    eprintln!(
        "\n{:?} · {} model calls · {} tool calls · {} tokens in / {} out · {}",
        outcome.stop_reason,
        result.usage.model_calls,
        result.usage.tool_calls,
        result.usage.input_tokens,
        result.usage.output_tokens,
        result.workdir.display()
    );
    ExitCode::from(code)
}

fn default_workdir() -> PathBuf {
    let stamp = jiff::Zoned::now().strftime("%Y%m%d-%H%M%S").to_string();
    PathBuf::from(format!("herd-run-{stamp}"))
}

fn default_memory_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("HERD_HOME") {
        return PathBuf::from(home).join("memory");
    }
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".herd").join("memory"))
        .unwrap_or_else(|| PathBuf::from(".herd").join("memory"))
}
