//! `herd-runner runs` and where `herd-runner run` keeps its runs: each in its own folder
//! under `$XDG_DATA_HOME/herd/runs/`, found again by id for `--resume`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use herd_crds::terminal_text::{for_terminal, json_line};

use super::EXIT_FAILED;
use super::args::RunsArgs;
use crate::runtime::run_list::{RunState, RunSummary, list_runs, new_run_id, runs_dir};

/// The folder of local runs, from the environment.
fn local_runs_dir() -> Result<PathBuf, String> {
    runs_dir(std::env::var_os("XDG_DATA_HOME"), std::env::var_os("HOME")).ok_or_else(|| {
        "neither XDG_DATA_HOME nor HOME is set: give the run a folder with --workdir".to_owned()
    })
}

/// A new run's folder under the runs folder (not created yet).
pub(super) fn new_run_dir() -> Result<PathBuf, String> {
    Ok(local_runs_dir()?.join(new_run_id()))
}

/// `--resume`'s argument: a folder, else the id of a run in the runs folder.
pub(super) fn resolve(given: &Path) -> PathBuf {
    if given.exists() || given.components().count() != 1 {
        return given.to_path_buf();
    }
    match local_runs_dir() {
        Ok(dir) if dir.join(given).exists() => dir.join(given),
        _ => given.to_path_buf(),
    }
}

/// `herd-runner runs`.
pub(super) fn list(args: &RunsArgs) -> ExitCode {
    let dir = match local_runs_dir() {
        Ok(dir) => dir,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let runs = match list_runs(&dir) {
        Ok(runs) => runs,
        Err(error) => {
            eprintln!("error: cannot read {}: {error}", dir.display());
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let now = jiff::Timestamp::now();
    if args.json {
        for run in &runs {
            println!("{}", json_line(&json(run)));
        }
    } else if runs.is_empty() {
        eprintln!(
            "No runs in {} yet: herd-runner run -f agent.yaml \"task\"",
            dir.display()
        );
    } else {
        print!("{}", for_terminal(&table(&runs, now)));
    }
    ExitCode::SUCCESS
}

fn json(run: &RunSummary) -> serde_json::Value {
    let question = match &run.state {
        RunState::WaitingForAnswer(question) => Some(question.as_str()),
        _ => None,
    };
    serde_json::json!({
        "id": run.id,
        "dir": run.dir,
        "status": run.state.describe(),
        "question": question,
        "startedAt": run.started_at.map(|at| at.to_string()),
        "task": run.task,
    })
}

/// Most characters of a task shown in the table.
const TASK_WIDTH: usize = 60;

/// The table `herd-runner runs` prints: id, status, age, task (its first line, cut).
fn table(runs: &[RunSummary], now: jiff::Timestamp) -> String {
    let rows: Vec<[String; 4]> = runs
        .iter()
        .map(|run| {
            let age = run
                .started_at
                .map_or_else(|| "?".to_owned(), |at| age(at, now));
            [
                run.id.clone(),
                run.state.describe(),
                age,
                short_task(&run.task),
            ]
        })
        .collect();
    let header = ["ID", "STATUS", "AGE", "TASK"].map(str::to_owned);
    let widths: Vec<usize> = (0..3)
        .map(|column| {
            std::iter::once(&header)
                .chain(&rows)
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line = format!(
            "{:<w0$}   {:<w1$}   {:<w2$}   {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn short_task(task: &str) -> String {
    let first = task.lines().next().unwrap_or_default().trim();
    let cut: String = first.chars().take(TASK_WIDTH).collect();
    if cut.len() < first.len() || task.lines().nth(1).is_some() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// How long ago `at` was, in its largest unit and the next (`45s`, `5m 30s`, `3h 12m`).
fn age(at: jiff::Timestamp, now: jiff::Timestamp) -> String {
    let seconds = u64::try_from(now.as_second().saturating_sub(at.as_second())).unwrap_or(0);
    let text = humantime::format_duration(Duration::from_secs(seconds)).to_string();
    text.split(' ').take(2).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use herd_crds::report::StopReason;

    use super::*;

    #[test]
    fn the_table_lines_up_and_cuts_long_tasks() {
        let now: jiff::Timestamp = "2026-12-02T19:00:00Z".parse().unwrap();
        let at = |text: &str| Some(text.parse::<jiff::Timestamp>().unwrap());
        let runs = vec![
            RunSummary {
                id: "20261202-185830-1a2b".into(),
                dir: "/d/1".into(),
                state: RunState::Running,
                started_at: at("2026-12-02T18:58:30Z"),
                task: "Compare heat pumps\nwith sources".into(),
            },
            RunSummary {
                id: "20261201-090000-ffff".into(),
                dir: "/d/2".into(),
                state: RunState::Ended(StopReason::ModelCallLimit),
                started_at: at("2026-12-01T09:00:00Z"),
                task: "x".repeat(80),
            },
            RunSummary {
                id: "old".into(),
                dir: "/d/3".into(),
                state: RunState::WaitingForAnswer("Which market?".into()),
                started_at: None,
                task: "Map the market".into(),
            },
        ];
        insta::assert_snapshot!(table(&runs, now), @r"
        ID                     STATUS                  AGE        TASK
        20261202-185830-1a2b   running                 1m 30s     Compare heat pumps…
        20261201-090000-ffff   ModelCallLimit          1day 10h   xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…
        old                    waiting for an answer   ?          Map the market
        ");
        let line = json(&runs[2]);
        assert_eq!(line["status"], "waiting for an answer");
        assert_eq!(line["question"], "Which market?");
    }

    #[test]
    fn resume_takes_a_folder_or_an_id() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("run");
        std::fs::create_dir_all(&folder).unwrap();
        assert_eq!(resolve(&folder), folder);
        assert_eq!(resolve(Path::new("a/b")), PathBuf::from("a/b"));
    }
}
