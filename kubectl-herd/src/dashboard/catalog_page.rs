//! The Agents, Skills, Schedules and Budgets pages: `kubectl herd agents -o wide`, `skills`
//! and `schedules` rows, and a Budget's printer columns, each with all its conditions (what is
//! missing is in the Agents' MISSING column and in the `ResolvedRefs` condition's message).

use std::sync::Arc;

use herd_crds::agent::Agent;
use herd_crds::budget::Budget;
use herd_crds::condition::{Condition, ConditionStatus, find_condition};
use herd_crds::reason::condition_type;
use herd_crds::schedule::Schedule;
use herd_crds::skill::Skill;
use jiff::Timestamp;
use kube::{Resource, ResourceExt};
use serde::Serialize;

use crate::catalog::{agent_header, agent_row, skill_header, skill_row};
use crate::dashboard::run_page::{ConditionRow, condition_rows};
use crate::tree::age;

/// One kind's page.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct CatalogPage {
    /// `Agents`, `Skills`, `Schedules`.
    pub title: &'static str,
    /// The columns.
    pub header: Vec<&'static str>,
    /// The objects, by namespace and name.
    pub items: Vec<Item>,
}

/// One object.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Item {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its cells under the header.
    pub cells: Vec<String>,
    /// Its `Ready` condition's status: `True`, `False` or `Unknown`.
    pub ready: &'static str,
    /// All its conditions.
    pub conditions: Vec<ConditionRow>,
}

fn item<K: Resource>(object: &K, conditions: &[Condition], cells: Vec<String>) -> Item {
    Item {
        name: object.name_any(),
        namespace: object.namespace().unwrap_or_default(),
        cells,
        ready: match find_condition(conditions, condition_type::READY).map(|c| c.status) {
            Some(ConditionStatus::True) => "True",
            Some(ConditionStatus::False) => "False",
            _ => "Unknown",
        },
        conditions: condition_rows(conditions),
    }
}

fn sorted(mut items: Vec<Item>) -> Vec<Item> {
    items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    items
}

/// The Agents page.
pub fn agents_page(agents: &[Arc<Agent>], all_namespaces: bool, now: Timestamp) -> CatalogPage {
    let items = agents
        .iter()
        .map(|a| {
            let conditions = a.status.as_ref().map(|s| s.conditions.as_slice());
            let cells = agent_row(a, all_namespaces, true, now);
            item(a.as_ref(), conditions.unwrap_or_default(), cells)
        })
        .collect();
    CatalogPage {
        title: "Agents",
        header: agent_header(all_namespaces, true),
        items: sorted(items),
    }
}

/// The Skills page.
pub fn skills_page(skills: &[Arc<Skill>], all_namespaces: bool, now: Timestamp) -> CatalogPage {
    let items = skills
        .iter()
        .map(|s| {
            let conditions = s.status.as_ref().map(|s| s.conditions.as_slice());
            let cells = skill_row(s, all_namespaces, now);
            item(s.as_ref(), conditions.unwrap_or_default(), cells)
        })
        .collect();
    CatalogPage {
        title: "Skills",
        header: skill_header(all_namespaces),
        items: sorted(items),
    }
}

/// The Schedules page.
pub fn schedules_page(
    schedules: &[Arc<Schedule>],
    all_namespaces: bool,
    now: Timestamp,
) -> CatalogPage {
    let items = schedules
        .iter()
        .map(|s| {
            let conditions = s.status.as_ref().map(|s| s.conditions.as_slice());
            let cells = crate::schedule::row(s, all_namespaces, now);
            item(s.as_ref(), conditions.unwrap_or_default(), cells)
        })
        .collect();
    CatalogPage {
        title: "Schedules",
        header: crate::schedule::header(all_namespaces),
        items: sorted(items),
    }
}

/// The Budget condition that says a limit is reached (its printer column `Exceeded`).
const EXCEEDED: &str = "Exceeded";

/// The Budgets page: `kubectl get hbudget -o wide`'s columns (the window, used and limit as
/// the operator summarizes them, whether a limit is reached, when the window resets).
pub fn budgets_page(budgets: &[Arc<Budget>], all_namespaces: bool, now: Timestamp) -> CatalogPage {
    let items = budgets
        .iter()
        .map(|b| {
            let status = b.status.as_ref();
            let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
            let exceeded =
                find_condition(conditions, EXCEEDED).map_or("Unknown", |c| match c.status {
                    ConditionStatus::True => "True",
                    ConditionStatus::False => "False",
                    ConditionStatus::Unknown => "Unknown",
                });
            let text = |value: Option<&String>| value.cloned().unwrap_or_else(|| "-".to_owned());
            let mut cells = if all_namespaces {
                vec![b.namespace().unwrap_or_default()]
            } else {
                vec![]
            };
            cells.extend([
                b.name_any(),
                text(status.and_then(|s| s.window.as_ref())),
                text(status.and_then(|s| s.used_summary.as_ref())),
                text(status.and_then(|s| s.limit_summary.as_ref())),
                exceeded.to_owned(),
                status
                    .and_then(|s| s.window_end.as_ref())
                    .map_or("-".to_owned(), |t| t.0.to_string()),
                format!("{:?}", b.spec.on_exceeded),
                b.metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or("-".to_owned(), |t| age(t.0, now)),
            ]);
            item(b.as_ref(), conditions, cells)
        })
        .collect();
    let mut header = if all_namespaces {
        vec!["NAMESPACE"]
    } else {
        vec![]
    };
    header.extend([
        "NAME",
        "WINDOW",
        "USED",
        "LIMIT",
        "EXCEEDED",
        "RESETS",
        "ONEXCEEDED",
        "AGE",
    ]);
    CatalogPage {
        title: "Budgets",
        header,
        items: sorted(items),
    }
}
