//! The Run tree of `kubectl herd get`: each Run with its children (and theirs) under it, found
//! by `spec.parentRef.name` among the Runs listed in the same namespace; a Run whose parent is
//! not listed counts as top-level. Siblings are in creation order, or by `--sort-by`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};

use herd_crds::run::Run;
use herd_crds::terminal_text::one_line;
use jiff::Timestamp;
use kube::ResourceExt;
use serde_json::Value;

use crate::jsonpath::Template;

/// One line of the tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Node<'a> {
    /// The Run's name after the tree's branches (`│  └─ notes-a`).
    pub label: String,
    /// The Run.
    pub run: &'a Run,
}

/// A Run's place: its namespace and name (`-A` lists several namespaces).
type Key = (String, String);

fn key(run: &Run) -> Key {
    (run.namespace().unwrap_or_default(), run.name_any())
}

/// The tree under `roots` (every top-level Run when `None`), siblings ordered by `sort_by`
/// (creation when `None`).
pub fn tree<'a>(
    runs: &'a [Run],
    roots: Option<&[&'a Run]>,
    sort_by: Option<&Template>,
) -> Vec<Node<'a>> {
    let keys: HashSet<Key> = runs.iter().map(key).collect();
    let mut children: BTreeMap<Key, Vec<&Run>> = BTreeMap::new();
    let mut tops = Vec::new();
    for run in runs {
        let parent = run
            .spec
            .parent_ref
            .as_ref()
            .map(|p| (run.namespace().unwrap_or_default(), p.name.clone()));
        match parent {
            Some(parent) if keys.contains(&parent) && parent != key(run) => {
                children.entry(parent).or_default().push(run);
            }
            _ => tops.push(run),
        }
    }
    let order = |list: &mut Vec<&Run>| sort(list, sort_by);
    children.values_mut().for_each(order);
    let roots: Vec<&Run> = match roots {
        Some(roots) => roots.to_vec(),
        None => {
            sort(&mut tops, sort_by);
            tops
        }
    };
    let mut nodes = Vec::new();
    let mut seen = HashSet::new();
    for run in roots {
        walk(run, "", None, &children, &mut seen, &mut nodes);
    }
    nodes
}

/// The top-level Runs among `runs`, newest first (`--last` takes the first).
pub fn newest_tops(runs: &[Run]) -> Vec<&Run> {
    let keys: HashSet<Key> = runs.iter().map(key).collect();
    let mut tops: Vec<&Run> = runs
        .iter()
        .filter(|r| {
            r.spec.parent_ref.as_ref().is_none_or(|p| {
                !keys.contains(&(r.namespace().unwrap_or_default(), p.name.clone()))
            })
        })
        .collect();
    tops.sort_by_key(|run| std::cmp::Reverse(created(run)));
    tops
}

fn created(run: &Run) -> (Option<Timestamp>, String) {
    (
        run.metadata.creation_timestamp.as_ref().map(|t| t.0),
        run.name_any(),
    )
}

/// Sorts `runs` by the `--sort-by` path (numbers as numbers, absent values first), else by
/// creation; ties by creation.
pub fn sort(runs: &mut [&Run], sort_by: Option<&Template>) {
    runs.sort_by(|a, b| {
        let by_path = sort_by.map_or(Ordering::Equal, |path| {
            compare(&sort_value(a, path), &sort_value(b, path))
        });
        by_path.then_with(|| created(a).cmp(&created(b)))
    });
}

fn sort_value(run: &Run, path: &Template) -> Value {
    serde_json::to_value(run)
        .ok()
        .and_then(|value| path.first(&value))
        .unwrap_or(Value::Null)
}

fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(Ordering::Equal),
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (x, y) => x.to_string().cmp(&y.to_string()),
    }
}

/// Adds `run`'s node and its children's; `last` is whether it is its parent's last child
/// (`None` for a root). `seen` stops a loop of parentRefs.
fn walk<'a>(
    run: &'a Run,
    indent: &str,
    last: Option<bool>,
    children: &BTreeMap<Key, Vec<&'a Run>>,
    seen: &mut HashSet<Key>,
    nodes: &mut Vec<Node<'a>>,
) {
    if !seen.insert(key(run)) {
        return;
    }
    let branch = match last {
        None => "",
        Some(false) => "├─ ",
        Some(true) => "└─ ",
    };
    nodes.push(Node {
        label: format!("{indent}{branch}{}", one_line(&run.name_any())),
        run,
    });
    let below = match last {
        None => indent.to_owned(),
        Some(false) => format!("{indent}│  "),
        Some(true) => format!("{indent}   "),
    };
    let kids = children
        .get(&key(run))
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, child) in kids.iter().enumerate() {
        let is_last = index + 1 == kids.len();
        walk(child, &below, Some(is_last), children, seen, nodes);
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

    fn names(nodes: &[Node<'_>]) -> Vec<String> {
        nodes.iter().map(|n| n.label.clone()).collect()
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

    fn named<'a>(runs: &'a [Run], name: &str) -> &'a Run {
        runs.iter().find(|r| r.name_any() == name).unwrap()
    }

    #[test]
    fn a_parent_with_children_is_a_tree_in_creation_order() {
        let runs = family();
        let nodes = tree(&runs, Some(&[named(&runs, "notes")]), None);
        assert_eq!(
            names(&nodes),
            ["notes", "├─ notes-a", "│  └─ notes-a-x", "└─ notes-b"]
        );
    }

    #[test]
    fn without_a_run_every_top_level_run_is_shown() {
        let runs = family();
        let nodes = tree(&runs, None, None);
        assert_eq!(
            names(&nodes),
            [
                "notes",
                "├─ notes-a",
                "│  └─ notes-a-x",
                "└─ notes-b",
                "other"
            ]
        );
        assert!(tree(&[], None, None).is_empty());
        let newest: Vec<String> = newest_tops(&runs).iter().map(|r| r.name_any()).collect();
        assert_eq!(newest, ["other", "notes"]);
    }

    #[test]
    fn sort_by_orders_siblings_by_a_path() {
        let runs = family();
        let by_name = Template::sort_path("{.metadata.name}").unwrap();
        let nodes = tree(&runs, None, Some(&by_name));
        assert_eq!(names(&nodes)[4], "other");
        let newest_first = Template::sort_path(".metadata.creationTimestamp").unwrap();
        let nodes = tree(&runs, Some(&[named(&runs, "notes")]), Some(&newest_first));
        assert_eq!(
            names(&nodes)[1],
            "├─ notes-a",
            "ascending, as kubectl sorts"
        );
    }

    #[test]
    fn a_child_can_be_the_root() {
        let runs = family();
        let nodes = tree(&runs, Some(&[named(&runs, "notes-a")]), None);
        assert_eq!(names(&nodes), ["notes-a", "└─ notes-a-x"]);
    }

    #[test]
    fn orphans_and_loops_never_hang_or_vanish() {
        let runs = vec![
            run("orphan", Some("deleted-parent"), 0, None),
            run("a", Some("b"), 1, None),
            run("b", Some("a"), 2, None),
            run("self", Some("self"), 3, None),
        ];
        let nodes = tree(&runs, None, None);
        assert_eq!(names(&nodes), ["orphan", "self"], "a loop has no top");
        let nodes = tree(&runs, Some(&[named(&runs, "a")]), None);
        assert_eq!(names(&nodes), ["a", "└─ b"]);
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
