//! `kubectl herd budgets` (also `kubectl herd get budgets`): the Budgets with their window,
//! what was used of the tightest limit, whether a limit is reached and when the window
//! resets; and, for `describe`, the Budget that holds a Run.

use herd_crds::budget::Budget;
use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::reason::{condition_type, run as run_reason};
use herd_crds::run::Run;
use herd_crds::terminal_text::one_line;
use jiff::Timestamp;
use kube::ResourceExt;

use crate::catalog::list as list_chosen;
use crate::cli::CatalogArgs;
use crate::connect::Cluster;
use crate::error::CliError;
use crate::io::Io;
use crate::table::{namespaced_header, namespaced_row, render};
use crate::tree::age;

/// What `kubectl herd get` takes for the Budgets rather than a Run's name.
pub const KIND_NAMES: [&str; 3] = ["budgets", "budget", "hbudget"];

/// The Budgets table's header (`-A` adds NAMESPACE).
pub fn header(all_namespaces: bool) -> Vec<&'static str> {
    namespaced_header(
        all_namespaces,
        &[
            "NAME",
            "WINDOW",
            "USED",
            "LIMIT",
            "EXCEEDED",
            "RESETS",
            "ON EXCEEDED",
            "AGE",
        ],
    )
}

/// A Budget's row: its window, the tightest limit's use and value, whether a limit is reached
/// (`Unknown` before the operator counted it, the reason when it cannot), when the window
/// resets (in how long).
pub fn row(budget: &Budget, all_namespaces: bool, now: Timestamp) -> Vec<String> {
    let status = budget.status.clone().unwrap_or_default();
    let ready = find_condition(&status.conditions, condition_type::READY);
    let exceeded = find_condition(&status.conditions, condition_type::EXCEEDED);
    let mut row = namespaced_row(all_namespaces, budget);
    let exceeded = match (ready, exceeded) {
        (Some(ready), _) if ready.status == ConditionStatus::False => {
            format!("Unknown ({})", one_line(&ready.reason))
        }
        (_, Some(exceeded)) => format!("{:?}", exceeded.status),
        _ => "Unknown".to_owned(),
    };
    row.extend([
        one_line(&budget.name_any()),
        one_line(&budget.spec.window.describe()),
        status
            .used_summary
            .as_deref()
            .map_or("-".to_owned(), one_line),
        status
            .limit_summary
            .as_deref()
            .map_or("-".to_owned(), one_line),
        exceeded,
        status.window_end.map_or("-".to_owned(), |end| {
            if end.0 > now {
                format!("in {}", age(now, end.0))
            } else {
                "now".to_owned()
            }
        }),
        format!("{:?}", budget.spec.on_exceeded),
        budget
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or("-".to_owned(), |t| age(t.0, now)),
    ]);
    row
}

/// The Budgets as `kubectl herd budgets` prints them.
pub fn table(budgets: &[Budget], all_namespaces: bool, now: Timestamp) -> String {
    let rows: Vec<Vec<String>> = budgets
        .iter()
        .map(|b| row(b, all_namespaces, now))
        .collect();
    render(&header(all_namespaces), &rows)
}

/// `kubectl herd budgets`.
pub async fn list(cluster: &Cluster, args: &CatalogArgs, io: &mut Io<'_>) -> Result<u8, CliError> {
    list_chosen(cluster, args, io, table).await
}

/// The Budget holding `run` (its `Succeeded` reason `BudgetExceeded`, whose message starts
/// with the Budget's name), with the rest of that message: what was reached and when the
/// window resets.
pub fn holding(run: &Run) -> Option<(String, String)> {
    let conditions = &run.status.as_ref()?.conditions;
    let succeeded = find_condition(conditions, condition_type::SUCCEEDED)?;
    if succeeded.reason != run_reason::BUDGET_EXCEEDED {
        return None;
    }
    let rest = succeeded.message.strip_prefix("Budget ")?;
    let (name, why) = rest.split_once(' ')?;
    Some((one_line(name), one_line(why)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::budget::{
        BudgetLimits, BudgetSpec, BudgetStatus, BudgetWindow, Calendar, OnExceeded,
    };
    use herd_crds::condition::Condition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn condition(type_: &str, status: ConditionStatus, reason: &str, message: &str) -> Condition {
        Condition::new(type_, status, reason, message, Some(1), Time(at(0)))
    }

    fn budget(exceeded: bool) -> Budget {
        let mut budget = Budget::new(
            "team-daily",
            BudgetSpec {
                window: BudgetWindow {
                    calendar: Some(Calendar::Day),
                    time_zone: Some("Europe/Berlin".into()),
                    ..BudgetWindow::default()
                },
                limits: BudgetLimits {
                    tokens: Some(20_000),
                    ..BudgetLimits::default()
                },
                selector: None,
                on_exceeded: OnExceeded::Queue,
            },
        );
        budget.metadata.namespace = Some("agents".into());
        budget.metadata.creation_timestamp = Some(Time(at(0)));
        let state = if exceeded {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        budget.status = Some(BudgetStatus {
            conditions: vec![
                condition(condition_type::READY, ConditionStatus::True, "Counting", ""),
                condition(condition_type::EXCEEDED, state, "LimitReached", ""),
            ],
            used_summary: Some("20400 tokens".into()),
            limit_summary: Some("20000 tokens".into()),
            window_end: Some(Time(at(3 * 86_400 + 7200))),
            ..BudgetStatus::default()
        });
        budget
    }

    #[test]
    fn the_table_shows_window_use_limit_and_reset() {
        let mut unread = budget(false);
        unread.metadata.name = Some("no-status".into());
        unread.status = None;
        let text = table(&[budget(true), unread], true, at(3 * 86_400));
        insta::assert_snapshot!(text);
    }

    #[test]
    fn a_run_held_by_a_budget_names_it() {
        let mut run: Run = serde_json::from_value(serde_json::json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "r", "namespace": "agents"},
            "spec": {"agentRef": {"name": "researcher"}, "task": "t"},
        }))
        .unwrap();
        assert_eq!(holding(&run), None);
        run.status = Some(herd_crds::run::RunStatus {
            conditions: vec![condition(
                condition_type::SUCCEEDED,
                ConditionStatus::Unknown,
                run_reason::BUDGET_EXCEEDED,
                "Budget team-daily reached its limit of 20000 tokens (used: 20400 tokens) in this window: the Run waits until its window resets at 2026-03-29T22:00:00Z",
            )],
            ..Default::default()
        });
        let (name, why) = holding(&run).unwrap();
        assert_eq!(name, "team-daily");
        assert!(why.starts_with("reached its limit of 20000 tokens"));
    }
}
