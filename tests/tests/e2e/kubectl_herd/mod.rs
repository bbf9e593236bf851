//! `kubectl herd` against the real API server, with the operator and `local-kubelet` running
//! each Run's Pod and a scripted model: the commands are called in-process through
//! `kubectl_herd::run` (a kubeconfig, captured output, a scripted person at the "terminal"
//! where a test needs one), and once through the binary `cargo test` built.
//!
//! `get`, `describe`, `delete`, `agents`, `skills` and `run`'s options and dry runs are tested
//! on the API server alone, on Runs and Agents whose status the test writes ([`fixtures`]).
//!
//! `kubectl herd logs` is tested on the real node only: `local-kubelet` serves no container logs.

mod approval;
mod binary;
mod cancel;
mod catalog;
pub mod fixtures;
mod follow;
mod listing;
mod logs;
mod question;
mod runs;
mod schedules;
pub mod script;
mod tree;

use std::time::Duration;

use anyhow::Context;
use herd_e2e::{E2eTest, TestEnv};
use kubectl_herd::io::BoxFuture;
use kubectl_herd::{Io, Prompt};

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![
        E2eTest::shared(
            "kubectl_herd::run_follow_shows_the_run_until_its_answer_and_result_writes_its_files",
            follow::run_follow_shows_the_run_until_its_answer_and_result_writes_its_files,
        )
        .on_node(),
        E2eTest::shared(
            "kubectl_herd::a_question_stops_follow_with_3_until_answer_answers_it",
            question::a_question_stops_follow_with_3_until_answer_answers_it,
        )
        .on_node(),
        E2eTest::shared(
            "kubectl_herd::approve_and_deny_decide_held_calls",
            approval::approve_and_deny_decide_held_calls,
        )
        .on_node(),
        E2eTest::shared(
            "kubectl_herd::cancel_stops_a_waiting_run",
            cancel::cancel_stops_a_waiting_run,
        )
        .on_node(),
        E2eTest::shared(
            "kubectl_herd::get_shows_a_parent_with_its_children",
            tree::get_shows_a_parent_with_its_children,
        )
        .on_node(),
        E2eTest::shared(
            "kubectl_herd::logs_follow_the_agent_through_its_answer",
            logs::logs_follow_the_agent_through_its_answer,
        )
        .on_real_node(),
        E2eTest::shared(
            "kubectl_herd::get_prints_every_format_and_selection",
            listing::get_prints_every_format_and_selection,
        ),
        E2eTest::shared(
            "kubectl_herd::get_watch_prints_each_change",
            listing::get_watch_prints_each_change,
        ),
        E2eTest::shared(
            "kubectl_herd::describe_shows_the_question_children_and_events",
            listing::describe_shows_the_question_children_and_events,
        ),
        E2eTest::shared(
            "kubectl_herd::delete_removes_runs_with_their_children",
            listing::delete_removes_runs_with_their_children,
        ),
        E2eTest::shared(
            "kubectl_herd::run_options_land_in_the_run_and_dry_run_creates_nothing",
            runs::run_options_land_in_the_run_and_dry_run_creates_nothing,
        ),
        E2eTest::shared(
            "kubectl_herd::run_warns_of_an_agent_not_ready_and_wait_refuses_it",
            runs::run_warns_of_an_agent_not_ready_and_wait_refuses_it,
        ),
        E2eTest::shared(
            "kubectl_herd::agents_and_skills_say_what_runs_can_use",
            catalog::agents_and_skills_say_what_runs_can_use,
        ),
        E2eTest::shared(
            "kubectl_herd::schedule_trigger_and_list",
            schedules::schedule_trigger_and_list,
        ),
        E2eTest::shared(
            "kubectl_herd::the_binary_runs_answers_and_follows",
            binary::the_binary_runs_answers_and_follows,
        )
        .on_node(),
    ]
}

/// What one command did.
#[derive(Debug)]
pub struct Ran {
    /// Its exit code.
    pub code: u8,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Ran {
    /// Fails unless the exit code is `code`, showing the output.
    pub fn expect_code(self, code: u8) -> anyhow::Result<Ran> {
        anyhow::ensure!(
            self.code == code,
            "exit code {} instead of {code}\nstdout:\n{}\nstderr:\n{}",
            self.code,
            self.stdout,
            self.stderr
        );
        Ok(self)
    }

    /// The words of the first line of its output: a table's column names.
    pub fn header(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect()
    }

    /// The Run the command created, from its `Run <name> created` line.
    pub fn created(&self) -> anyhow::Result<String> {
        self.stderr
            .lines()
            .find_map(|l| {
                l.strip_prefix("Run ")?
                    .split_once(" created")
                    .map(|(n, _)| n)
            })
            .map(str::to_owned)
            .with_context(|| format!("no `Run ... created` line in:\n{}", self.stderr))
    }
}

/// The longest a command may take: a follow from a Run's creation to its end.
const COMMAND_TIME: Duration = Duration::from_secs(180);

/// A person at the terminal typing `lines`, one per question.
struct Typist {
    lines: std::collections::VecDeque<String>,
}

impl Prompt for Typist {
    fn read_line(&mut self) -> BoxFuture<'_, Option<String>> {
        let line = self.lines.pop_front();
        Box::pin(async move { line })
    }
}

/// Runs `kubectl herd ARGS` in-process on the test's namespace, with no terminal.
pub async fn kubectl_herd(env: &TestEnv, args: &[&str]) -> anyhow::Result<Ran> {
    run(env, args, None, Box::pin(std::future::pending())).await
}

/// Runs `kubectl herd ARGS` in-process until `interrupt` resolves, as Ctrl-C would end it
/// (what `interrupt` does before it resolves happens while the command runs).
pub async fn kubectl_herd_until(
    env: &TestEnv,
    args: &[&str],
    interrupt: BoxFuture<'static, ()>,
) -> anyhow::Result<Ran> {
    run(env, args, None, interrupt).await
}

/// Runs `kubectl herd ARGS` in-process with someone at the terminal who types `typed`.
pub async fn kubectl_herd_typing(
    env: &TestEnv,
    args: &[&str],
    typed: &[&str],
) -> anyhow::Result<Ran> {
    run(env, args, Some(typed), Box::pin(std::future::pending())).await
}

async fn run(
    env: &TestEnv,
    args: &[&str],
    typed: Option<&[&str]>,
    interrupt: BoxFuture<'static, ()>,
) -> anyhow::Result<Ran> {
    let kubeconfig = env.cluster().kubeconfig().display().to_string();
    let mut full = vec![
        "kubectl-herd",
        "--kubeconfig",
        &kubeconfig,
        "-n",
        env.namespace(),
    ];
    full.extend_from_slice(args);
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut typist = typed.map(|lines| Typist {
        lines: lines.iter().map(|l| format!("{l}\n")).collect(),
    });
    let mut io = Io {
        stdout: &mut stdout,
        stderr: &mut stderr,
        terminal: false,
        prompt: typist.as_mut().map(|t| t as &mut dyn Prompt),
        interrupt,
    };
    let code = tokio::time::timeout(COMMAND_TIME, kubectl_herd::run(full.clone(), &mut io)).await;
    drop(io);
    let stdout = String::from_utf8(stdout)?;
    let stderr = String::from_utf8(stderr)?;
    let Ok(code) = code else {
        anyhow::bail!(
            "`{}` did not end within {COMMAND_TIME:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            full.join(" ")
        );
    };
    Ok(Ran {
        code,
        stdout,
        stderr,
    })
}
