//! Runs in the shapes the operator writes, for the unit tests.

#![cfg(test)]

use herd_crds::condition::{Condition, ConditionStatus};
use herd_crds::report::{
    Artifact, Clarification, ClarificationType, Cost, ModelUsage, StopReason, Todo, TodoStatus,
    Usage, UsageTotals,
};
use herd_crds::run::{
    ChildRef, ParentRef, Response, Run, RunPhase, RunReport, RunResult, RunSpec, RunStatus,
    phase_of,
};
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

/// A Run `r` that waits for a person (`InputRequired` with `reason` and `message`), with
/// `responses` given; `ask` puts the question or requests into its report.
fn waiting_run(
    reason: &str,
    message: &str,
    responses: &[Response],
    ask: impl FnOnce(&mut RunReport),
) -> Run {
    let mut run = run_with(
        Some((ConditionStatus::Unknown, reason)),
        Some(StopReason::InputRequired),
        None,
    );
    run.spec.responses = responses.to_vec();
    if let Some(status) = run.status.as_mut() {
        status.conditions.push(Condition::new(
            "InputRequired",
            ConditionStatus::True,
            reason,
            message,
            None,
            at(0),
        ));
        status.phase = Some(RunPhase::InputRequired);
        if let Some(report) = status.report.as_mut() {
            ask(report);
        }
    }
    run
}

/// A Run `r` waiting on the question `id` ("Which colour?", options teal and red), with
/// `responses` given.
pub fn question_run(id: &str, responses: &[Response]) -> Run {
    waiting_run("WaitingForInput", "Which colour?", responses, |report| {
        report.clarification = Some(Clarification {
            id: id.to_owned(),
            question: "Which colour?".into(),
            kind: ClarificationType::MissingInfo,
            context: None,
            options: vec!["teal".into(), "red".into()],
            asked_at: None,
        });
    })
}

/// A Run holding `requests` for approval, with `responses` given.
pub fn approval_run(
    requests: &[herd_crds::approval::ApprovalRequest],
    responses: &[Response],
) -> Run {
    waiting_run("WaitingForApproval", "approve?", responses, |report| {
        report.approvals = requests.to_vec();
    })
}

/// The moment the golden tests are taken at: 1000 s after the epoch.
pub const GOLDEN_NOW: i64 = 1000;

/// A fixed tree of Runs in namespace `research`: `notes` running with a plan and two
/// children (`notes-a` succeeded with a file, `notes-b` waiting for an answer), and `other`,
/// pending for a missing Agent.
pub fn family_tree() -> Vec<Run> {
    vec![notes(), notes_a(), notes_b(), other()]
}

/// `notes`, running with a trace, a title, todos, a priced usage and the two children.
fn notes() -> Run {
    let mut parent = run_with(Some((ConditionStatus::Unknown, "Running")), None, None);
    parent.metadata.name = Some("notes".into());
    parent.metadata.namespace = Some("research".into());
    parent.metadata.creation_timestamp = Some(at(100));
    parent.metadata.labels = Some([("herd.dev/user".to_owned(), "alice".to_owned())].into());
    parent.metadata.annotations = Some(
        [(
            herd_crds::run::TRACEPARENT_ANNOTATION.to_owned(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
        )]
        .into(),
    );
    parent.spec.task = "Write six notes on Rust.\nKeep each short.".into();
    parent.spec.plan_mode = Some(true);
    parent.spec.timeout = Some("30m".into());
    if let Some(status) = parent.status.as_mut() {
        status.start_time = Some(at(110));
        status.pod_name = Some("notes-1".into());
        status.attempt = Some(1);
        status.children = vec![
            ChildRef {
                name: "notes-a".into(),
                state: RunPhase::Succeeded,
            },
            ChildRef {
                name: "notes-b".into(),
                state: RunPhase::InputRequired,
            },
        ];
        if let Some(report) = status.report.as_mut() {
            report.title = Some("Six notes on Rust".into());
            report.todos = vec![
                Todo {
                    content: "Outline".into(),
                    status: TodoStatus::Completed,
                },
                Todo {
                    content: "Delegate the notes".into(),
                    status: TodoStatus::InProgress,
                },
            ];
            report.usage = notes_usage();
        }
    }
    parent
}

/// The usage of `notes`: priced, two models, and the finished child's totals with it.
fn notes_usage() -> Usage {
    Usage {
        input_tokens: 1_100,
        output_tokens: 134,
        cached_input_tokens: 600,
        model_calls: 3,
        tool_calls: 2,
        cost: Some(usd(2_870)),
        by_model: vec![
            ModelUsage {
                model: "gpt-4.1".into(),
                input_tokens: 1_000,
                output_tokens: 120,
                cached_input_tokens: 600,
                model_calls: 2,
            },
            ModelUsage {
                model: "gpt-4.1-mini".into(),
                input_tokens: 100,
                output_tokens: 14,
                cached_input_tokens: 0,
                model_calls: 1,
            },
        ],
        with_children: Some(UsageTotals {
            input_tokens: 1_520,
            output_tokens: 214,
            cached_input_tokens: 600,
            model_calls: 5,
            tool_calls: 3,
            cost: Some(usd(4_310)),
        }),
    }
}

/// `micros` millionths of a US dollar.
fn usd(micros: u64) -> Cost {
    Cost {
        currency: "USD".into(),
        micros,
    }
}

/// A general-purpose child of `notes` named `name`, created at `created`, no status.
fn child_of_notes(name: &str, created: i64) -> Run {
    let mut run = run_named(name);
    run.metadata.namespace = Some("research".into());
    run.metadata.creation_timestamp = Some(at(created));
    run.spec.parent_ref = Some(ParentRef {
        name: "notes".into(),
        tool_call_id: format!("call-{name}"),
    });
    run.spec.subagent_type = Some("general-purpose".into());
    run
}

/// `notes-a`, succeeded in 55 s with a priced usage and the file `outputs/note-a.md`.
fn notes_a() -> Run {
    let mut done = child_of_notes("notes-a", 200);
    done.status = run_with(
        Some((ConditionStatus::True, "Succeeded")),
        Some(StopReason::Completed),
        Some("Written."),
    )
    .status;
    if let Some(status) = done.status.as_mut() {
        status.start_time = Some(at(205));
        status.completion_time = Some(at(260));
        if let Some(report) = status.report.as_mut() {
            report.usage.input_tokens = 420;
            report.usage.output_tokens = 80;
            report.usage.cost = Some(usd(1_440));
            if let Some(result) = report.result.as_mut() {
                result.artifacts = vec![Artifact {
                    path: "outputs/note-a.md".into(),
                    size: 512,
                }];
            }
        }
    }
    done
}

/// `notes-b`, waiting for the answer to question `q-1`.
fn notes_b() -> Run {
    let mut waiting = child_of_notes("notes-b", 210);
    waiting.status = question_run("q-1", &[]).status;
    if let Some(status) = waiting.status.as_mut() {
        status.start_time = Some(at(215));
        status.pod_name = Some("notes-b-1".into());
    }
    waiting
}

/// `other`, pending because its Agent `writer` is not found.
fn other() -> Run {
    let mut other = run_with(
        Some((ConditionStatus::Unknown, "AgentNotFound")),
        None,
        None,
    );
    other.metadata.name = Some("other".into());
    other.metadata.namespace = Some("research".into());
    other.metadata.creation_timestamp = Some(at(900));
    other.spec.agent_ref.name = "writer".into();
    other
}
