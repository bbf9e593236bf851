//! `kubectl herd`: run Herd agents from a terminal without writing Run manifests or JSON
//! patches.
//!
//! - `run AGENT TASK [-f FILE]... [--plan] [--follow]`: creates the ConfigMap of the files,
//!   then a Run named `<agent>-xxxxx` that takes it as `inputs` and owns it ([`start`]);
//!   `--follow` shows it live ([`follow`]).
//! - `follow RUN`, `answer RUN TEXT` ([`answer`]), `result RUN [-o DIR]` ([`result`]),
//!   `cancel RUN` ([`cancel`]), `get [RUN]` ([`tree`]), `logs RUN [-c sandbox]` ([`logs`]).
//! - `completion SHELL` and `__complete` ([`complete`]), which `kubectl_complete-herd` calls.
//!
//! Exit codes ([`outcome`]) are `herd-runner run`'s: 0 answered, 1 failed, 2 bad usage, 3
//! waiting for an answer no terminal can give, 4 stopped by a limit.
//!
//! Each command is a pure decision (what to print for a status, the patch of an answer, the
//! rows of a tree, the manifest of a Run) with thin I/O around it. [`run`] takes the arguments
//! and an [`Io`] (writers, whether stderr is a terminal, who answers questions), so tests call
//! it in-process with captured output.

pub mod answer;
pub mod cancel;
pub mod cli;
pub mod complete;
pub mod connect;
pub mod error;
pub mod follow;
pub mod io;
pub mod logs;
pub mod manifest;
pub mod outcome;
pub mod presence;
pub mod result;
pub mod runs;
pub mod start;
pub mod tree;
pub mod view;

#[cfg(test)]
mod testing;

use std::ffi::OsString;

use clap::{CommandFactory, Parser};
use kube::ResourceExt;

pub use crate::io::{Io, Prompt, StdinPrompt};

use herd_crds::terminal_text::one_line;

use crate::cli::{Cli, Command};
use crate::connect::{Cluster, Connection, connect};
use crate::error::CliError;
use crate::manifest::RunRequest;
use crate::outcome::{EXIT_ANSWERED, EXIT_USAGE};

/// Runs `kubectl herd` with `args` (the first one the program's name); the exit code.
pub async fn run<I, T>(args: I, io: &mut Io<'_>) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let text = error.render().to_string();
            let code = u8::try_from(error.exit_code()).unwrap_or(EXIT_USAGE);
            if error.use_stderr() {
                let _ = write!(io.stderr, "{text}");
            } else {
                let _ = write!(io.stdout, "{text}");
            }
            return code;
        }
    };
    match execute(cli, io).await {
        Ok(code) => code,
        Err(error) => {
            let _ = writeln!(io.stderr, "error: {}", error.message);
            error.code
        }
    }
}

async fn execute(cli: Cli, io: &mut Io<'_>) -> Result<u8, CliError> {
    let connection = Connection {
        kubeconfig: cli.kubeconfig.as_deref(),
        context: cli.context.as_deref(),
        namespace: cli.namespace.as_deref(),
    };
    match cli.command {
        Command::Completion { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "kubectl-herd", io.stdout);
            Ok(EXIT_ANSWERED)
        }
        Command::Complete { words } => {
            let mut root = Cli::command();
            root.build();
            complete::print(&root, &words, connection, io).await;
            Ok(EXIT_ANSWERED)
        }
        command => {
            let cluster = connect(connection).await?;
            on_cluster(&cluster, command, io).await
        }
    }
}

async fn on_cluster(cluster: &Cluster, command: Command, io: &mut Io<'_>) -> Result<u8, CliError> {
    match command {
        Command::Run(args) => {
            let files = start::read_files(&args.files)?;
            let request = RunRequest {
                agent: args.agent,
                task: args.task,
                plan: args.plan,
            };
            let (run, warning) = start::start(cluster, &request, &files).await?;
            if let Some(warning) = warning {
                let _ = writeln!(io.stderr, "warning: {warning}");
            }
            let name = run.name_any();
            if args.follow {
                let _ = writeln!(io.stderr, "Run {name} created");
                return follow::follow(cluster, &name, io).await;
            }
            let _ = writeln!(io.stdout, "{name}");
            let _ = writeln!(
                io.stderr,
                "Run {name} created; follow it with: kubectl herd follow {name}"
            );
            Ok(EXIT_ANSWERED)
        }
        Command::Follow { run } => follow::follow(cluster, &run, io).await,
        Command::Answer { run, text } => {
            let id = answer::answer(cluster, &run, &text).await?;
            let _ = writeln!(
                io.stdout,
                "answered question {} of Run {run}; follow it with: kubectl herd follow {run}",
                one_line(&id)
            );
            Ok(EXIT_ANSWERED)
        }
        Command::Result { run, output } => {
            result::result(cluster, &run, output.as_deref(), io).await
        }
        Command::Cancel { run } => {
            let said = cancel::cancel(cluster, &run).await?;
            let _ = writeln!(io.stdout, "{said}");
            Ok(EXIT_ANSWERED)
        }
        Command::Get { run } => {
            let table = get(cluster, run.as_deref()).await?;
            match table {
                Some(table) => {
                    let _ = write!(io.stdout, "{table}");
                }
                None => {
                    let _ = writeln!(io.stderr, "No Runs in namespace {}.", cluster.namespace);
                }
            }
            Ok(EXIT_ANSWERED)
        }
        Command::Logs {
            run,
            container,
            follow,
        } => {
            logs::logs(cluster, &run, &container, follow, io).await?;
            Ok(EXIT_ANSWERED)
        }
        // Answered before connecting, in `execute`.
        Command::Completion { .. } | Command::Complete { .. } => Ok(EXIT_USAGE),
    }
}

/// The tree table of `run` (every top-level Run without one); `None` when there are no Runs.
async fn get(cluster: &Cluster, run: Option<&str>) -> Result<Option<String>, CliError> {
    let object = run.map_or_else(|| "the Runs".to_owned(), |r| format!("Run {r}"));
    let list = runs::runs(cluster)
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|e| error::api_error(&e, runs::run_target(cluster, &object, "listing")))?;
    let rows = tree::tree(&list.items, run, jiff::Timestamp::now()).ok_or_else(|| {
        CliError::new(format!(
            "{object} not found in namespace {} ({})",
            cluster.namespace,
            runs::RUN_NOT_FOUND
        ))
    })?;
    Ok((!rows.is_empty()).then(|| tree::render(&rows)))
}
