//! A child Run's outcome for its parent's `task` call, from the child as read live (the caches
//! drop `status.report.result`). Pure. The child's `Succeeded` condition says how it ended (the
//! operator decides cancel and deadlines, not only the runner); its report gives the stop
//! reason, the answer as status keeps it (16 KiB, with a note when cut), the usage and the files
//! it presented.

use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::reason::{condition_type, run as reason};
use herd_crds::run::{MAX_RESULT_TEXT, Run};
use herd_crds::wire::{ChildOutcome, ChildStatus};
use kube::ResourceExt;

use crate::decide::run_status::is_terminal;

/// The outcome of a child that has not ended: its name only.
pub fn going(name: String) -> ChildOutcome {
    ChildOutcome {
        name,
        status: None,
        stop_reason: None,
        result: String::new(),
        error: None,
        usage: Default::default(),
        artifacts: Vec::new(),
    }
}

/// The outcome of a child deleted before anyone saw it end.
pub fn deleted(name: String) -> ChildOutcome {
    ChildOutcome {
        status: Some(ChildStatus::Failed),
        error: Some(format!("the child Run {name} was deleted before it ended")),
        ..going(name)
    }
}

/// How `child` ended, or only its name while it goes.
pub fn child_outcome(child: &Run) -> ChildOutcome {
    let name = child.name_any();
    let status = child.status.as_ref();
    let conditions = status.map_or(&[][..], |s| s.conditions.as_slice());
    let Some((ended, error)) = ended(conditions) else {
        return going(name);
    };
    let report = status.and_then(|s| s.report.as_ref());
    let result = report.and_then(|r| r.result.as_ref());
    let text = result.map_or_else(String::new, |r| {
        if r.truncated {
            format!(
                "{}\n\n[The answer was cut to its first {MAX_RESULT_TEXT} characters.]",
                r.text
            )
        } else {
            r.text.clone()
        }
    });
    ChildOutcome {
        name,
        status: Some(ended),
        // A question left open is no way to end; the condition says what happened.
        stop_reason: report
            .and_then(|r| r.stop_reason)
            .filter(|s| is_terminal(*s)),
        result: text,
        error,
        usage: report.map(|r| r.usage.clone()).unwrap_or_default(),
        artifacts: result.map(|r| r.artifacts.clone()).unwrap_or_default(),
    }
}

