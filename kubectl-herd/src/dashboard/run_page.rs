//! The Run page: what `kubectl herd describe` and `follow` show of a Run, for a browser —
//! where it stands, its child-Run tree (with `kubectl herd get`'s columns), its todos and
//! progress, the question it waits on, its conditions; the result, presented files and Events
//! are read once per page load ([`Extras`]).

use std::sync::Arc;

use herd_crds::approval::ApprovalRequest;
use herd_crds::condition::{Condition, ConditionStatus};
use herd_crds::report::{Clarification, Cost, ModelUsage, Todo, TodoStatus, Usage, UsageTotals};
use herd_crds::run::Run;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use serde::Serialize;

use crate::approve::pending_approvals;
use crate::budgets::holding;
use crate::cancel::{Cancel, cancel_decision};
use crate::columns::{any_priced, cells_with_cost, cost_text, header_with_cost, status_text};
use crate::dashboard::runs_page::{Row, created, phase, run_href};
use crate::logs::log_pod;
use crate::outcome::pending_question;
use crate::tree::{Node, tree};
use crate::view::{phase_name, tokens_text, view};

/// What the Run page shows from the Run and its family.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct RunPage {
    /// The Run's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its page.
    pub href: String,
    /// The live tail of its logs (`?container=` follows).
    pub live_logs: String,
    /// Its Agent.
    pub agent: String,
    /// Its task.
    pub task: String,
    /// `kubectl herd get`'s STATUS.
    pub status: String,
    /// The phase's name, for its colour.
    pub phase: &'static str,
    /// The `Succeeded` condition's reason and message.
    pub reason: String,
    /// See `reason`.
    pub message: String,
    /// The title the agent gave.
    pub title: Option<String>,
    /// The attempt.
    pub attempt: Option<u32>,
    /// Created, started and completed, RFC 3339 (empty when not yet).
    pub created: String,
    /// See `created`.
    pub started: String,
    /// See `created`.
    pub completed: String,
    /// Whether it has finished.
    pub finished: bool,
    /// `spec.cancel` is set and it has not ended.
    pub cancelling: bool,
    /// Whether the cancel button is offered.
    pub can_cancel: bool,
    /// The Run's parent's page, for a child.
    pub parent: Option<(String, String)>,
    /// The labels.
    pub labels: Vec<(String, String)>,
    /// The Budget holding it back, and what was reached.
    pub held_by: Option<(String, String)>,
    /// The tree's columns.
    pub tree_header: Vec<&'static str>,
    /// The Run and its descendants.
    pub tree: Vec<Row>,
    /// The plan.
    pub todos: Vec<TodoRow>,
    /// Todos done.
    pub todos_done: usize,
    /// Calls and tokens so far.
    pub usage: UsageView,
    /// The question it waits on, unanswered.
    pub question: Option<QuestionView>,
    /// It shows a question `spec.responses` already answers: it resumes.
    pub answered: bool,
    /// The tool calls it holds for approval that no response decides yet.
    pub approvals: Vec<ApprovalView>,
    /// The conditions.
    pub conditions: Vec<ConditionRow>,
    /// The Pod whose logs can be read, or why none.
    pub pod: Result<String, String>,
}

/// A todo.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct TodoRow {
    /// What to do.
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub state: &'static str,
}

/// Calls and tokens.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct UsageView {
    /// Model calls.
    pub model_calls: u32,
    /// Tool calls.
    pub tool_calls: u32,
    /// Tokens in.
    pub input_tokens: u64,
    /// Tokens out.
    pub output_tokens: u64,
    /// Of the input tokens, those read from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// All tokens, as the TOKENS column says them.
    pub total: String,
    /// What they cost (`0.004210 USD`), when the Agent's model is priced.
    pub cost: Option<String>,
    /// The tokens by model.
    pub by_model: Vec<ModelUsage>,
    /// With every child's usage, once the children ended.
    pub with_children: Option<UsageTotals>,
    /// What those cost.
    pub with_children_cost: Option<String>,
}

/// A cost as the COST column says it.
fn cost(cost: &Cost) -> String {
    cost_text(Some(cost))
}

/// A pending question.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct QuestionView {
    /// Its id.
    pub id: String,
    /// The question.
    pub question: String,
    /// Why the agent asks.
    pub context: Option<String>,
    /// Answers to choose from.
    pub options: Vec<String>,
}

/// A tool call held for a person's approval.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ApprovalView {
    /// Its id (the decision's).
    pub id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments as the model sent them (JSON).
    pub arguments: String,
    /// The arguments were cut to fit the status.
    pub truncated: bool,
    /// When the agent asked, RFC 3339.
    pub asked_at: Option<String>,
}

/// A condition.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ConditionRow {
    /// Its type.
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// Its reason.
    pub reason: String,
    /// Its message.
    pub message: String,
    /// When it last changed, RFC 3339.
    pub changed: String,
}

