//! The result a pod posts: the outcome, the thread's title, todos and usage, and the presented
//! files read through the sandbox (the `agent` container mounts no workspace). The run API
//! takes at most 2 MiB: what does not fit is named in the result instead of being sent, and
//! a run that produced its answer then ends as `ResultTooLarge`.

use herd_crds::report::StopReason;
use herd_crds::wire::{PresentedFile, ResultReport};
use herd_sandbox::truncation::take_chars;
use herd_sandbox::{SandboxClient, ToolExecutor};

use crate::agent::{AgentEvent, Observer, RunOutcome};
use crate::thread::ThreadState;

/// The run API's limit on a result body.
pub const MAX_RESULT_BYTES: usize = 2 * 1024 * 1024;
/// Bytes of JSON around one file besides its path and data (`{"path":"","dataBase64":""},`).
const FILE_OVERHEAD: usize = 32;
/// Characters of an answer kept when the answer alone is over the limit (even at six bytes a
/// character once escaped, well within it).
const KEPT_ANSWER_CHARS: usize = MAX_RESULT_BYTES / 8;

/// The result of attempt `attempt` that ended with `outcome` on `state`, without files.
pub fn outcome_report(attempt: u32, outcome: &RunOutcome, state: &ThreadState) -> ResultReport {
    ResultReport {
        attempt,
        seq: 0,
        stop_reason: outcome.stop_reason,
        text: outcome.answer.clone(),
        title: state.title.clone(),
        todos: state.todos.clone(),
        usage: state.usage_with_children(),
        files: Vec::new(),
        error: outcome.error.clone(),
    }
}

/// The result of attempt `attempt` that ended with `outcome` on `state`, with the files it
/// presented as far as they fit.
pub async fn result_report(
    attempt: u32,
    outcome: &RunOutcome,
    state: &ThreadState,
    sandbox: &dyn ToolExecutor,
    observer: &dyn Observer,
) -> ResultReport {
    let mut report = outcome_report(attempt, outcome, state);
    let mut size = json_len(&report);
    if size > MAX_RESULT_BYTES {
        report.text = take_chars(&report.text, KEPT_ANSWER_CHARS).to_owned();
        too_large(
            &mut report,
            format!(
                "the answer is {size} bytes, over the run API's {MAX_RESULT_BYTES}; its first \
                 {KEPT_ANSWER_CHARS} characters are kept"
            ),
        );
        return report;
    }
    let warn = |message: String| {
        observer.on_event(AgentEvent::Warning {
            agent: "lead".into(),
            message,
        });
    };
    let mut left_out = Vec::new();
    for path in unique(&state.artifacts) {
        let info = match sandbox.file_info(path).await {
            Ok(info) if info.exists => info,
            Ok(_) => {
                warn(format!("presented file {path} is gone: not in the result"));
                continue;
            }
            Err(error) => {
                warn(format!("presented file {path} cannot be read: {error}"));
                continue;
            }
        };
        let encoded = base64_len(info.size);
        let entry = json_len(&path)
            .saturating_add(encoded)
            .saturating_add(FILE_OVERHEAD);
        if size.saturating_add(entry) > MAX_RESULT_BYTES {
            left_out.push(format!("{path} ({} bytes)", info.size));
            continue;
        }
        match sandbox.read_file(path, info.size).await {
            Ok(content) => {
                size += json_len(&path) + content.data_base64.len() + FILE_OVERHEAD;
                report.files.push(PresentedFile {
                    path: path.to_owned(),
                    data_base64: content.data_base64,
                });
            }
            Err(error) => warn(format!("presented file {path} cannot be read: {error}")),
        }
    }
    if !left_out.is_empty() {
        report.files.clear();
        too_large(
            &mut report,
            format!(
                "the presented files do not fit the run API's {MAX_RESULT_BYTES}-byte result: {}",
                left_out.join(", ")
            ),
        );
    }
    report
}

/// What a child Run hands back to its parent: every file it wrote under `outputs/` joins what
/// it presented (a subagent has no `present_files`, as in DeerFlow, so its deliverables are
/// its outputs). The framework's hidden `.tool-results/` stay behind.
pub async fn hand_back_outputs(
    state: &mut ThreadState,
    sandbox: &dyn ToolExecutor,
    observer: &dyn Observer,
) {
    match sandbox.list_outputs().await {
        Ok(paths) => state.artifacts.extend(paths),
        Err(error) => observer.on_event(AgentEvent::Warning {
            agent: "lead".into(),
            message: format!("the files under outputs/ cannot be listed: {error}"),
        }),
    }
}

/// Marks `report` as too large: a run that answered ends so; a failed one keeps its reason,
/// with `why` added to what failed.
fn too_large(report: &mut ResultReport, why: String) {
    if report.stop_reason.is_answer() {
        report.stop_reason = StopReason::ResultTooLarge;
    }
    report.error = Some(match report.error.take() {
        Some(error) => format!("{error}; {why}"),
        None => why,
    });
}

fn unique(paths: &[String]) -> Vec<&str> {
    let mut seen = std::collections::BTreeSet::new();
    paths
        .iter()
        .map(String::as_str)
        .filter(|path| seen.insert(*path))
        .collect()
}

fn base64_len(bytes: u64) -> usize {
    usize::try_from(bytes.div_ceil(3).saturating_mul(4)).unwrap_or(usize::MAX)
}

fn json_len(value: &impl serde::Serialize) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |json| json.len())
}

