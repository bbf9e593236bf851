//! `kubectl herd delete RUN... | --all | -l SELECTOR`: deletes Runs as `kubectl delete` does,
//! saying how many child Runs go with each (they are owned by their parent, so the garbage
//! collector deletes them, with the Pods and ConfigMaps the Runs own).

use std::collections::HashSet;

use herd_crds::run::Run;
use herd_crds::terminal_text::one_line;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};

use crate::cli::DeleteArgs;
use crate::connect::Cluster;
use crate::error::{CliError, api_error};
use crate::io::Io;
use crate::outcome::{EXIT_ANSWERED, EXIT_FAILED};
use crate::runs::{RUN_NOT_FOUND, run_target, runs};

/// The Runs to delete among `all` (the namespace's): the named ones, or those the selection
/// matched, leaving out those whose parent is deleted too (the garbage collector takes them).
pub fn chosen<'a>(
    all: &'a [Run],
    names: &[String],
    matched: Option<&[Run]>,
) -> (Vec<&'a Run>, Vec<String>) {
    let wanted: Vec<String> = match matched {
        Some(matched) => matched.iter().map(ResourceExt::name_any).collect(),
        None => names.to_vec(),
    };
    let set: HashSet<&str> = wanted.iter().map(String::as_str).collect();
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in &wanted {
        match all.iter().find(|r| r.name_any() == *name) {
            Some(run) => {
                let parent_too = run
                    .spec
                    .parent_ref
                    .as_ref()
                    .is_some_and(|p| set.contains(p.name.as_str()) && p.name != *name);
                if !parent_too {
                    found.push(run);
                }
            }
            None => missing.push(name.clone()),
        }
    }
    (found, missing)
}

/// How many Runs descend from `run` among `all`.
pub fn descendants(all: &[Run], run: &Run) -> usize {
    let mut seen: HashSet<String> = HashSet::from([run.name_any()]);
    let mut count = 0;
    let mut grew = true;
    while grew {
        grew = false;
        for candidate in all {
            let parent = candidate.spec.parent_ref.as_ref().map(|p| p.name.as_str());
            if parent.is_some_and(|p| seen.contains(p)) && seen.insert(candidate.name_any()) {
                count += 1;
                grew = true;
            }
        }
    }
    count
}

/// The line for a deleted Run, as `kubectl delete` says it, with its children.
pub fn deleted_line(name: &str, children: usize) -> String {
    let name = one_line(name);
    match children {
        0 => format!("run.herd.dev \"{name}\" deleted"),
        1 => format!("run.herd.dev \"{name}\" deleted (and its child Run)"),
        n => format!("run.herd.dev \"{name}\" deleted (and its {n} descendant Runs)"),
    }
}

/// Runs `delete`; the exit code (1 when a named Run was missing or a deletion failed).
pub async fn delete(cluster: &Cluster, args: &DeleteArgs, io: &mut Io<'_>) -> Result<u8, CliError> {
    let api = runs(cluster);
    let all = api
        .list(&ListParams::default())
        .await
        .map_err(|e| api_error(&e, run_target(cluster, "the Runs", "listing")))?
        .items;
    let matched = match (&args.selector, args.all) {
        (Some(selector), _) => Some(
            api.list(&ListParams::default().labels(selector))
                .await
                .map_err(|e| api_error(&e, run_target(cluster, "the Runs", "listing")))?
                .items,
        ),
        (None, true) => Some(all.clone()),
        (None, false) => None,
    };
    let (found, missing) = chosen(&all, &args.run, matched.as_deref());
    let mut code = EXIT_ANSWERED;
    for name in missing {
        let _ = writeln!(
            io.stderr,
            "error: Run {} not found in namespace {} ({RUN_NOT_FOUND})",
            one_line(&name),
            cluster.namespace
        );
        code = EXIT_FAILED;
    }
    if found.is_empty() && matched.is_some() {
        let _ = writeln!(
            io.stderr,
            "No Runs found in namespace {}.",
            cluster.namespace
        );
    }
    for run in found {
        let name = run.name_any();
        let object = format!("Run {name}");
        let deleted = match api.delete(&name, &DeleteParams::background()).await {
            // Gone meanwhile (the garbage collector takes a deleted parent's children).
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            other => other.map(drop),
        };
        match deleted {
            Ok(()) => {
                let _ = writeln!(io.stdout, "{}", deleted_line(&name, descendants(&all, run)));
            }
            Err(error) => {
                let _ = writeln!(
                    io.stderr,
                    "error: {}",
                    api_error(&error, run_target(cluster, &object, "deleting")).message
                );
                code = EXIT_FAILED;
            }
        }
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use herd_crds::run::ParentRef;

    use super::*;
    use crate::testing::run_named;

    fn child(name: &str, parent: &str) -> Run {
        let mut run = run_named(name);
        run.spec.parent_ref = Some(ParentRef {
            name: parent.into(),
            tool_call_id: "c".into(),
        });
        run
    }

    fn family() -> Vec<Run> {
        vec![
            run_named("p"),
            child("p-a", "p"),
            child("p-a-x", "p-a"),
            run_named("q"),
        ]
    }

    fn names(runs: &[&Run]) -> Vec<String> {
        runs.iter().map(|r| r.name_any()).collect()
    }

    #[test]
    fn children_go_with_their_parent() {
        let all = family();
        let (found, missing) = chosen(&all, &[], Some(&all));
        assert_eq!(names(&found), ["p", "q"]);
        assert!(missing.is_empty());
        assert_eq!(descendants(&all, &all[0]), 2);
        assert_eq!(
            deleted_line("p", 2),
            "run.herd.dev \"p\" deleted (and its 2 descendant Runs)"
        );
        assert_eq!(deleted_line("q", 0), "run.herd.dev \"q\" deleted");
    }

    #[test]
    fn named_runs_and_missing_ones() {
        let all = family();
        let (found, missing) = chosen(&all, &["p-a".into(), "gone".into()], None);
        assert_eq!(names(&found), ["p-a"]);
        assert_eq!(missing, ["gone"]);
        assert_eq!(
            deleted_line("p-a", 1),
            "run.herd.dev \"p-a\" deleted (and its child Run)"
        );
    }
}
