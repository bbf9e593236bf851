//! The Runs page: the Runs the shared watch holds, filtered by Agent, phase and label, as the
//! tree `kubectl herd get` shows (newest top-level Run first, its children under it), a page
//! at a time, with `kubectl herd get`'s columns.

use std::collections::BTreeSet;
use std::sync::Arc;

use herd_crds::run::{Run, RunPhase, phase_of};
use jiff::Timestamp;
use kube::ResourceExt;
use kube::core::{Expression, Selector, SelectorExt};
use serde::{Deserialize, Serialize};

use crate::columns::{any_priced, cells_with_cost, header_with_cost};
use crate::tree::{newest_tops, tree};
use crate::view::phase_name;

/// Rows on one page.
pub const PAGE_SIZE: usize = 100;

/// Every phase, for the filter.
const PHASES: [RunPhase; 8] = [
    RunPhase::Pending,
    RunPhase::Queued,
    RunPhase::Running,
    RunPhase::InputRequired,
    RunPhase::Suspended,
    RunPhase::Succeeded,
    RunPhase::Failed,
    RunPhase::Cancelled,
];

/// The filters and page of the Runs page, from its query string.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RunsQuery {
    /// Only Runs of this Agent.
    #[serde(default)]
    pub agent: String,
    /// Only Runs in this phase (`Running`, `Succeeded`…).
    #[serde(default)]
    pub phase: String,
    /// Only Runs whose labels match this selector (`a=b,c!=d,e,!f`).
    #[serde(default)]
    pub label: String,
    /// The page, from 1.
    #[serde(default)]
    pub page: Option<usize>,
}

/// One row: a Run's cells under the header, and where its page is.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Row {
    /// `/runs/<namespace>/<name>`.
    pub href: String,
    /// The cells, as `kubectl herd get` shows them.
    pub cells: Vec<String>,
    /// The phase's name, for its colour.
    pub phase: &'static str,
    /// The creation time, RFC 3339.
    pub created: String,
}

/// What the Runs page shows.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct RunsPage {
    /// The columns.
    pub header: Vec<&'static str>,
    /// Which column is the name (a link).
    pub name_column: usize,
    /// Which column is the age (a time).
    pub age_column: usize,
    /// This page's rows.
    pub rows: Vec<Row>,
    /// The filters as given.
    pub query: RunsQuery,
    /// The page shown, from 1.
    pub page: usize,
    /// How many pages.
    pub pages: usize,
    /// Rows matching the filters, on all pages.
    pub total: usize,
    /// The Agents the Runs name, for the filter.
    pub agents: Vec<String>,
    /// The phases, for the filter.
    pub phases: Vec<&'static str>,
    /// The query string of the previous and next pages.
    pub previous: Option<String>,
    /// See `previous`.
    pub next: Option<String>,
}

/// A Run's phase: `status.phase`, else derived from its conditions (as [`crate::view`] does,
/// without copying the status).
pub fn phase(run: &Run) -> RunPhase {
    let status = run.status.as_ref();
    status
        .and_then(|s| s.phase)
        .unwrap_or_else(|| phase_of(status.map(|s| s.conditions.as_slice()).unwrap_or_default()))
}

/// A label selector as `kubectl -l` takes it, in its equality forms: `a=b`, `a==b`, `a!=b`,
/// `a` (has it), `!a` (has it not), joined by commas.
pub fn parse_selector(text: &str) -> Result<Selector, String> {
    let mut selector = Selector::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let expression = if let Some((key, value)) = part.split_once("!=") {
            Expression::NotEqual(key.trim().into(), value.trim().into())
        } else if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
            Expression::Equal(key.trim().into(), value.trim().into())
        } else if let Some(key) = part.strip_prefix('!') {
            Expression::DoesNotExist(key.trim().into())
        } else {
            Expression::Exists(part.into())
        };
        let key = match &expression {
            Expression::Equal(k, _)
            | Expression::NotEqual(k, _)
            | Expression::Exists(k)
            | Expression::DoesNotExist(k) => k,
            Expression::In(k, _) | Expression::NotIn(k, _) => k,
        };
        let plain = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
        if !plain {
            return Err(format!(
                "the label selector {part:?} is not one this page reads: use key=value, \
                 key!=value, key or !key, joined by commas"
            ));
        }
        selector.extend(expression);
    }
    Ok(selector)
}