/// The text of a result for the fallback report: the answer, or when there is none what failed.
pub fn fallback_text(report: &ResultReport) -> &str {
    if report.text.trim().is_empty() {
        report.error.as_deref().unwrap_or_default()
    } else {
        &report.text
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use base64::Engine as _;
    use herd_sandbox::{InProcessExecutor, SandboxHost, SandboxRoots};

    use super::*;
    use crate::test_doubles::RecordingObserver;

    fn sandbox(dir: &std::path::Path, files: &[(&str, Vec<u8>)]) -> InProcessExecutor {
        let roots = SandboxRoots::under(dir);
        let outputs = roots.user_data.join("outputs");
        std::fs::create_dir_all(&outputs).unwrap();
        for (name, bytes) in files {
            std::fs::write(outputs.join(name), bytes).unwrap();
        }
        InProcessExecutor(Arc::new(SandboxHost::new(&roots).unwrap()))
    }

    fn finished(answer: &str, artifacts: &[&str]) -> (RunOutcome, ThreadState) {
        let mut state = ThreadState::new("task");
        state.title = Some("Brief".into());
        state.usage.model_calls = 3;
        state.artifacts = artifacts.iter().map(|a| (*a).to_owned()).collect();
        let outcome = RunOutcome {
            stop_reason: StopReason::Completed,
            answer: answer.into(),
            error: None,
            question: None,
        };
        (outcome, state)
    }

    fn decoded(file: &PresentedFile) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .decode(&file.data_base64)
            .unwrap()
    }

    #[tokio::test]
    async fn a_child_hands_back_every_output_once_with_what_it_presented() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = sandbox(
            dir.path(),
            &[
                ("note.md", b"note\n".to_vec()),
                ("brief.md", b"brief".to_vec()),
            ],
        );
        let (outcome, mut state) = finished("Written.", &["/mnt/user-data/outputs/brief.md"]);
        let observer = RecordingObserver::default();
        hand_back_outputs(&mut state, &sandbox, &observer).await;
        let report = result_report(1, &outcome, &state, &sandbox, &observer).await;
        let paths: Vec<&str> = report.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/mnt/user-data/outputs/brief.md",
                "/mnt/user-data/outputs/note.md"
            ]
        );
        assert_eq!(decoded(&report.files[1]), b"note\n");
    }

    #[tokio::test]
    async fn presented_files_are_read_through_the_sandbox_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let binary: Vec<u8> = (0..=255).collect();
        let sandbox = sandbox(
            dir.path(),
            &[
                ("brief.md", b"# Brief\n".to_vec()),
                ("chart.png", binary.clone()),
            ],
        );
        let (outcome, state) = finished(
            "Here it is.",
            &[
                "/mnt/user-data/outputs/brief.md",
                "/mnt/user-data/outputs/chart.png",
                "/mnt/user-data/outputs/brief.md",
                "/mnt/user-data/outputs/deleted.md",
            ],
        );
        let observer = RecordingObserver::default();
        let report = result_report(2, &outcome, &state, &sandbox, &observer).await;
        assert_eq!(report.attempt, 2);
        assert_eq!(report.stop_reason, StopReason::Completed);
        assert_eq!(report.text, "Here it is.");
        assert_eq!(report.title.as_deref(), Some("Brief"));
        assert_eq!(report.usage.model_calls, 3);
        let paths: Vec<&str> = report.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/mnt/user-data/outputs/brief.md",
                "/mnt/user-data/outputs/chart.png"
            ]
        );
        assert_eq!(decoded(&report.files[0]), b"# Brief\n");
        assert_eq!(decoded(&report.files[1]), binary);
        assert_eq!(
            observer.warnings(),
            ["presented file /mnt/user-data/outputs/deleted.md is gone: not in the result"]
        );
        assert!(json_len(&report) <= MAX_RESULT_BYTES);
    }

    #[tokio::test]
    async fn files_over_the_limit_make_the_result_too_large_and_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let big = vec![b'x'; MAX_RESULT_BYTES];
        let sandbox = sandbox(
            dir.path(),
            &[("small.txt", b"ok".to_vec()), ("data.csv", big)],
        );
        let (outcome, state) = finished(
            "Done.",
            &[
                "/mnt/user-data/outputs/small.txt",
                "/mnt/user-data/outputs/data.csv",
            ],
        );
        let report =
            result_report(1, &outcome, &state, &sandbox, &RecordingObserver::default()).await;
        assert_eq!(report.stop_reason, StopReason::ResultTooLarge);
        assert!(report.files.is_empty());
        assert_eq!(report.text, "Done.", "the answer is kept");
        assert_eq!(
            report.error.as_deref(),
            Some(
                "the presented files do not fit the run API's 2097152-byte result: \
                 /mnt/user-data/outputs/data.csv (2097152 bytes)"
            )
        );

        let (mut failed, state) = finished("", &["/mnt/user-data/outputs/data.csv"]);
        failed.stop_reason = StopReason::ModelError;
        failed.error = Some("the model server is down".into());
        let report =
            result_report(1, &failed, &state, &sandbox, &RecordingObserver::default()).await;
        assert_eq!(
            report.stop_reason,
            StopReason::ModelError,
            "the failure stays"
        );
        assert!(
            report
                .error
                .as_deref()
                .unwrap()
                .starts_with("the model server is down; the presented files do not fit")
        );
        assert_eq!(fallback_text(&report), report.error.as_deref().unwrap());
    }

    #[tokio::test]
    async fn an_answer_over_the_limit_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = sandbox(dir.path(), &[]);
        let (outcome, state) = finished(&"ü".repeat(MAX_RESULT_BYTES), &[]);
        let report =
            result_report(1, &outcome, &state, &sandbox, &RecordingObserver::default()).await;
        assert_eq!(report.stop_reason, StopReason::ResultTooLarge);
        assert_eq!(report.text.chars().count(), KEPT_ANSWER_CHARS);
        assert!(json_len(&report) <= MAX_RESULT_BYTES);
        assert_eq!(fallback_text(&report), report.text);
    }
}
