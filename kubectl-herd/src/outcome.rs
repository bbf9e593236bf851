//! Where a Run stands for `kubectl herd`, and the exit code that says so: the codes of
//! `herd-runner run`, read from `status.report.stopReason` and the `Succeeded` condition.

use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::reason::condition_type;
use herd_crds::report::{Clarification, StopReason};
use herd_crds::run::Run;

/// The Run answered.
pub const EXIT_ANSWERED: u8 = 0;
/// The Run failed, was cancelled, or the command could not do what it was asked.
pub const EXIT_FAILED: u8 = 1;
/// Bad usage (clap's code for a usage error).
pub const EXIT_USAGE: u8 = 2;
/// The Run waits for an answer and no terminal can take one.
pub const EXIT_INPUT_REQUIRED: u8 = 3;
/// A limit stopped the Run: its answer is partial.
pub const EXIT_STOPPED: u8 = 4;
/// Interrupted (Ctrl-C); the Run goes on in the cluster.
pub const EXIT_INTERRUPTED: u8 = 130;

/// What became of a Run so far.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Not finished, and no question is waiting for an answer.
    Going,
    /// The agent asked this question and no answer to it is in `spec.responses` yet.
    Waiting(Clarification),
    /// Finished with an answer; a stop reason other than `Completed` means a limit cut it.
    Answered(Option<StopReason>),
    /// Finished without an answer: the `Succeeded` condition's reason and message.
    Failed {
        /// The condition's reason, e.g. `TimedOut` or `Cancelled`.
        reason: String,
        /// The condition's message.
        message: String,
    },
}

impl Outcome {
    /// The exit code of a command that waited for this outcome; `None` while the Run goes on.
    pub fn exit_code(&self) -> Option<u8> {
        match self {
            Outcome::Going => None,
            Outcome::Waiting(_) => Some(EXIT_INPUT_REQUIRED),
            Outcome::Answered(stop) => Some(answered_exit_code(*stop)),
            Outcome::Failed { .. } => Some(EXIT_FAILED),
        }
    }
}

/// The exit code of an answered Run: 4 when a limit stopped it, else 0.
fn answered_exit_code(stop: Option<StopReason>) -> u8 {
    match stop {
        Some(reason) if reason != StopReason::Completed && reason.is_answer() => EXIT_STOPPED,
        _ => EXIT_ANSWERED,
    }
}

/// The Run's outcome from its status. `Succeeded` decides once it is `True` or `False`; while it
/// is `Unknown` (or absent), an open question in `status.report.clarification` makes it
/// [`Outcome::Waiting`] unless `spec.responses` already answers it (the report still shows the
/// question until the agent resumes).
pub fn outcome(run: &Run) -> Outcome {
    let status = run.status.as_ref();
    let report = status.and_then(|s| s.report.as_ref());
    let succeeded = status.and_then(|s| find_condition(&s.conditions, condition_type::SUCCEEDED));
    match succeeded.map(|c| c.status) {
        Some(ConditionStatus::True) => Outcome::Answered(report.and_then(|r| r.stop_reason)),
        Some(ConditionStatus::False) => Outcome::Failed {
            reason: succeeded.map(|c| c.reason.clone()).unwrap_or_default(),
            message: succeeded.map(|c| c.message.clone()).unwrap_or_default(),
        },
        Some(ConditionStatus::Unknown) | None => match pending_question(run) {
            Some(question) => Outcome::Waiting(question.clone()),
            None => Outcome::Going,
        },
    }
}

/// The question in the Run's report that `spec.responses` does not answer yet; `None` once the
/// Run has finished or is being cancelled (until the operator ends it, its status still shows
/// the question).
pub fn pending_question(run: &Run) -> Option<&Clarification> {
    if run.spec.cancel {
        return None;
    }
    let status = run.status.as_ref()?;
    let finished = find_condition(&status.conditions, condition_type::SUCCEEDED)
        .is_some_and(|c| c.status != ConditionStatus::Unknown);
    if finished {
        return None;
    }
    let question = status.report.as_ref()?.clarification.as_ref()?;
    let answered = run.spec.responses.iter().any(|r| r.id == question.id);
    (!answered).then_some(question)
}