/// The rows of `conditions`.
pub fn condition_rows(conditions: &[Condition]) -> Vec<ConditionRow> {
    conditions
        .iter()
        .map(|c| ConditionRow {
            kind: c.type_.clone(),
            status: match c.status {
                ConditionStatus::True => "True",
                ConditionStatus::False => "False",
                ConditionStatus::Unknown => "Unknown",
            },
            reason: c.reason.clone(),
            message: c.message.clone(),
            changed: c.last_transition_time.0.to_string(),
        })
        .collect()
}

/// The page of `run`, whose namespace's Runs are `family` (its children are found there).
pub fn run_page(run: &Run, family: &[Arc<Run>], now: Timestamp) -> RunPage {
    let namespace = run.namespace().unwrap_or_default();
    let kin: Vec<Run> = family
        .iter()
        .filter(|r| r.namespace().unwrap_or_default() == namespace)
        .map(|r| Run::clone(r))
        .collect();
    let nodes = tree(&kin, Some(&[run]), None);
    let priced = any_priced(nodes.iter().map(|n| n.run));
    let shown = view(run);
    let status = run.status.as_ref();
    RunPage {
        name: run.name_any(),
        href: run_href(run),
        live_logs: format!("/live{}", run_href(run).replacen("/runs/", "/logs/", 1)),
        namespace: namespace.clone(),
        agent: run.spec.agent_ref.name.clone(),
        task: run.spec.task.clone(),
        status: status_text(run),
        phase: phase_name(phase(run)),
        reason: shown.reason.clone(),
        message: shown.message.clone(),
        title: shown.title.clone(),
        attempt: shown.attempt,
        created: created(run),
        started: rfc3339(status.and_then(|s| s.start_time.as_ref())),
        completed: rfc3339(status.and_then(|s| s.completion_time.as_ref())),
        finished: shown.phase.is_finished(),
        cancelling: shown.cancelling,
        can_cancel: cancel_decision(run) == Ok(Cancel::Patch),
        parent: parent_link(run, &namespace),
        labels: run
            .labels()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        tree_header: header_with_cost(false, false, priced),
        held_by: holding(run),
        tree: nodes
            .iter()
            .map(|node| tree_row(node, priced, now))
            .collect(),
        todos_done: shown
            .todos
            .iter()
            .filter(|t| t.status == TodoStatus::Completed)
            .count(),
        todos: shown.todos.iter().map(todo_row).collect(),
        usage: usage_view(&shown.usage),
        question: pending_question(run).map(question_view),
        answered: shown.answered,
        approvals: pending_approvals(run)
            .into_iter()
            .map(approval_view)
            .collect(),
        conditions: condition_rows(status.map(|s| s.conditions.as_slice()).unwrap_or_default()),
        pod: log_pod(run),
    }
}

/// A time as RFC 3339, empty when it has not happened.
fn rfc3339(time: Option<&Time>) -> String {
    time.map(|t| t.0.to_string()).unwrap_or_default()
}

/// A child Run's parent: its name and its page.
fn parent_link(run: &Run, namespace: &str) -> Option<(String, String)> {
    run.spec.parent_ref.as_ref().map(|p| {
        (
            p.name.clone(),
            format!(
                "/runs/{}/{}",
                super::runs_page::percent(namespace),
                super::runs_page::percent(&p.name)
            ),
        )
    })
}

/// The row of one Run of the tree, with `kubectl herd get`'s columns.
fn tree_row(node: &Node<'_>, priced: bool, now: Timestamp) -> Row {
    Row {
        href: run_href(node.run),
        cells: cells_with_cost(&node.label, node.run, false, false, priced, now),
        phase: phase_name(phase(node.run)),
        created: created(node.run),
    }
}

/// The row of one todo.
fn todo_row(todo: &Todo) -> TodoRow {
    TodoRow {
        content: todo.content.clone(),
        state: match todo.status {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Completed => "completed",
        },
    }
}

/// The calls, tokens and costs of `usage`.
fn usage_view(usage: &Usage) -> UsageView {
    UsageView {
        model_calls: usage.model_calls,
        tool_calls: usage.tool_calls,
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        total: tokens_text(usage.total_tokens()),
        cost: usage.cost.as_ref().map(cost),
        by_model: usage.by_model.clone(),
        with_children_cost: usage
            .with_children
            .as_ref()
            .and_then(|t| t.cost.as_ref())
            .map(cost),
        with_children: usage.with_children.clone(),
    }
}

/// The question the Run waits on.
fn question_view(question: &Clarification) -> QuestionView {
    QuestionView {
        id: question.id.clone(),
        question: question.question.clone(),
        context: question.context.clone(),
        options: question.options.clone(),
    }
}

