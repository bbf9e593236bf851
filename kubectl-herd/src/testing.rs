//! Runs in the shapes the operator writes, for the unit tests.

#![cfg(test)]

use herd_crds::condition::{Condition, ConditionStatus};
use herd_crds::report::{Clarification, ClarificationType, StopReason};
use herd_crds::run::{Response, Run, RunPhase, RunReport, RunResult, RunSpec, RunStatus, phase_of};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A Run of Agent `helper` named `name` with `task`, no status.
pub fn run_named(name: &str) -> Run {
    let mut run = Run::new(
        name,
        serde_json::from_value::<RunSpec>(serde_json::json!({
            "agentRef": {"name": "helper"}, "task": "Do it."
        }))
        .expect("a valid spec"),
    );
    run.metadata.uid = Some(format!("uid-{name}"));
    run.metadata.creation_timestamp = Some(at(0));
    run
}

/// `seconds` after the epoch.
pub fn at(seconds: i64) -> Time {
    Time(jiff::Timestamp::from_second(seconds).expect("in range"))
}

/// A `Succeeded` condition whose message is `said <reason>`.
pub fn succeeded(status: ConditionStatus, reason: &str) -> Condition {
    Condition::new(
        "Succeeded",
        status,
        reason,
        format!("said {reason}"),
        None,
        at(0),
    )
}

/// A Run `r` with a `Succeeded` condition (absent with `None`), a report with `stop` and an
/// answer `result`.
pub fn run_with(
    succeeded_as: Option<(ConditionStatus, &str)>,
    stop: Option<StopReason>,
    result: Option<&str>,
) -> Run {
    let mut run = run_named("r");
    let conditions: Vec<Condition> = succeeded_as
        .map(|(status, reason)| succeeded(status, reason))
        .into_iter()
        .collect();
    run.status = Some(RunStatus {
        phase: Some(phase_of(&conditions)),
        conditions,
        report: Some(RunReport {
            attempt: 1,
            seq: 1,
            stop_reason: stop,
            result: result.map(|text| RunResult {
                text: text.to_owned(),
                ..RunResult::default()
            }),
            ..RunReport::default()
        }),
        ..RunStatus::default()
    });
    run
}

/// A Run `r` waiting on the question `id` ("Which colour?", options teal and red), with
/// `responses` given.
pub fn question_run(id: &str, responses: &[Response]) -> Run {
    let mut run = run_with(
        Some((ConditionStatus::Unknown, "WaitingForInput")),
        Some(StopReason::InputRequired),
        None,
    );
    run.spec.responses = responses.to_vec();
    if let Some(status) = run.status.as_mut() {
        status.conditions.push(Condition::new(
            "InputRequired",
            ConditionStatus::True,
            "WaitingForInput",
            "Which colour?",
            None,
            at(0),
        ));
        status.phase = Some(RunPhase::InputRequired);
        if let Some(report) = status.report.as_mut() {
            report.clarification = Some(Clarification {
                id: id.to_owned(),
                question: "Which colour?".into(),
                kind: ClarificationType::MissingInfo,
                context: None,
                options: vec!["teal".into(), "red".into()],
                asked_at: None,
            });
        }
    }
    run
}
