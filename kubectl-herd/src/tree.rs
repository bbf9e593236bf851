//! `kubectl herd get [RUN]`: a Run and its children (and theirs), as a tree with phase,
//! reason and age; without RUN, every top-level Run of the namespace. Children are found by
//! `spec.parentRef.name` among the namespace's Runs.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use herd_crds::run::Run;
use herd_crds::terminal_text::one_line;
use jiff::Timestamp;
use kube::ResourceExt;

use crate::view::{phase_name, view};

/// One line of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The Run's name after the tree's branches.
    pub name: String,
    /// Its phase.
    pub phase: &'static str,
    /// Its `Succeeded` condition's reason.
    pub reason: String,
    /// Time since its creation, as `kubectl get` shows it.
    pub age: String,
}

/// The rows of the tree under `root` (every top-level Run when `None`, a Run whose parent is not
/// among `runs` counting as top-level); `None` when `root` is not among `runs`.
pub fn tree(runs: &[Run], root: Option<&str>, now: Timestamp) -> Option<Vec<Row>> {
    let names: HashSet<String> = runs.iter().map(ResourceExt::name_any).collect();
    let mut children: BTreeMap<String, Vec<&Run>> = BTreeMap::new();
    let mut tops = Vec::new();
    for run in runs {
        match run.spec.parent_ref.as_ref().map(|p| &p.name) {
            Some(parent) if names.contains(parent) && *parent != run.name_any() => {
                children.entry(parent.clone()).or_default().push(run);
            }
            _ => tops.push(run),
        }
    }
    for list in children.values_mut() {
        list.sort_by_key(|r| order(r));
    }
    let roots: Vec<&Run> = match root {
        Some(name) => vec![runs.iter().find(|r| r.name_any() == name)?],
        None => {
            tops.sort_by_key(|r| order(r));
            tops
        }
    };
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    for run in roots {
        walk(run, "", None, &children, now, &mut seen, &mut rows);
    }
    Some(rows)
}

fn order(run: &Run) -> (Option<Timestamp>, String) {
    (
        run.metadata.creation_timestamp.as_ref().map(|t| t.0),
        run.name_any(),
    )
}

/// Adds `run`'s row and its children's; `last` is whether it is its parent's last child
/// (`None` for a root). `seen` stops a loop of parentRefs.
fn walk(
    run: &Run,
    indent: &str,
    last: Option<bool>,
    children: &BTreeMap<String, Vec<&Run>>,
    now: Timestamp,
    seen: &mut HashSet<String>,
    rows: &mut Vec<Row>,
) {
    let name = run.name_any();
    if !seen.insert(name.clone()) {
        return;
    }
    let branch = match last {
        None => "",
        Some(false) => "├─ ",
        Some(true) => "└─ ",
    };
    let shown = view(run);
    rows.push(Row {
        name: format!("{indent}{branch}{}", one_line(&name)),
        phase: phase_name(shown.phase),
        reason: one_line(&shown.reason),
        age: run
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| age(t.0, now))
            .unwrap_or_else(|| "<unknown>".to_owned()),
    });
    let below = match last {
        None => indent.to_owned(),
        Some(false) => format!("{indent}│  "),
        Some(true) => format!("{indent}   "),
    };
    let kids = children.get(&name).map(Vec::as_slice).unwrap_or_default();
    for (index, child) in kids.iter().enumerate() {
        let is_last = index + 1 == kids.len();
        walk(child, &below, Some(is_last), children, now, seen, rows);
    }
}

