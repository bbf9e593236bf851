//! `status.report` as the run API writes it: always whole, composed from the live report and
//! the runner's body. Pure. A report of an older attempt, or an older `seq` of the same attempt,
//! is stale and dropped; a terminal report of an attempt is final (the Run has ended on it);
//! texts are cut to the CRD's limits so a write never fails on size. A question stops the
//! report at `InputRequired` until the runner reports again.

use herd_crds::approval::ApprovalRequest;
use herd_crds::report::{Artifact, Clarification, SandboxReport, StopReason, Todo};
use herd_crds::run::{MAX_RESULT_TEXT, RunReport, RunResult};
use herd_crds::wire::{ProgressReport, ResultReport};

use super::failure::Failure;
use crate::decide::run_status::is_terminal;

/// Most characters of `status.report.title`.
pub const MAX_TITLE: usize = 256;
/// Most todos in `status.report.todos`.
pub const MAX_TODOS: usize = 100;
/// Most characters of one todo.
pub const MAX_TODO: usize = 2048;

/// `text` cut to at most `max` characters, and whether it was cut.
pub fn truncate_chars(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((end, _)) => (text[..end].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

fn title(title: Option<&str>) -> Option<String> {
    title.map(|t| truncate_chars(t, MAX_TITLE).0)
}

fn todos(todos: &[Todo]) -> Vec<Todo> {
    todos
        .iter()
        .take(MAX_TODOS)
        .map(|todo| Todo {
            content: truncate_chars(&todo.content, MAX_TODO).0,
            status: todo.status,
        })
        .collect()
}

/// The attempt's sandbox layers: the body's (cut to the CRD's limits), else what the live
/// report of the same attempt has.
fn sandbox(
    body: Option<&SandboxReport>,
    same_attempt: Option<&RunReport>,
) -> Option<SandboxReport> {
    body.map(SandboxReport::bounded)
        .or_else(|| same_attempt.and_then(|live| live.sandbox.clone()))
}

fn terminal(report: &RunReport) -> bool {
    report.stop_reason.is_some_and(is_terminal)
}

/// The report after a progress report (and the sandbox's layers sent with it), or `None` when
/// the progress is stale: the live report is of a later attempt, of a later or equal `seq`, or
/// already ends the attempt.
pub fn after_progress(
    live: Option<&RunReport>,
    progress: &ProgressReport,
    layers: Option<&SandboxReport>,
) -> Option<RunReport> {
    if let Some(live) = live
        && (live.attempt > progress.attempt
            || (live.attempt == progress.attempt && (live.seq >= progress.seq || terminal(live))))
    {
        return None;
    }
    let same_attempt = live.filter(|l| l.attempt == progress.attempt);
    Some(RunReport {
        attempt: progress.attempt,
        seq: progress.seq,
        // A title is written once; a progress report without one keeps it.
        title: title(progress.title.as_deref())
            .or_else(|| same_attempt.and_then(|l| l.title.clone())),
        todos: todos(&progress.todos),
        usage: progress.usage.clone(),
        // The runner moved on: the question (if any) was answered, the approvals decided.
        clarification: None,
        approvals: Vec::new(),
        result: None,
        stop_reason: None,
        sandbox: sandbox(layers, same_attempt),
    })
}

/// How a result changes the report.
#[derive(Clone, Debug, PartialEq)]
pub enum AfterResult {
    /// Write this report.
    Write(Box<RunReport>),
    /// The attempt's report is terminal already (a retried post): nothing to write; the stop
    /// reason stored.
    Stored(StopReason),
}

/// What the result ConfigMap step produced for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stored {
    /// The answer and these files are in `<run>-result`.
    Written(Vec<Artifact>),
    /// They did not fit: why, in a sentence.
    TooLarge(String),
}

/// The report after a result, or why the result is refused (a body `seq` below the live one).
pub fn after_result(
    live: Option<&RunReport>,
    result: &ResultReport,
    stored: &Stored,
) -> Result<AfterResult, Failure> {
    if let Some(live) = live.filter(|l| l.attempt == result.attempt) {
        if terminal(live)
            && let Some(stop) = live.stop_reason
        {
            return Ok(AfterResult::Stored(stop));
        }
        if live.seq > result.seq {
            return Err(Failure::bad_request(format!(
                "seq {} is below the report's {}",
                result.seq, live.seq
            )));
        }
    }
    let (stop_reason, result_part) = match stored {
        Stored::Written(artifacts) => {
            let (text, truncated) = truncate_chars(&result.text, MAX_RESULT_TEXT);
            let text = match (&result.error, result.stop_reason.is_answer()) {
                // A failure's text is what the Run's message shows; the runner's error says why.
                (Some(error), false) if text.is_empty() => truncate_chars(error, MAX_RESULT_TEXT).0,
                _ => text,
            };
            (
                result.stop_reason,
                RunResult {
                    text,
                    truncated,
                    artifacts: artifacts.clone(),
                },
            )
        }
        Stored::TooLarge(why) => (
            StopReason::ResultTooLarge,
            RunResult {
                text: truncate_chars(why, MAX_RESULT_TEXT).0,
                truncated: false,
                artifacts: Vec::new(),
            },
        ),
    };
    let same_attempt = live.filter(|l| l.attempt == result.attempt);
    Ok(AfterResult::Write(Box::new(RunReport {
        attempt: result.attempt,
        seq: result.seq,
        title: title(result.title.as_deref())
            .or_else(|| same_attempt.and_then(|l| l.title.clone())),
        todos: todos(&result.todos),
        usage: result.usage.clone(),
        clarification: None,
        approvals: Vec::new(),
        result: Some(result_part),
        stop_reason: Some(stop_reason),
        sandbox: sandbox(None, same_attempt),
    })))
}

/// What the checkpoint ConfigMap step produced for a question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checkpointed {
    /// The checkpoint is in `<run>-checkpoint`.
    Written,
    /// It did not fit: why, in a sentence.
    TooLarge(String),
}

