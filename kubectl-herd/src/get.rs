//! `kubectl herd get [RUN]...` (and `list`): the Runs as a tree with their status, tokens and
//! times, or in another `-o` format; `-A`, `-l`, `--field-selector`, `--last`, `--limit`,
//! `--sort-by` choose and order them, `-w` prints each change after the list.

use std::collections::HashSet;

use futures::StreamExt;
use herd_crds::run::Run;
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::cli::{GetArgs, Selection};
use crate::columns::{any_priced, cells_with_cost, header_with_cost};
use crate::connect::Cluster;
use crate::error::{CliError, api_error};
use crate::io::Io;
use crate::outcome::{EXIT_ANSWERED, EXIT_INTERRUPTED};
use crate::output::{Output, print_objects};
use crate::runs::{RUN_NOT_FOUND, run_target};
use crate::schedule;
use crate::table::render;
use crate::tree::{Node, newest_tops, sort, tree};

/// The Runs API of the selection: one namespace, or all with `-A`.
pub fn runs_api(cluster: &Cluster, all_namespaces: bool) -> Api<Run> {
    if all_namespaces {
        Api::all(cluster.client.clone())
    } else {
        Api::namespaced(cluster.client.clone(), &cluster.namespace)
    }
}

/// The list parameters of `-l` and `--field-selector`.
pub fn list_params(selection: &Selection) -> ListParams {
    ListParams {
        label_selector: selection.selector.clone(),
        field_selector: selection.field_selector.clone(),
        ..ListParams::default()
    }
}

/// Where the selection looks, for messages: `namespace research` or `any namespace`.
fn place(cluster: &Cluster, all_namespaces: bool) -> String {
    if all_namespaces {
        "any namespace".to_owned()
    } else {
        format!("namespace {}", cluster.namespace)
    }
}