/// A tool call held for approval.
fn approval_view(request: &ApprovalRequest) -> ApprovalView {
    ApprovalView {
        id: request.id.clone(),
        tool: request.tool.clone(),
        arguments: request.arguments.clone(),
        truncated: request.truncated,
        asked_at: request.asked_at.clone(),
    }
}

/// What the Run page reads besides the watched Runs, once per load.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct Extras {
    /// The answer, rendered and sanitized, with its files; or why it cannot be read.
    pub result: Option<Result<ResultView, String>>,
    /// The Events of the Run and its Pod, newest last; or why they cannot be read.
    pub events: Option<Result<Vec<EventRow>, String>>,
}

/// A finished Run's answer.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ResultView {
    /// The answer as sanitized HTML.
    pub html: String,
    /// The ConfigMap is gone and this is the status's text, cut at 16 KiB.
    pub cut: bool,
    /// The presented files; `Err` says why they cannot be listed.
    pub files: Result<Vec<FileRow>, String>,
}

/// A presented file.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct FileRow {
    /// Its place in the listing (the download's URL).
    pub index: usize,
    /// Its path under `outputs/`.
    pub path: String,
    /// Its size in bytes.
    pub size: usize,
}

/// An Event.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct EventRow {
    /// `Normal` or `Warning`.
    pub kind: String,
    /// Its reason.
    pub reason: String,
    /// What it is about (`Run/x`, `Pod/x-1`).
    pub object: String,
    /// Its message.
    pub message: String,
    /// How many times it happened.
    pub count: i32,
    /// When it last happened, RFC 3339.
    pub last: String,
}

/// Most Events shown.
pub const EVENTS: usize = 30;

/// The rows of `events`, the latest [`EVENTS`] in time order.
pub fn event_rows(mut events: Vec<Event>) -> Vec<EventRow> {
    let when = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| e.event_time.as_ref().map(|t| t.0))
            .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
    };
    events.sort_by_key(when);
    let skip = events.len().saturating_sub(EVENTS);
    events
        .iter()
        .skip(skip)
        .map(|e| EventRow {
            kind: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            object: format!(
                "{}/{}",
                e.involved_object.kind.as_deref().unwrap_or_default(),
                e.involved_object.name.as_deref().unwrap_or_default()
            ),
            message: e.message.clone().unwrap_or_default(),
            count: e.count.unwrap_or(1),
            last: when(e).map(|t| t.to_string()).unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use herd_crds::report::Todo;
    use herd_crds::run::ParentRef;

    use super::*;
    use crate::testing::{at, question_run, run_named};

    #[test]
    fn a_waiting_parent_shows_its_tree_question_and_plan() {
        let mut parent = question_run("q1", &[]);
        parent.metadata.namespace = Some("team".into());
        if let Some(report) = parent.status.as_mut().and_then(|s| s.report.as_mut()) {
            report.todos = vec![
                Todo {
                    content: "Ask".into(),
                    status: TodoStatus::Completed,
                },
                Todo {
                    content: "Paint".into(),
                    status: TodoStatus::InProgress,
                },
            ];
            report.usage.model_calls = 2;
            report.usage.input_tokens = 1200;
        }
        let mut child = run_named("r-a");
        child.metadata.namespace = Some("team".into());
        child.metadata.creation_timestamp = Some(at(5));
        child.spec.parent_ref = Some(ParentRef {
            name: "r".into(),
            tool_call_id: "c".into(),
        });
        let mut stranger = child.clone();
        stranger.metadata.namespace = Some("elsewhere".into());
        let family = vec![
            Arc::new(parent.clone()),
            Arc::new(child),
            Arc::new(stranger),
        ];
        let page = run_page(&parent, &family, at(60).0);
        let labels: Vec<&str> = page.tree.iter().map(|r| r.cells[0].as_str()).collect();
        assert_eq!(labels, ["r", "└─ r-a"]);
        assert_eq!(page.status, "Waiting for answer");
        assert_eq!(page.question.as_ref().map(|q| q.id.as_str()), Some("q1"));
        assert_eq!(page.todos_done, 1);
        assert_eq!(page.todos[1].state, "in_progress");
        assert_eq!(page.usage.total, "1.2k");
        assert!(page.can_cancel && !page.finished);
        assert_eq!(page.href, "/runs/team/r");
        assert_eq!(page.live_logs, "/live/logs/team/r");
    }

    #[test]
    fn events_keep_the_latest_in_order() {
        let event = |name: &str, second: i64| Event {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(at(second)),
                ..Default::default()
            },
            reason: Some(name.into()),
            ..Event::default()
        };
        let events: Vec<Event> = (0..40).rev().map(|i| event(&format!("e{i}"), i)).collect();
        let rows = event_rows(events);
        assert_eq!(rows.len(), EVENTS);
        assert_eq!(rows[0].reason, "e10");
        assert_eq!(rows[EVENTS - 1].reason, "e39");
    }
}
