//! The Agents, Skills, Schedules and Budgets pages: `kubectl herd agents -o wide`, `skills`
//! `schedules` and `budgets` rows, each with all its conditions (what is
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

/// The Budgets page: `kubectl herd budgets`' rows.
pub fn budgets_page(budgets: &[Arc<Budget>], all_namespaces: bool, now: Timestamp) -> CatalogPage {
    let items = budgets
        .iter()
        .map(|b| {
            let conditions = b.status.as_ref().map(|s| s.conditions.as_slice());
            let cells = crate::budgets::row(b, all_namespaces, now);
            item(b.as_ref(), conditions.unwrap_or_default(), cells)
        })
        .collect();
    CatalogPage {
        title: "Budgets",
        header: crate::budgets::header(all_namespaces),
        items: sorted(items),
    }
}