/// The Runs page for `runs` under `query`; `Err` says why the query cannot be read.
pub fn runs_page(
    runs: &[Arc<Run>],
    query: &RunsQuery,
    all_namespaces: bool,
    now: Timestamp,
) -> Result<RunsPage, String> {
    let selector = parse_selector(&query.label)?;
    let agents: BTreeSet<&str> = runs
        .iter()
        .map(|r| r.spec.agent_ref.name.as_str())
        .collect();
    let chosen: Vec<Run> = runs
        .iter()
        .filter(|run| query.agent.is_empty() || run.spec.agent_ref.name == query.agent)
        .filter(|run| query.phase.is_empty() || phase_name(phase(run)) == query.phase)
        .filter(|run| selector.selects_all() || selector.matches(run.labels()))
        .map(|run| Run::clone(run))
        .collect();
    // COST shows when a listed Run is priced, as in `kubectl herd get`.
    let priced = any_priced(&chosen);
    let roots = newest_tops(&chosen);
    let nodes = tree(&chosen, Some(&roots), None);
    let total = nodes.len();
    let pages = total.div_ceil(PAGE_SIZE).max(1);
    let page = query.page.unwrap_or(1).clamp(1, pages);
    let rows = nodes
        .iter()
        .skip((page - 1) * PAGE_SIZE)
        .take(PAGE_SIZE)
        .map(|node| Row {
            href: run_href(node.run),
            cells: cells_with_cost(&node.label, node.run, all_namespaces, false, priced, now),
            phase: phase_name(phase(node.run)),
            created: created(node.run),
        })
        .collect();
    let header = header_with_cost(all_namespaces, false, priced);
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap_or_default();
    let at_page = |page: usize| {
        let mut to = query.clone();
        to.page = Some(page);
        query_string(&to)
    };
    Ok(RunsPage {
        name_column: column("NAME"),
        age_column: column("AGE"),
        header,
        rows,
        query: query.clone(),
        page,
        pages,
        total,
        agents: agents.into_iter().map(str::to_owned).collect(),
        phases: PHASES.into_iter().map(phase_name).collect(),
        previous: (page > 1).then(|| at_page(page - 1)),
        next: (page < pages).then(|| at_page(page + 1)),
    })
}

/// The page of `run`.
pub fn run_href(run: &Run) -> String {
    format!(
        "/runs/{}/{}",
        percent(&run.namespace().unwrap_or_default()),
        percent(&run.name_any())
    )
}

/// `run`'s creation time, RFC 3339 (empty without one).
pub fn created(run: &Run) -> String {
    run.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}

/// The query string of `query`, only the filters that are set.
pub fn query_string(query: &RunsQuery) -> String {
    let mut pairs = Vec::new();
    for (key, value) in [
        ("agent", &query.agent),
        ("phase", &query.phase),
        ("label", &query.label),
    ] {
        if !value.is_empty() {
            pairs.push(format!("{key}={}", percent(value)));
        }
    }
    if let Some(page) = query.page.filter(|p| *p > 1) {
        pairs.push(format!("page={page}"));
    }
    pairs.join("&")
}

