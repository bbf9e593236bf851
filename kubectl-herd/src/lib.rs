//! `kubectl herd`: run Herd agents from a terminal without writing Run manifests or JSON
//! patches.
//!
//! - `run AGENT TASK [--input FILE]... [options] [--follow|--wait]`: creates the ConfigMap of
//!   the files, then a Run named `<agent>-xxxxx` that takes it as `inputs` and owns it
//!   ([`start`]); `run -f MANIFEST` creates the Run a manifest describes; `--follow` shows it
//!   live ([`follow`]).
//! - `follow RUN`, `answer RUN TEXT` ([`answer`]), `result RUN [-o DIR]` ([`result`]),
//!   `cancel RUN` ([`cancel`]), `logs RUN [-c sandbox]` ([`logs`]); `--last` for the newest.
//! - `get`/`list` ([`get`], [`tree`], [`columns`], [`output`]), `describe RUN` ([`describe`]),
//!   `delete` ([`delete`]), `agents` and `skills` ([`catalog`]).
//! - `schedule NAME --cron EXPR AGENT TASK`, `trigger SCHEDULE` and `schedules`
//!   ([`schedule`]).
//! - `dashboard [-A] [--port N] [--no-open]`: a web dashboard on 127.0.0.1 with the caller's
//!   kubeconfig ([`dashboard`]).
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
pub mod approve;
pub mod budgets;
pub mod cancel;
pub mod catalog;
pub mod cli;
pub mod columns;
pub mod complete;
pub mod connect;
pub mod dashboard;
pub mod delete;
pub mod describe;
pub mod error;
pub mod follow;
pub mod get;
pub mod io;
pub mod jsonpath;
pub mod launch;
pub mod logs;
pub mod manifest;
pub mod outcome;
pub mod output;
pub mod presence;
pub mod result;
pub mod runs;
pub mod schedule;
pub mod start;
pub mod table;
pub mod tree;
pub mod view;

#[cfg(test)]
mod testing;

use std::ffi::OsString;

pub use crate::io::{Io, Prompt, StdinPrompt};
use clap::{CommandFactory, Parser};

use herd_crds::terminal_text::one_line;

use crate::cli::{Cli, Command};
use crate::connect::{Cluster, Connection, connect};
use crate::error::CliError;
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
            // clap_complete panics when its writer fails: it writes to memory, and a closed
            // pipe (`| head`) just ends the output.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "kubectl-herd", &mut script);
            let _ = io.stdout.write_all(&script);
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
        Command::Run(args) => launch::run_command(cluster, &args, io).await,
        Command::Follow(which) => {
            let run = runs::which_run(cluster, &which).await?;
            follow::follow(cluster, &run, follow::Mode::Live, io).await
        }
        Command::Answer { run, text } => {
            let id = answer::answer(cluster, &run, &text).await?;
            let _ = writeln!(
                io.stdout,
                "answered question {} of Run {run}; follow it with: kubectl herd follow {run}",
                one_line(&id)
            );
            Ok(EXIT_ANSWERED)
        }
        Command::Approve { run, id } => {
            let decision = herd_crds::approval::ApprovalDecision::Approve;
            let request = approve::decide(cluster, &run, id.as_deref(), decision, None).await?;
            let _ = writeln!(
                io.stdout,
                "{}",
                approve::decided_line(&run, decision, &request)
            );
            Ok(EXIT_ANSWERED)
        }
        Command::Deny { run, id, reason } => {
            let decision = herd_crds::approval::ApprovalDecision::Deny;
            let request =
                approve::decide(cluster, &run, id.as_deref(), decision, reason.as_deref()).await?;
            let _ = writeln!(
                io.stdout,
                "{}",
                approve::decided_line(&run, decision, &request)
            );
            Ok(EXIT_ANSWERED)
        }
        Command::Result { which, output } => {
            let run = runs::which_run(cluster, &which).await?;
            result::result(cluster, &run, output.as_deref(), io).await
        }
        Command::Cancel(which) => {
            let run = runs::which_run(cluster, &which).await?;
            let said = cancel::cancel(cluster, &run).await?;
            let _ = writeln!(io.stdout, "{said}");
            Ok(EXIT_ANSWERED)
        }
        Command::Get(args) => get::get(cluster, &args, io).await,
        Command::Describe(args) => {
            let run = runs::which_run(cluster, &args.which).await?;
            describe::describe(cluster, &run, io).await
        }
        Command::Delete(args) => delete::delete(cluster, &args, io).await,
        Command::Logs {
            which,
            container,
            follow,
        } => {
            let run = runs::which_run(cluster, &which).await?;
            logs::logs(cluster, &run, &container, follow, io).await?;
            Ok(EXIT_ANSWERED)
        }
        Command::Agents(args) => catalog::agents(cluster, &args, io).await,
        Command::Skills(args) => catalog::skills(cluster, &args, io).await,
        Command::Schedule(args) => schedule::create(cluster, &args, io).await,
        Command::Trigger { schedule: name } => schedule::trigger(cluster, &name, io).await,
        Command::Schedules(args) => schedule::list(cluster, &args, io).await,
        Command::Budgets(args) => budgets::list(cluster, &args, io).await,
        Command::Dashboard(args) => dashboard::dashboard(cluster, &args, io).await,
        // Answered before connecting, in `execute`.
        Command::Completion { .. } | Command::Complete { .. } => Ok(EXIT_USAGE),
    }
}