/// How the `Succeeded` condition ended the Run, with why when it failed; `None` while it goes.
fn ended(conditions: &[herd_crds::condition::Condition]) -> Option<(ChildStatus, Option<String>)> {
    let succeeded = find_condition(conditions, condition_type::SUCCEEDED)?;
    match succeeded.status {
        ConditionStatus::Unknown => None,
        ConditionStatus::True => Some((ChildStatus::Completed, None)),
        ConditionStatus::False => {
            let status = match succeeded.reason.as_str() {
                reason::CANCELLED => ChildStatus::Cancelled,
                reason::TIMED_OUT | reason::INPUT_TIMED_OUT => ChildStatus::TimedOut,
                _ => ChildStatus::Failed,
            };
            let why = if succeeded.message.trim().is_empty() {
                succeeded.reason.clone()
            } else {
                succeeded.message.clone()
            };
            Some((status, Some(why)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::report::{Artifact, StopReason, Usage};
    use serde_json::{Value, json};

    fn child(conditions: Value, report: Value) -> Run {
        serde_json::from_value(json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "research-0011aabb", "namespace": "ns"},
            "spec": {"agentRef": {"name": "helper"}, "task": "t",
                     "parentRef": {"name": "research", "toolCallId": "call_1"},
                     "subagentType": "bash"},
            "status": {"attempt": 1, "conditions": conditions, "report": report}
        }))
        .unwrap()
    }

    fn succeeded(status: &str, reason: &str, message: &str) -> Value {
        json!([{"type": "Succeeded", "status": status, "reason": reason, "message": message,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    }

    fn report(stop: &str, text: &str) -> Value {
        json!({"attempt": 1, "seq": 4, "stopReason": stop,
               "usage": {"inputTokens": 100, "outputTokens": 20, "modelCalls": 3, "toolCalls": 2},
               "result": {"text": text,
                          "artifacts": [{"path": "/mnt/user-data/outputs/a.md", "size": 5}]}})
    }

    const USAGE: Usage = Usage {
        input_tokens: 100,
        output_tokens: 20,
        cached_input_tokens: 0,
        model_calls: 3,
        tool_calls: 2,
        cost: None,
        by_model: Vec::new(),
        with_children: None,
    };

    #[test]
    fn a_succeeded_child_is_completed_with_its_answer_usage_and_files() {
        let outcome = child_outcome(&child(
            succeeded("True", "Succeeded", ""),
            report("completed", "Found it."),
        ));
        assert_eq!(
            outcome,
            ChildOutcome {
                name: "research-0011aabb".into(),
                status: Some(ChildStatus::Completed),
                stop_reason: Some(StopReason::Completed),
                result: "Found it.".into(),
                error: None,
                usage: USAGE,
                artifacts: vec![Artifact {
                    path: "/mnt/user-data/outputs/a.md".into(),
                    size: 5
                }],
            }
        );
    }

    #[test]
    fn a_limit_still_completes_and_names_the_limit() {
        let outcome = child_outcome(&child(
            succeeded("True", "Succeeded", "stopped by ModelCallLimit"),
            report("modelCallLimit", "Partial."),
        ));
        assert_eq!(outcome.status, Some(ChildStatus::Completed));
        assert_eq!(outcome.stop_reason, Some(StopReason::ModelCallLimit));
        assert_eq!(outcome.error, None);
        assert_eq!(outcome.result, "Partial.");
    }

    #[test]
    fn failures_carry_the_conditions_message() {
        let cases = [
            (
                "Failed",
                "the agent exited with code 1: boom",
                ChildStatus::Failed,
            ),
            (
                "ModelError",
                "model error: 500 from the provider",
                ChildStatus::Failed,
            ),
            (
                "PodFailed",
                "the sandbox was unavailable",
                ChildStatus::Failed,
            ),
            (
                "OOMKilled",
                "the agent container ran out of memory",
                ChildStatus::Failed,
            ),
            ("Evicted", "the Pod was evicted", ChildStatus::Failed),
            (
                "ResultTooLarge",
                "the result was too large",
                ChildStatus::Failed,
            ),
            ("InvalidSpec", "the Pod was refused", ChildStatus::Failed),
            (
                "Cancelled",
                "cancelled by spec.cancel",
                ChildStatus::Cancelled,
            ),
            ("TimedOut", "the timeout passed", ChildStatus::TimedOut),
            (
                "InputTimedOut",
                "no answer within 1h",
                ChildStatus::TimedOut,
            ),
        ];
        for (why, message, status) in cases {
            let outcome = child_outcome(&child(succeeded("False", why, message), json!(null)));
            assert_eq!(outcome.status, Some(status), "{why}");
            assert_eq!(outcome.error.as_deref(), Some(message), "{why}");
            assert_eq!(
                (outcome.stop_reason, outcome.result.as_str(), outcome.usage),
                (None, "", Usage::default()),
                "{why}: no report"
            );
        }
        let silent = child_outcome(&child(succeeded("False", "PodFailed", " "), json!(null)));
        assert_eq!(silent.error.as_deref(), Some("PodFailed"), "the reason");
    }

    #[test]
    fn a_timed_out_child_keeps_its_partial_answer_and_its_reports_reason() {
        let outcome = child_outcome(&child(
            succeeded("False", "TimedOut", "the timeout passed: ran out"),
            report("timedOut", "Half of it."),
        ));
        assert_eq!(outcome.status, Some(ChildStatus::TimedOut));
        assert_eq!(outcome.stop_reason, Some(StopReason::TimedOut));
        assert_eq!(outcome.result, "Half of it.");
        assert_eq!(outcome.usage, USAGE);
        let model = child_outcome(&child(
            succeeded("False", "ModelError", "model error: down"),
            report("modelError", "down"),
        ));
        assert_eq!(
            (model.status, model.stop_reason),
            (Some(ChildStatus::Failed), Some(StopReason::ModelError))
        );
    }

    #[test]
    fn an_open_question_is_no_stop_reason() {
        let mut open = report("inputRequired", "");
        open["result"] = json!(null);
        let outcome = child_outcome(&child(
            succeeded("False", "InputTimedOut", "no answer within 1h"),
            open,
        ));
        assert_eq!(outcome.status, Some(ChildStatus::TimedOut));
        assert_eq!(outcome.stop_reason, None);
        assert!(outcome.artifacts.is_empty());
    }

    #[test]
    fn a_cut_answer_says_so() {
        let mut cut = report("completed", "The start");
        cut["result"]["truncated"] = json!(true);
        let outcome = child_outcome(&child(succeeded("True", "Succeeded", ""), cut));
        assert_eq!(
            outcome.result,
            "The start\n\n[The answer was cut to its first 16384 characters.]"
        );
    }

    #[test]
    fn a_going_child_has_no_status() {
        for conditions in [
            json!([]),
            succeeded("Unknown", "Queued", "waiting for a slot"),
            succeeded("Unknown", "Running", ""),
            succeeded("Unknown", "WaitingForInput", ""),
        ] {
            let outcome = child_outcome(&child(conditions.clone(), report("completed", "x")));
            assert_eq!(outcome, going("research-0011aabb".into()), "{conditions}");
        }
        let mut bare = child(json!([]), json!(null));
        bare.status = None;
        assert_eq!(child_outcome(&bare).status, None);
    }

    #[test]
    fn a_deleted_child_failed() {
        let outcome = deleted("kid".into());
        assert_eq!(outcome.status, Some(ChildStatus::Failed));
        assert_eq!(
            outcome.error.as_deref(),
            Some("the child Run kid was deleted before it ended")
        );
    }
}