/// The Runs the arguments choose among `runs`: the named ones, the newest, the `--limit`
/// newest, or `None` for every top-level Run.
fn roots<'a>(
    runs: &'a [Run],
    args: &GetArgs,
    place: &str,
) -> Result<Option<Vec<&'a Run>>, CliError> {
    if args.last {
        let newest = newest_tops(runs).into_iter().next().ok_or_else(|| {
            CliError::new(format!(
                "--last: there are no Runs in {place} (start one with kubectl herd run)"
            ))
        })?;
        return Ok(Some(vec![newest]));
    }
    if !args.run.is_empty() {
        return args
            .run
            .iter()
            .map(|name| {
                runs.iter().find(|r| r.name_any() == *name).ok_or_else(|| {
                    CliError::new(format!("Run {name} not found in {place} ({RUN_NOT_FOUND})"))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some);
    }
    Ok(args.limit.map(|limit| {
        let mut newest: Vec<&Run> = newest_tops(runs).into_iter().take(limit).collect();
        sort(&mut newest, args.sort_by.as_ref());
        newest
    }))
}

/// `get budgets [NAME...]` (or `budget`, `hbudget`) lists Budgets instead of Runs.
fn budgets_asked(args: &GetArgs) -> Option<crate::cli::CatalogArgs> {
    let (kind, names) = args.run.split_first()?;
    crate::budgets::KIND_NAMES
        .contains(&kind.as_str())
        .then(|| crate::cli::CatalogArgs {
            names: names.to_vec(),
            all_namespaces: args.selection.all_namespaces,
            selector: args.selection.selector.clone(),
            output: args.output.clone(),
        })
}

/// Runs `get`; the exit code.
pub async fn get(cluster: &Cluster, args: &GetArgs, io: &mut Io<'_>) -> Result<u8, CliError> {
    if let Some(budgets) = budgets_asked(args) {
        return crate::budgets::list(cluster, &budgets, io).await;
    }
    let all = args.selection.all_namespaces;
    let place = place(cluster, all);
    let api = runs_api(cluster, all);
    let list = api
        .list(&list_params(&args.selection))
        .await
        .map_err(|e| api_error(&e, run_target(cluster, "the Runs", "listing")))?;
    let runs = list.items;
    let roots = roots(&runs, args, &place)?;
    let named = roots.is_some() && (args.last || !args.run.is_empty());
    let nodes = tree(&runs, roots.as_deref(), args.sort_by.as_ref());
    let format = args.output.clone().unwrap_or(Output::Table);
    let text = show(
        &nodes,
        roots.as_deref().filter(|_| named),
        all,
        &format,
        Timestamp::now(),
    )?;
    match text {
        Some(text) => {
            let _ = write!(io.stdout, "{text}");
        }
        None => {
            let _ = writeln!(io.stderr, "No Runs found in {place}.");
        }
    }
    // A listing (no Run named, a table, no field selector: Schedules have no such fields) shows
    // the Schedules that start Runs here too, with their next time.
    let listing = !named && args.limit.is_none() && format.is_table();
    if listing && !args.watch && args.selection.field_selector.is_none() {
        let schedules =
            schedule::beside_runs(cluster, all, args.selection.selector.as_deref()).await;
        if !schedules.is_empty() {
            let table = schedule::table(&schedules, all, Timestamp::now());
            let _ = write!(io.stdout, "\n{table}");
        }
    }
    if !args.watch {
        return Ok(EXIT_ANSWERED);
    }
    let family: HashSet<String> = nodes.iter().map(|n| n.run.name_any()).collect();
    // Watched rows keep the listing's columns.
    let priced = any_priced(nodes.iter().map(|n| n.run));
    watch(api, args, named.then_some(family), &format, priced, io).await
}

/// The text of `nodes` in `format`; `named` are the Runs asked for by name (printed alone in
/// the formats other than tables, as kubectl prints a named object). `None`: nothing to show.
pub fn show(
    nodes: &[Node<'_>],
    named: Option<&[&Run]>,
    all_namespaces: bool,
    format: &Output,
    now: Timestamp,
) -> Result<Option<String>, CliError> {
    if format.is_table() {
        if nodes.is_empty() {
            return Ok(None);
        }
        let wide = *format == Output::Wide;
        let priced = any_priced(nodes.iter().map(|n| n.run));
        let rows: Vec<Vec<String>> = nodes
            .iter()
            .map(|n| cells_with_cost(&n.label, n.run, all_namespaces, wide, priced, now))
            .collect();
        return Ok(Some(render(
            &header_with_cost(all_namespaces, wide, priced),
            &rows,
        )));
    }
    let objects: Vec<Run> = match named {
        Some(named) => named.iter().map(|r| (*r).clone()).collect(),
        None => nodes.iter().map(|n| n.run.clone()).collect(),
    };
    let single = named.is_some_and(|n| n.len() == 1);
    print_objects(&objects, single, format).map(Some)
}

/// `-w`: each change of a listed Run (or a new one), as a table row or in `format`, until
/// Ctrl-C. `family` keeps to the named Runs and their descendants.
async fn watch(
    api: Api<Run>,
    args: &GetArgs,
    mut family: Option<HashSet<String>>,
    format: &Output,
    priced: bool,
    io: &mut Io<'_>,
) -> Result<u8, CliError> {
    let config = watcher::Config {
        label_selector: args.selection.selector.clone(),
        field_selector: args.selection.field_selector.clone(),
        ..watcher::Config::default()
    };
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut listed = false;
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            () = &mut io.interrupt => return Ok(EXIT_INTERRUPTED),
        };
        let run = match event {
            None => {
                return Err(CliError::new(
                    "the watch of the Runs ended (run the command again)",
                ));
            }
            Some(Err(error)) => {
                let _ = writeln!(
                    io.stderr,
                    "warning: the watch of the Runs failed: {error}; retrying"
                );
                continue;
            }
            Some(Ok(watcher::Event::InitDone)) => {
                listed = true;
                continue;
            }
            Some(Ok(watcher::Event::Apply(run) | watcher::Event::Delete(run))) if listed => run,
            Some(Ok(_)) => continue,
        };
        if let Some(family) = family.as_mut() {
            let parent = run.spec.parent_ref.as_ref().map(|p| p.name.as_str());
            if !family.contains(&run.name_any()) && !parent.is_some_and(|p| family.contains(p)) {
                continue;
            }
            family.insert(run.name_any());
        }
        let line = change_line(
            &run,
            args.selection.all_namespaces,
            format,
            priced,
            Timestamp::now(),
        )?;
        // A reader that stopped reading (`| head`) ends the watch.
        if write!(io.stdout, "{line}")
            .and_then(|()| io.stdout.flush())
            .is_err()
        {
            return Ok(EXIT_ANSWERED);
        }
    }
}

/// One watched change: the Run's row without the header, or the Run in `format`.
fn change_line(
    run: &Run,
    all_namespaces: bool,
    format: &Output,
    priced: bool,
    now: Timestamp,
) -> Result<String, CliError> {
    if format.is_table() {
        let wide = *format == Output::Wide;
        let table = render(
            &header_with_cost(all_namespaces, wide, priced),
            &[cells_with_cost(
                &run.name_any(),
                run,
                all_namespaces,
                wide,
                priced,
                now,
            )],
        );
        return Ok(table
            .lines()
            .nth(1)
            .map(|l| format!("{l}\n"))
            .unwrap_or_default());
    }
    let text = print_objects(std::slice::from_ref(run), true, format)?;
    Ok(match format {
        Output::Yaml => format!("---\n{text}"),
        Output::JsonPath(_) => format!("{text}\n"),
        _ => text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{GOLDEN_NOW, at, family_tree};

    fn table(format: &Output, all_namespaces: bool) -> String {
        let runs = family_tree();
        let nodes = tree(&runs, None, None);
        show(&nodes, None, all_namespaces, format, at(GOLDEN_NOW).0)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn the_table_of_a_run_tree() {
        insta::assert_snapshot!("get", table(&Output::Table, false));
    }

    #[test]
    fn the_wide_table_of_a_run_tree() {
        insta::assert_snapshot!("get_wide", table(&Output::Wide, false));
    }

    #[test]
    fn every_namespace_adds_a_column() {
        let text = table(&Output::Table, true);
        assert!(text.starts_with("NAMESPACE   NAME"), "{text}");
        assert!(
            text.lines().skip(1).all(|l| l.starts_with("research ")),
            "{text}"
        );
    }

    #[test]
    fn a_named_run_prints_alone_in_json() {
        let runs = family_tree();
        let nodes = tree(&runs, Some(&[&runs[0]]), None);
        let text = show(
            &nodes,
            Some(&[&runs[0]]),
            false,
            &Output::Json,
            at(GOLDEN_NOW).0,
        )
        .unwrap()
        .unwrap();
        let back: Run = serde_json::from_str(&text).unwrap();
        assert_eq!(back, runs[0]);
        let listed = show(&nodes, None, false, &Output::Name, at(GOLDEN_NOW).0)
            .unwrap()
            .unwrap();
        assert_eq!(
            listed,
            "run.herd.dev/notes\nrun.herd.dev/notes-a\nrun.herd.dev/notes-b\n"
        );
        assert_eq!(
            show(&[], None, false, &Output::Table, at(0).0).unwrap(),
            None
        );
    }

    #[test]
    fn a_watched_change_is_one_row() {
        let runs = family_tree();
        let line = change_line(&runs[3], false, &Output::Table, false, at(GOLDEN_NOW).0).unwrap();
        assert!(
            line.starts_with("other   writer   Agent not found"),
            "{line}"
        );
        assert_eq!(line.lines().count(), 1);
        let yaml = change_line(&runs[3], false, &Output::Yaml, false, at(GOLDEN_NOW).0).unwrap();
        assert!(yaml.starts_with("---\n"), "{yaml}");
    }
}