/// `text` percent-encoded for a path segment or a query value.
pub fn percent(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use herd_crds::condition::ConditionStatus;
    use herd_crds::run::ParentRef;

    use super::*;
    use crate::testing::{at, run_named, succeeded};

    fn run(name: &str, agent: &str, parent: Option<&str>, created: i64, done: bool) -> Arc<Run> {
        let mut run = run_named(name);
        run.metadata.namespace = Some("team".into());
        run.metadata.creation_timestamp = Some(at(created));
        run.metadata.labels = Some(BTreeMap::from([("herd.dev/user".into(), agent.into())]));
        run.spec.agent_ref.name = agent.into();
        run.spec.parent_ref = parent.map(|p| ParentRef {
            name: p.into(),
            tool_call_id: "c".into(),
        });
        let status = if done {
            ConditionStatus::True
        } else {
            ConditionStatus::Unknown
        };
        let reason = if done { "Succeeded" } else { "Running" };
        run.status = Some(herd_crds::run::RunStatus {
            conditions: vec![succeeded(status, reason)],
            ..Default::default()
        });
        Arc::new(run)
    }

    fn runs() -> Vec<Arc<Run>> {
        vec![
            run("old", "writer", None, 0, true),
            run("fan", "researcher", None, 10, false),
            run("fan-a", "helper", Some("fan"), 11, true),
            run("fan-b", "helper", Some("fan"), 12, false),
        ]
    }

    fn names(page: &RunsPage) -> Vec<String> {
        page.rows
            .iter()
            .map(|r| r.cells[page.name_column].clone())
            .collect()
    }

    #[test]
    fn newest_families_first_with_get_s_columns() {
        let page = runs_page(&runs(), &RunsQuery::default(), false, at(100).0).unwrap();
        assert_eq!(names(&page), ["fan", "├─ fan-a", "└─ fan-b", "old"]);
        assert_eq!(page.header, crate::columns::header(false, false));
        assert_eq!(
            page.rows[0].cells,
            crate::columns::cells("fan", &runs()[1], false, false, at(100).0)
        );
        assert_eq!(page.rows[0].href, "/runs/team/fan");
        assert_eq!(page.rows[1].phase, "Succeeded");
        assert_eq!(page.agents, ["helper", "researcher", "writer"]);
        assert_eq!((page.page, page.pages, page.total), (1, 1, 4));
        assert_eq!(page.age_column, 6);
    }

    #[test]
    fn filters_narrow_the_tree_as_get_does() {
        let by_agent = RunsQuery {
            agent: "helper".into(),
            ..RunsQuery::default()
        };
        let page = runs_page(&runs(), &by_agent, false, at(100).0).unwrap();
        assert_eq!(
            names(&page),
            ["fan-b", "fan-a"],
            "children whose parent is not listed are tops"
        );
        let by_phase = RunsQuery {
            phase: "Succeeded".into(),
            ..RunsQuery::default()
        };
        let page = runs_page(&runs(), &by_phase, false, at(100).0).unwrap();
        assert_eq!(names(&page), ["fan-a", "old"]);
        let by_label = RunsQuery {
            label: "herd.dev/user!=helper, herd.dev/user".into(),
            ..RunsQuery::default()
        };
        let page = runs_page(&runs(), &by_label, false, at(100).0).unwrap();
        assert_eq!(names(&page), ["fan", "old"]);
        let bad = RunsQuery {
            label: "a in (b)".into(),
            ..RunsQuery::default()
        };
        assert!(
            runs_page(&runs(), &bad, false, at(100).0)
                .unwrap_err()
                .contains("key=value")
        );
    }

    #[test]
    fn pages_hold_a_hundred_rows_and_link_each_other() {
        let many: Vec<Arc<Run>> = (0..250)
            .map(|i| run(&format!("r{i:03}"), "a", None, i, true))
            .collect();
        let query = RunsQuery {
            agent: "a".into(),
            page: Some(2),
            ..RunsQuery::default()
        };
        let page = runs_page(&many, &query, true, at(1000).0).unwrap();
        assert_eq!((page.page, page.pages, page.total), (2, 3, 250));
        assert_eq!(page.rows.len(), PAGE_SIZE);
        assert_eq!(page.rows[0].cells[1], "r149");
        assert_eq!(page.previous.as_deref(), Some("agent=a"));
        assert_eq!(page.next.as_deref(), Some("agent=a&page=3"));
        let beyond = RunsQuery {
            page: Some(99),
            ..RunsQuery::default()
        };
        assert_eq!(runs_page(&many, &beyond, true, at(1000).0).unwrap().page, 3);
    }

    #[test]
    fn a_priced_run_adds_the_cost_column() {
        let mut runs = runs();
        let mut priced = Run::clone(&runs[0]);
        if let Some(status) = priced.status.as_mut() {
            let mut report = status.report.clone().unwrap_or_default();
            report.usage.cost = Some(herd_crds::report::Cost {
                currency: "USD".into(),
                micros: 4_210,
            });
            status.report = Some(report);
        }
        runs[0] = Arc::new(priced);
        let page = runs_page(&runs, &RunsQuery::default(), false, at(100).0).unwrap();
        let cost = page.header.iter().position(|h| *h == "COST").unwrap();
        let old = page.rows.iter().find(|r| r.href.ends_with("/old")).unwrap();
        assert_eq!(old.cells[cost], "0.00421 USD");
        assert_eq!(page.rows[0].cells[cost], "-");
    }

    #[test]
    fn names_are_encoded_in_links() {
        assert_eq!(percent("a b/é&"), "a%20b%2F%C3%A9%26");
    }
}
