//! Where local runs live and what each is doing: `$XDG_DATA_HOME/herd/runs/<id>/` (by default
//! `~/.local/share/herd/runs/<id>/`), listed by `herd-runner runs` from what each run folder's
//! `.herd/` holds.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use herd_crds::report::StopReason;

use super::run_ending::RunEnding;
use super::run_record::RunRecord;
use super::workdir::Workdir;
use crate::control::checkpoint::{Checkpoint, CheckpointStop};

/// The file in `.herd/` holding the pid of the process running the run, while it runs.
pub const PID_FILE: &str = "pid";

/// The folder of local runs: `$XDG_DATA_HOME/herd/runs`, else `$HOME/.local/share/herd/runs`
/// (the XDG default); `None` without either.
pub fn runs_dir(xdg_data_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    // The XDG spec: a relative value is invalid and ignored.
    let data = xdg_data_home
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| home.map(|home| PathBuf::from(home).join(".local").join("share")))?;
    Some(data.join("herd").join("runs"))
}

/// A new run's id: its start time, then random hex so two runs started in the same second
/// get two folders.
pub fn new_run_id() -> String {
    let stamp = jiff::Zoned::now().strftime("%Y%m%d-%H%M%S").to_string();
    format!("{stamp}-{:04x}", rand::random::<u16>())
}

/// What a run is doing, as its folder says.
#[derive(Clone, Debug, PartialEq)]
pub enum RunState {
    /// A live process runs it.
    Running,
    /// It asked a question: `--resume <dir> --answer "..."`.
    WaitingForAnswer(String),
    /// A signal stopped it: `--resume <dir>`.
    Interrupted,
    /// It ended so.
    Ended(StopReason),
    /// Its process is gone without an ending (killed, crashed).
    Died,
}

impl RunState {
    /// One short phrase for the list.
    pub fn describe(&self) -> String {
        match self {
            RunState::Running => "running".into(),
            RunState::WaitingForAnswer(_) => "waiting for an answer".into(),
            RunState::Interrupted => "interrupted".into(),
            RunState::Ended(reason) => format!("{reason:?}"),
            RunState::Died => "died".into(),
        }
    }
}

/// One local run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// The folder's name.
    pub id: String,
    pub dir: PathBuf,
    pub state: RunState,
    /// When it started, if its record says.
    pub started_at: Option<jiff::Timestamp>,
    pub task: String,
}

/// The runs under `dir`, newest first; folders that are not runs are left out, and no
/// folder at all is an empty list.
pub fn list_runs(dir: &Path) -> std::io::Result<Vec<RunSummary>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut runs: Vec<RunSummary> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| summary(&entry.path()))
        .collect();
    runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(b.id.cmp(&a.id)));
    Ok(runs)
}

/// The run in `dir`, if it is one (it has a run record).
pub fn summary(dir: &Path) -> Option<RunSummary> {
    let state_dir = Workdir::state_dir_of(dir);
    let record = RunRecord::read(&state_dir).ok()?;
    Some(RunSummary {
        id: dir.file_name()?.to_string_lossy().into_owned(),
        dir: dir.to_path_buf(),
        state: state(&state_dir),
        started_at: record.started_at(),
        task: record.task().to_owned(),
    })
}

fn state(state_dir: &Path) -> RunState {
    if pid_alive(state_dir) {
        return RunState::Running;
    }
    if let Ok(checkpoint) = Checkpoint::load(state_dir) {
        return match checkpoint.stop {
            CheckpointStop::Question(question) => RunState::WaitingForAnswer(question.question),
            CheckpointStop::Interrupted(_) => RunState::Interrupted,
            CheckpointStop::Approval(requests) => RunState::WaitingForAnswer(
                requests
                    .iter()
                    .map(|r| format!("approve {}? ({})", r.summary(), r.id))
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        };
    }
    match RunEnding::read(state_dir) {
        Some(ending) => RunState::Ended(ending.stop_reason),
        None => RunState::Died,
    }
}

/// Whether the pid the run wrote is a live process.
fn pid_alive(state_dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(state_dir.join(PID_FILE)) else {
        return false;
    };
    text.trim()
        .parse::<i32>()
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok())
}

#[cfg(test)]
mod tests {
    use herd_crds::report::{Clarification, ClarificationType, Usage};

    use super::*;
    use crate::runtime::local_plan::Overrides;
    use crate::runtime::manifests::LocalManifests;
    use crate::thread::ThreadState;

    #[test]
    fn the_runs_folder_follows_xdg() {
        assert_eq!(
            runs_dir(Some("/data".into()), Some("/home/u".into())),
            Some(PathBuf::from("/data/herd/runs"))
        );
        assert_eq!(
            runs_dir(Some("relative".into()), Some("/home/u".into())),
            Some(PathBuf::from("/home/u/.local/share/herd/runs")),
            "a relative XDG_DATA_HOME is ignored"
        );
        assert_eq!(runs_dir(None, None), None);
        assert_ne!(new_run_id(), new_run_id());
    }

    fn run_folder(root: &Path, id: &str, task: &str) -> PathBuf {
        let dir = root.join(id);
        std::fs::create_dir_all(dir.join(".herd")).unwrap();
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/local/researcher.yaml");
        let manifests = LocalManifests::load(&[agent]).unwrap();
        RunRecord::new(&manifests, task, &Overrides::default(), None)
            .write(&dir.join(".herd"))
            .unwrap();
        dir
    }

    #[test]
    fn each_run_shows_what_its_folder_says() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(list_runs(&root.path().join("none")).unwrap(), vec![]);
        let ended = run_folder(root.path(), "a-ended", "Compare heat pumps");
        RunEnding {
            stop_reason: StopReason::Completed,
            finished_at: "2026-12-02T19:00:00Z".into(),
            title: None,
            usage: Usage::default(),
        }
        .write(&ended.join(".herd"))
        .unwrap();
        let asked = run_folder(root.path(), "b-asked", "Plan a trip");
        let question = Clarification {
            id: "q-1".into(),
            question: "Where to?".into(),
            kind: ClarificationType::MissingInfo,
            context: None,
            options: vec![],
            asked_at: None,
        };
        Checkpoint::question(question, ThreadState::new("Plan a trip"))
            .save(&asked.join(".herd"))
            .unwrap();
        let stopped = run_folder(root.path(), "c-stopped", "Sort photos");
        Checkpoint::interrupted("SIGINT", ThreadState::new("Sort photos"))
            .save(&stopped.join(".herd"))
            .unwrap();
        let running = run_folder(root.path(), "d-running", "Watch logs");
        std::fs::write(
            running.join(".herd").join(PID_FILE),
            std::process::id().to_string(),
        )
        .unwrap();
        run_folder(root.path(), "e-died", "Crash");
        std::fs::create_dir_all(root.path().join("not-a-run")).unwrap();

        let runs = list_runs(root.path()).unwrap();
        let states: Vec<(&str, RunState, &str)> = runs
            .iter()
            .map(|run| (run.id.as_str(), run.state.clone(), run.task.as_str()))
            .collect();
        assert_eq!(
            states,
            vec![
                ("e-died", RunState::Died, "Crash"),
                ("d-running", RunState::Running, "Watch logs"),
                ("c-stopped", RunState::Interrupted, "Sort photos"),
                (
                    "b-asked",
                    RunState::WaitingForAnswer("Where to?".into()),
                    "Plan a trip"
                ),
                (
                    "a-ended",
                    RunState::Ended(StopReason::Completed),
                    "Compare heat pumps"
                ),
            ],
            "newest first (same second: by id)"
        );
        assert!(runs.iter().all(|run| run.started_at.is_some()));
    }
}