/// How a question changes the report.
#[derive(Clone, Debug, PartialEq)]
pub enum AfterClarification {
    /// Write this report.
    Write(Box<RunReport>),
    /// The live report has this question of this `seq` already (a retried post), or ends the
    /// attempt: nothing to write; the stop reason stored.
    Stored(StopReason),
}

/// What a runner waits for a person about: a question, or the tool calls of one turn held
/// for approval. Both stop the report at `InputRequired` the same way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Awaiting<'a> {
    Question(&'a Clarification),
    Approval(&'a [ApprovalRequest]),
}

impl Awaiting<'_> {
    /// The ids the answers will quote.
    pub fn ids(&self) -> Vec<&str> {
        match self {
            Awaiting::Question(question) => vec![question.id.as_str()],
            Awaiting::Approval(requests) => requests.iter().map(|r| r.id.as_str()).collect(),
        }
    }

    /// Whether `report` shows exactly this already.
    fn shown_in(&self, report: &RunReport) -> bool {
        match self {
            Awaiting::Question(question) => report.clarification.as_ref() == Some(*question),
            Awaiting::Approval(requests) => report.approvals.as_slice() == *requests,
        }
    }
}

/// The report after a question (or approvals) of `attempt` at `seq`: `InputRequired` with the question (the
/// title, todos and usage of the attempt kept, as the body carries none: from `progress`, the
/// newest progress the run API took, when the live report does not have it yet), or
/// `CheckpointTooLarge` when the checkpoint did not fit; refused when `seq` is below the live
/// one. `layers` came with `progress`; the attempt's layers are kept either way.
pub fn after_clarification(
    live: Option<&RunReport>,
    attempt: u32,
    seq: u64,
    asked: Awaiting<'_>,
    checkpointed: &Checkpointed,
    progress: Option<&ProgressReport>,
    layers: Option<&SandboxReport>,
) -> Result<AfterClarification, Failure> {
    let same_attempt = live.filter(|l| l.attempt == attempt);
    if let Some(live) = same_attempt {
        if terminal(live)
            && let Some(stop) = live.stop_reason
        {
            return Ok(AfterClarification::Stored(stop));
        }
        if live.seq > seq {
            return Err(Failure::bad_request(format!(
                "seq {seq} is below the report's {}",
                live.seq
            )));
        }
        if live.seq == seq && asked.shown_in(live) {
            return Ok(AfterClarification::Stored(StopReason::InputRequired));
        }
    }
    let (stop_reason, clarification, approvals, result) = match (checkpointed, asked) {
        (Checkpointed::Written, Awaiting::Question(question)) => (
            StopReason::InputRequired,
            Some(question.clone()),
            Vec::new(),
            None,
        ),
        (Checkpointed::Written, Awaiting::Approval(requests)) => {
            (StopReason::InputRequired, None, requests.to_vec(), None)
        }
        (Checkpointed::TooLarge(why), _) => (
            StopReason::CheckpointTooLarge,
            None,
            Vec::new(),
            Some(RunResult {
                text: truncate_chars(why, MAX_RESULT_TEXT).0,
                truncated: false,
                artifacts: Vec::new(),
            }),
        ),
    };
    let unwritten = progress.filter(|p| {
        p.attempt == attempt && p.seq < seq && same_attempt.is_none_or(|l| p.seq > l.seq)
    });
    let sandbox = sandbox(unwritten.and(layers), same_attempt);
    let kept_title = || same_attempt.and_then(|l| l.title.clone());
    let (title, todos, usage) = match unwritten {
        Some(p) => (
            title(p.title.as_deref()).or_else(kept_title),
            todos(&p.todos),
            p.usage.clone(),
        ),
        None => (
            kept_title(),
            same_attempt.map(|l| l.todos.clone()).unwrap_or_default(),
            same_attempt.map(|l| l.usage.clone()).unwrap_or_default(),
        ),
    };
    Ok(AfterClarification::Write(Box::new(RunReport {
        attempt,
        seq,
        title,
        todos,
        usage,
        clarification,
        approvals,
        result,
        stop_reason: Some(stop_reason),
        sandbox,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::report::{ClarificationType, TodoStatus, Usage};
    use proptest::prelude::*;

    fn live(attempt: u32, seq: u64, stop: Option<StopReason>) -> RunReport {
        RunReport {
            attempt,
            seq,
            title: Some("Old title".into()),
            stop_reason: stop,
            ..RunReport::default()
        }
    }

    fn progress(attempt: u32, seq: u64) -> ProgressReport {
        ProgressReport {
            attempt,
            seq,
            title: None,
            todos: vec![Todo {
                content: "step".into(),
                status: TodoStatus::InProgress,
            }],
            usage: Usage {
                model_calls: 3,
                ..Usage::default()
            },
            ..ProgressReport::default()
        }
    }

    fn result(attempt: u32, seq: u64, text: &str) -> ResultReport {
        ResultReport {
            attempt,
            seq,
            stop_reason: StopReason::Completed,
            text: text.into(),
            title: Some("Final".into()),
            todos: vec![],
            usage: Usage::default(),
            files: vec![],
            error: None,
        }
    }

    #[test]
    fn progress_replaces_the_report_and_keeps_the_title() {
        let next = after_progress(Some(&live(1, 2, None)), &progress(1, 3), None).unwrap();
        assert_eq!((next.attempt, next.seq), (1, 3));
        assert_eq!(next.title.as_deref(), Some("Old title"));
        assert_eq!(next.usage.model_calls, 3);
        assert_eq!(next.todos.len(), 1);
        let titled = ProgressReport {
            title: Some("New".into()),
            ..progress(1, 4)
        };
        assert_eq!(
            after_progress(Some(&next), &titled, None)
                .unwrap()
                .title
                .as_deref(),
            Some("New")
        );
        let first = after_progress(None, &progress(1, 1), None).unwrap();
        assert_eq!(first.title, None);
        let next_attempt = after_progress(Some(&live(1, 9, None)), &progress(2, 1), None).unwrap();
        assert_eq!(
            next_attempt.title, None,
            "another attempt's title is not kept"
        );
    }

    #[test]
    fn the_sandbox_layers_stay_for_their_attempt_within_the_crd_limits() {
        use herd_crds::report::{MAX_SANDBOX_LAYER_DETAIL, SandboxLayer};
        let layers = SandboxReport {
            layers: vec![SandboxLayer::new(
                "landlock",
                true,
                "x".repeat(MAX_SANDBOX_LAYER_DETAIL + 10),
            )],
        };
        let first = after_progress(None, &progress(1, 1), Some(&layers)).unwrap();
        let kept = first.sandbox.clone().unwrap();
        assert_eq!(kept.layers[0].detail.len(), MAX_SANDBOX_LAYER_DETAIL);
        let next = after_progress(Some(&first), &progress(1, 2), None).unwrap();
        assert_eq!(
            next.sandbox,
            Some(kept),
            "kept while the attempt reports without them"
        );
        let retried = after_progress(Some(&next), &progress(2, 1), None).unwrap();
        assert_eq!(
            retried.sandbox, None,
            "another attempt's sandbox is not this one's"
        );
    }

    #[test]
    fn stale_or_late_progress_is_dropped() {
        assert_eq!(
            after_progress(Some(&live(1, 3, None)), &progress(1, 3), None),
            None
        );
        assert_eq!(
            after_progress(Some(&live(1, 4, None)), &progress(1, 3), None),
            None
        );
        assert_eq!(
            after_progress(Some(&live(2, 1, None)), &progress(1, 9), None),
            None
        );
        assert_eq!(
            after_progress(
                Some(&live(1, 3, Some(StopReason::Completed))),
                &progress(1, 9),
                None
            ),
            None,
            "a result is final"
        );
    }

    #[test]
    fn progress_after_a_question_clears_it() {
        let mut asked = live(1, 3, Some(StopReason::InputRequired));
        asked.clarification = Some(Clarification {
            id: "q".into(),
            question: "?".into(),
            kind: ClarificationType::MissingInfo,
            context: None,
            options: vec![],
            asked_at: None,
        });
        let next = after_progress(Some(&asked), &progress(1, 4), None).unwrap();
        assert_eq!((next.clarification, next.stop_reason), (None, None));
    }

    #[test]
    fn a_result_is_written_with_its_text_cut_to_the_limit() {
        let long = "é".repeat(MAX_RESULT_TEXT + 10);
        let artifacts = vec![Artifact {
            path: "/mnt/user-data/outputs/a.md".into(),
            size: 3,
        }];
        let AfterResult::Write(report) = after_result(
            Some(&live(1, 5, None)),
            &result(1, 6, &long),
            &Stored::Written(artifacts.clone()),
        )
        .unwrap() else {
            panic!("written");
        };
        let stored = report.result.unwrap();
        assert_eq!(stored.text.chars().count(), MAX_RESULT_TEXT);
        assert!(stored.truncated);
        assert_eq!(stored.artifacts, artifacts);
        assert_eq!(report.stop_reason, Some(StopReason::Completed));
        assert_eq!(report.title.as_deref(), Some("Final"));
        assert_eq!((report.attempt, report.seq), (1, 6));
    }

    #[test]
    fn a_result_too_large_fails_so_and_says_why() {
        let AfterResult::Write(report) = after_result(
            None,
            &result(1, 1, "big"),
            &Stored::TooLarge("1 MiB is over 900 KiB".into()),
        )
        .unwrap() else {
            panic!("written");
        };
        assert_eq!(report.stop_reason, Some(StopReason::ResultTooLarge));
        let stored = report.result.unwrap();
        assert_eq!(stored.text, "1 MiB is over 900 KiB");
        assert!(stored.artifacts.is_empty());
    }

    #[test]
    fn a_failures_error_is_its_text_when_it_has_none() {
        let failed = ResultReport {
            stop_reason: StopReason::ModelError,
            error: Some("the model answered 500".into()),
            ..result(1, 2, "")
        };
        let AfterResult::Write(report) =
            after_result(None, &failed, &Stored::Written(vec![])).unwrap()
        else {
            panic!("written");
        };
        assert_eq!(report.result.unwrap().text, "the model answered 500");
    }

    #[test]
    fn a_retried_result_is_stored_once_and_an_older_seq_refused() {
        let done = live(1, 6, Some(StopReason::Completed));
        assert_eq!(
            after_result(Some(&done), &result(1, 6, "x"), &Stored::Written(vec![])),
            Ok(AfterResult::Stored(StopReason::Completed))
        );
        let refused = after_result(
            Some(&live(1, 7, None)),
            &result(1, 6, "x"),
            &Stored::Written(vec![]),
        )
        .unwrap_err();
        assert_eq!(refused.status.as_u16(), 400);
        assert!(
            matches!(
                after_result(
                    Some(&live(1, 6, None)),
                    &result(1, 6, "x"),
                    &Stored::Written(vec![])
                ),
                Ok(AfterResult::Write(_))
            ),
            "an equal seq is allowed (as the CRD's rule allows it)"
        );
        assert!(
            matches!(
                after_result(
                    Some(&live(1, 9, Some(StopReason::InputRequired))),
                    &result(2, 1, "x"),
                    &Stored::Written(vec![])
                ),
                Ok(AfterResult::Write(_))
            ),
            "a new attempt"
        );
    }

    #[test]
    fn titles_and_todos_fit_the_crd() {
        let many = ProgressReport {
            title: Some("t".repeat(1000)),
            todos: (0..150)
                .map(|_| Todo {
                    content: "c".repeat(5000),
                    status: TodoStatus::Pending,
                })
                .collect(),
            ..progress(1, 1)
        };
        let next = after_progress(None, &many, None).unwrap();
        assert_eq!(next.title.unwrap().chars().count(), MAX_TITLE);
        assert_eq!(next.todos.len(), MAX_TODOS);
        assert!(
            next.todos
                .iter()
                .all(|t| t.content.chars().count() == MAX_TODO)
        );
    }

    fn question(id: &str) -> Clarification {
        Clarification {
            id: id.into(),
            question: "Which market?".into(),
            kind: ClarificationType::ApproachChoice,
            context: None,
            options: vec!["EU".into(), "US".into()],
            asked_at: None,
        }
    }

    #[test]
    fn the_sandboxs_layers_are_kept_for_the_attempt_and_cut_to_the_crd() {
        use herd_crds::report::{MAX_SANDBOX_LAYER_DETAIL, SandboxLayer};
        let layers = SandboxReport {
            layers: vec![SandboxLayer::new("landlock", true, "x".repeat(1000))],
        };
        let first = after_progress(None, &progress(1, 1), Some(&layers)).unwrap();
        let told = first.sandbox.clone().unwrap();
        assert_eq!(
            told.layers[0].detail.chars().count(),
            MAX_SANDBOX_LAYER_DETAIL
        );
        let next = after_progress(Some(&first), &progress(1, 2), None).unwrap();
        assert_eq!(next.sandbox.as_ref(), Some(&told), "kept without a new one");
        let next_attempt = after_progress(Some(&next), &progress(2, 1), None).unwrap();
        assert_eq!(
            next_attempt.sandbox, None,
            "another attempt's sandbox is not kept"
        );
        let AfterResult::Write(done) =
            after_result(Some(&next), &result(1, 3, "done"), &Stored::Written(vec![])).unwrap()
        else {
            panic!("written");
        };
        assert_eq!(done.sandbox, Some(told));
    }

    #[test]
    fn a_question_keeps_the_attempts_progress_and_waits_for_input() {
        let mut going = live(1, 4, None);
        going.todos = todos(&progress(1, 4).todos);
        going.usage.model_calls = 4;
        let AfterClarification::Write(report) = after_clarification(
            Some(&going),
            1,
            5,
            Awaiting::Question(&question("q-1")),
            &Checkpointed::Written,
            None,
            None,
        )
        .unwrap() else {
            panic!("written");
        };
        assert_eq!((report.attempt, report.seq), (1, 5));
        assert_eq!(report.stop_reason, Some(StopReason::InputRequired));
        assert_eq!(report.clarification, Some(question("q-1")));
        assert_eq!(report.title.as_deref(), Some("Old title"));
        assert_eq!((report.todos.len(), report.usage.model_calls), (1, 4));
        assert_eq!(report.result, None);
        let AfterClarification::Write(fresh) = after_clarification(
            Some(&going),
            2,
            1,
            Awaiting::Question(&question("q-2")),
            &Checkpointed::Written,
            None,
            None,
        )
        .unwrap() else {
            panic!("written");
        };
        assert_eq!(
            (fresh.title, fresh.todos.len(), fresh.usage),
            (None, 0, Usage::default()),
            "another attempt's progress is not kept"
        );
    }

    #[test]
    fn a_question_carries_the_progress_not_written_yet_and_no_older_one() {
        let going = live(1, 2, None);
        let mut unwritten = progress(1, 4);
        unwritten.title = Some("Plan".into());
        let ask = |progress: &ProgressReport| {
            let AfterClarification::Write(report) = after_clarification(
                Some(&going),
                1,
                5,
                Awaiting::Question(&question("q-1")),
                &Checkpointed::Written,
                Some(progress),
                None,
            )
            .unwrap() else {
                panic!("written");
            };
            report
        };
        let report = ask(&unwritten);
        assert_eq!(report.title.as_deref(), Some("Plan"));
        assert_eq!((report.todos.len(), report.usage.model_calls), (1, 3));
        for stale in [progress(1, 1), progress(1, 6), progress(2, 4)] {
            let report = ask(&stale);
            assert_eq!(
                (report.todos.len(), report.title.as_deref()),
                (0, Some("Old title")),
                "{stale:?} is not the question's progress"
            );
        }
    }

    #[test]
    fn a_checkpoint_too_large_fails_the_run_saying_why() {
        let AfterClarification::Write(report) = after_clarification(
            None,
            1,
            1,
            Awaiting::Question(&question("q-1")),
            &Checkpointed::TooLarge("1 MiB is over 900 KiB".into()),
            None,
            None,
        )
        .unwrap() else {
            panic!("written");
        };
        assert_eq!(report.stop_reason, Some(StopReason::CheckpointTooLarge));
        assert!(is_terminal(StopReason::CheckpointTooLarge));
        assert_eq!(report.clarification, None);
        assert_eq!(report.result.unwrap().text, "1 MiB is over 900 KiB");
    }

    #[test]
    fn a_retried_question_is_stored_once_and_older_or_late_ones_are_not_written() {
        let mut asked = live(1, 5, Some(StopReason::InputRequired));
        asked.clarification = Some(question("q-1"));
        let retry = |seq, id: &str| {
            after_clarification(
                Some(&asked),
                1,
                seq,
                Awaiting::Question(&question(id)),
                &Checkpointed::Written,
                None,
                None,
            )
        };
        assert_eq!(
            retry(5, "q-1"),
            Ok(AfterClarification::Stored(StopReason::InputRequired))
        );
        assert!(
            matches!(retry(6, "q-2"), Ok(AfterClarification::Write(_))),
            "the next question"
        );
        assert_eq!(retry(4, "q-0").unwrap_err().status.as_u16(), 400);
        let done = live(1, 7, Some(StopReason::Completed));
        assert_eq!(
            after_clarification(
                Some(&done),
                1,
                8,
                Awaiting::Question(&question("q")),
                &Checkpointed::Written,
                None,
                None
            ),
            Ok(AfterClarification::Stored(StopReason::Completed)),
            "a result is final"
        );
    }

    proptest! {
        #[test]
        fn truncation_keeps_a_prefix_within_the_limit(text in "\\PC{0,80}", max in 0usize..40) {
            let (cut, truncated) = truncate_chars(&text, max);
            prop_assert!(text.starts_with(&cut));
            prop_assert!(cut.chars().count() <= max);
            prop_assert_eq!(truncated, text.chars().count() > max);
        }
    }
}