#[cfg(test)]
mod tests {
    use herd_crds::report::ClarificationType;
    use herd_crds::run::Response;

    use super::*;
    use crate::testing::{question_run, run_with};

    #[test]
    fn going_runs_have_no_exit_code() {
        for run in [
            run_with(None, None, None),
            run_with(Some((ConditionStatus::Unknown, "Running")), None, None),
            run_with(Some((ConditionStatus::Unknown, "Queued")), None, None),
        ] {
            assert_eq!(outcome(&run), Outcome::Going);
            assert_eq!(outcome(&run).exit_code(), None);
        }
    }

    #[test]
    fn every_stop_reason_exits_as_herd_runner_run_does() {
        let all = [
            StopReason::Completed,
            StopReason::InputRequired,
            StopReason::ModelCallLimit,
            StopReason::LoopDetected,
            StopReason::TokenBudgetExceeded,
            StopReason::SubagentLimitReached,
            StopReason::ModelLengthLimit,
            StopReason::SafetyStop,
            StopReason::ModelError,
            StopReason::Cancelled,
            StopReason::TimedOut,
            StopReason::SandboxUnavailable,
            StopReason::ResultTooLarge,
            StopReason::CheckpointTooLarge,
        ];
        for stop in all {
            // The operator marks an answer (possibly cut by a limit) Succeeded=True, anything
            // else Succeeded=False; a question leaves it Unknown.
            let run = if stop == StopReason::InputRequired {
                question_run("q1", &[])
            } else if stop.is_answer() {
                run_with(Some((ConditionStatus::True, "Succeeded")), Some(stop), None)
            } else {
                run_with(Some((ConditionStatus::False, "Failed")), Some(stop), None)
            };
            assert_eq!(
                outcome(&run).exit_code(),
                Some(herd_runner::cli::exit_code(stop)),
                "{stop:?}"
            );
        }
    }

    #[test]
    fn succeeded_without_a_stop_reason_is_answered() {
        let run = run_with(Some((ConditionStatus::True, "Succeeded")), None, None);
        assert_eq!(outcome(&run), Outcome::Answered(None));
        assert_eq!(outcome(&run).exit_code(), Some(EXIT_ANSWERED));
    }

    #[test]
    fn failures_carry_the_condition() {
        let run = run_with(Some((ConditionStatus::False, "Cancelled")), None, None);
        assert_eq!(
            outcome(&run),
            Outcome::Failed {
                reason: "Cancelled".into(),
                message: "said Cancelled".into()
            }
        );
        assert_eq!(outcome(&run).exit_code(), Some(EXIT_FAILED));
    }

    #[test]
    fn a_question_waits_until_answered_or_finished() {
        let run = question_run("q1", &[]);
        let Outcome::Waiting(question) = outcome(&run) else {
            panic!("{:?}", outcome(&run));
        };
        assert_eq!(question.id, "q1");
        assert_eq!(question.kind, ClarificationType::MissingInfo);

        let answered = question_run("q1", &[Response::answer("q1", "teal")]);
        assert_eq!(
            outcome(&answered),
            Outcome::Going,
            "answered, not resumed yet"
        );
        let other = question_run("q2", &[Response::answer("q1", "teal")]);
        assert!(matches!(outcome(&other), Outcome::Waiting(q) if q.id == "q2"));

        let mut cancelling = question_run("q1", &[]);
        cancelling.spec.cancel = true;
        assert_eq!(
            outcome(&cancelling),
            Outcome::Going,
            "no answer can help it"
        );

        let mut timed_out = question_run("q1", &[]);
        if let Some(status) = timed_out.status.as_mut() {
            status.conditions[0].status = ConditionStatus::False;
            status.conditions[0].reason = "InputTimedOut".into();
        }
        assert!(
            matches!(outcome(&timed_out), Outcome::Failed { reason, .. } if reason == "InputTimedOut")
        );
        assert_eq!(pending_question(&timed_out), None);
    }
}