/// The time from `created` to `now` as `kubectl get` shows ages: `45s`, `5m30s`, `42m`,
/// `3h15m`, `20h`, `3d4h`, `40d`, `2y30d`, `9y`.
pub fn age(created: Timestamp, now: Timestamp) -> String {
    let seconds = now.as_second().saturating_sub(created.as_second());
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_rest(minutes, "m", seconds % 60, "s");
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return with_rest(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return with_rest(days, "d", hours % 24, "h");
    }
    if days < 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if days < 365 * 8 {
        return with_rest(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

fn with_rest(big: i64, big_unit: &str, rest: i64, rest_unit: &str) -> String {
    if rest == 0 {
        format!("{big}{big_unit}")
    } else {
        format!("{big}{big_unit}{rest}{rest_unit}")
    }
}

/// The rows as a table with a header, columns padded like `kubectl get`'s.
pub fn render(rows: &[Row]) -> String {
    let header = Row {
        name: "NAME".into(),
        phase: "PHASE",
        reason: "REASON".into(),
        age: "AGE".into(),
    };
    let all: Vec<&Row> = std::iter::once(&header).chain(rows).collect();
    let width = |cell: fn(&Row) -> &str| {
        all.iter()
            .map(|r| cell(r).chars().count())
            .max()
            .unwrap_or(0)
    };
    let name_width = width(|r| &r.name);
    let phase_width = width(|r| r.phase);
    let reason_width = width(|r| &r.reason);
    let mut out = String::new();
    for row in all {
        let line = format!(
            "{}   {}   {}   {}",
            pad(&row.name, name_width),
            pad(row.phase, phase_width),
            pad(&row.reason, reason_width),
            row.age
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

fn pad(text: &str, width: usize) -> String {
    let fill = width.saturating_sub(text.chars().count());
    format!("{text}{}", " ".repeat(fill))
}

#[cfg(test)]
mod tests {
    use herd_crds::condition::ConditionStatus;
    use herd_crds::run::ParentRef;

    use super::*;
    use crate::testing::{at, run_named, succeeded};

    fn run(
        name: &str,
        parent: Option<&str>,
        created: i64,
        reason: Option<(ConditionStatus, &str)>,
    ) -> Run {
        let mut run = run_named(name);
        run.metadata.creation_timestamp = Some(at(created));
        run.spec.parent_ref = parent.map(|p| ParentRef {
            name: p.into(),
            tool_call_id: format!("call-{name}"),
        });
        if let Some((status, reason)) = reason {
            run.status = Some(herd_crds::run::RunStatus {
                conditions: vec![succeeded(status, reason)],
                ..Default::default()
            });
        }
        run
    }

    fn names(rows: &[Row]) -> Vec<&str> {
        rows.iter().map(|r| r.name.as_str()).collect()
    }

    fn family() -> Vec<Run> {
        vec![
            run(
                "notes",
                None,
                0,
                Some((ConditionStatus::Unknown, "Running")),
            ),
            run(
                "notes-b",
                Some("notes"),
                20,
                Some((ConditionStatus::Unknown, "PodPending")),
            ),
            run(
                "notes-a",
                Some("notes"),
                10,
                Some((ConditionStatus::True, "Succeeded")),
            ),
            run(
                "notes-a-x",
                Some("notes-a"),
                15,
                Some((ConditionStatus::False, "Cancelled")),
            ),
            run("other", None, 5, None),
        ]
    }

    #[test]
    fn a_parent_with_children_is_a_tree_in_creation_order() {
        let rows = tree(&family(), Some("notes"), at(100).0).unwrap();
        assert_eq!(
            names(&rows),
            ["notes", "├─ notes-a", "│  └─ notes-a-x", "└─ notes-b"]
        );
        assert_eq!(
            rows.iter()
                .map(|r| (r.phase, r.reason.as_str(), r.age.as_str()))
                .collect::<Vec<_>>(),
            [
                ("Running", "Running", "100s"),
                ("Succeeded", "Succeeded", "90s"),
                ("Cancelled", "Cancelled", "85s"),
                ("Running", "PodPending", "80s"),
            ]
        );
        assert_eq!(
            render(&rows),
            "NAME              PHASE       REASON       AGE\n\
             notes             Running     Running      100s\n\
             ├─ notes-a        Succeeded   Succeeded    90s\n\
             │  └─ notes-a-x   Cancelled   Cancelled    85s\n\
             └─ notes-b        Running     PodPending   80s\n"
        );
    }

    #[test]
    fn without_a_run_every_top_level_run_is_shown() {
        let rows = tree(&family(), None, at(100).0).unwrap();
        assert_eq!(
            names(&rows),
            [
                "notes",
                "├─ notes-a",
                "│  └─ notes-a-x",
                "└─ notes-b",
                "other"
            ]
        );
        assert_eq!(rows[4].phase, "Pending");
        assert_eq!(tree(&[], None, at(0).0), Some(vec![]));
    }

    #[test]
    fn a_child_can_be_the_root_and_a_missing_run_is_none() {
        let rows = tree(&family(), Some("notes-a"), at(100).0).unwrap();
        assert_eq!(names(&rows), ["notes-a", "└─ notes-a-x"]);
        assert_eq!(tree(&family(), Some("gone"), at(0).0), None);
    }

    #[test]
    fn orphans_and_loops_never_hang_or_vanish() {
        let runs = vec![
            run("orphan", Some("deleted-parent"), 0, None),
            run("a", Some("b"), 1, None),
            run("b", Some("a"), 2, None),
            run("self", Some("self"), 3, None),
        ];
        let rows = tree(&runs, None, at(10).0).unwrap();
        assert_eq!(names(&rows), ["orphan", "self"], "a loop has no top");
        let rows = tree(&runs, Some("a"), at(10).0).unwrap();
        assert_eq!(names(&rows), ["a", "└─ b"]);
    }

    #[test]
    fn ages_read_as_kubectl_shows_them() {
        let cases = [
            (-5, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (330, "5m30s"),
            (2520, "42m"),
            (3 * 3600 + 15 * 60, "3h15m"),
            (5 * 3600, "5h"),
            (20 * 3600, "20h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (40 * 86400, "40d"),
            (3 * 365 * 86400 + 30 * 86400, "3y30d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, shown) in cases {
            assert_eq!(age(at(0).0, at(seconds).0), shown, "{seconds}s");
        }
    }
}
