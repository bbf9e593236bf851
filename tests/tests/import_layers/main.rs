//! Every crate's modules import one way: no two sibling modules, at any folder level, import
//! each other (directly or around a circle), and no top-level module imports one above it in
//! its crate's layers. The modules and their imports are read from the sources as the
//! compiler sees them (`module_tree`); the arrows between siblings and the checks are in
//! `arrows`; the layers of each crate are the data below.
//!
//! An import that breaks a rule today and cannot be fixed here is listed with why in its
//! crate's `known`; the test fails when a listed one disappears, so the list only shrinks.

mod arrows;
mod module_tree;

use std::collections::BTreeSet;
use std::path::Path;

use arrows::{Arrow, arrows, cycles, folder_name};
use module_tree::ModuleTree;

/// One crate's rules.
struct Rules {
    /// The crate's folder in the workspace.
    dir: &'static str,
    /// Its top-level modules in layers, from the top (which may import every layer below) to
    /// the bottom; a module may import its own layer and the ones below, never one above.
    layers: &'static [&'static [&'static str]],
    /// Imports that break a rule today, left until their fix lands.
    known: &'static [Known],
}

/// An import that breaks a rule today: every path that `from` (a module, with everything in
/// it) names into `to` (a module, with everything in it).
struct Known {
    from: &'static str,
    to: &'static str,
    /// Why it is left, and what would remove it.
    why: &'static str,
}

const CRATES: [Rules; 7] = [
    Rules {
        dir: "crds",
        // The resource types, each above what its spec and status are made of: the manifests
        // and generated schemas over everything; the wire types between the runner and the
        // operator over the Run they carry; the Run over budgets, pricing and reports; the
        // Agent over its approval and skill rules; plain formats and rules at the bottom.
        layers: &[
            &["generate", "manifest", "schema"],
            &["memory", "schedule"],
            &["wire"],
            &["run"],
            &["budget"],
            &["pricing"],
            &["report"],
            &["agent"],
            &["approval", "skill"],
            &["validation", "formats"],
            &[
                "duration",
                "condition",
                "micros",
                "reason",
                "refs",
                "skill_md",
            ],
            &["rules", "terminal_text"],
        ],
        known: &[],
    },
    Rules {
        dir: "otlp",
        // One file, no modules: nothing to layer.
        layers: &[],
        known: &[],
    },
    Rules {
        dir: "kubectl-herd",
        // The dashboard over the commands; commands built from other commands over those;
        // the listings and columns they share; the client, tables and trees; the command
        // line and output formats; errors and outcomes at the bottom.
        layers: &[
            &["dashboard"],
            &["launch", "describe", "get"],
            &["follow", "complete"],
            &[
                "answer", "approve", "budgets", "cancel", "delete", "logs", "result", "schedule",
                "start",
            ],
            &["catalog", "runs"],
            &["columns"],
            &["view"],
            &["connect", "manifest", "presence", "table", "io"],
            &["cli"],
            &["output", "tree"],
            &["error", "jsonpath"],
            &["outcome"],
        ],
        known: &[],
    },
    Rules {
        dir: "operator",
        // The process and its wiring over its servers; the run API over the controllers it
        // reads (a controller never calls the API); the controllers over what they apply and
        // share; metrics below those that count; the configuration over the pure decisions
        // (`decide` is functions of their inputs: it never reads the configuration, the
        // cluster or the API); labels, scopes and errors at the bottom.
        layers: &[
            &["operator", "cli"],
            &["http", "leader", "secure_metrics"],
            &["run_api"],
            &["controller"],
            &["apply", "certificates", "crd_version", "slim", "traces"],
            &["controller_state"],
            &["metrics"],
            &["config", "builtin_skills"],
            &["decide"],
            &["labels", "scope", "error"],
        ],
        known: &[],
    },
    Rules {
        dir: "runner",
        // The command line over the pod and the local run; the runtime that assembles a run
        // over the middleware chain; the agent loop and MCP over the plan; the tools over the
        // control plane they report to; memory, telemetry and prompts over the models and
        // skills; the thread and tag escaping at the bottom. The sandbox is its own crate.
        layers: &[
            &["cli"],
            &["pod"],
            &["runtime"],
            &["middleware"],
            &["agent", "mcp"],
            &["plan"],
            &["tools"],
            &["control"],
            &["memory", "telemetry", "prompt"],
            &["model", "skills"],
            &["thread", "tag_escaping"],
        ],
        known: &[],
    },
    Rules {
        dir: "sandbox",
        // The command's entry and the test doubles over the ways to reach a sandbox (a
        // confined child, in-process, the socket); those over the agent side's typed client
        // and the executor seam; the seam over the sandbox side (answering requests, its
        // services, the tools, the host); all of it over the wire protocol; confinement and
        // document conversion over paths and truncation, which name nothing above them.
        layers: &[
            &["serve", "testing"],
            &["confined"],
            &["in_process", "socket"],
            &["client"],
            &["executor"],
            &["dispatch"],
            &["stdio", "file_services", "inputs", "saved_files"],
            &["tools"],
            &["host"],
            &["protocol"],
            &["confine", "convert"],
            &[
                "paths",
                "walk",
                "args",
                "io_error",
                "process_groups",
                "stderr_tail",
                "truncation",
            ],
            &["mask", "realpath"],
        ],
        known: &[],
    },
    Rules {
        dir: "tests",
        // The end-to-end crate's library: the local kubelet over the suite's harness; the
        // harness over the real node and the GitOps checks; those over the cluster, the
        // in-process kubelet, the CRD helpers and the operator's and runner's ServiceAccount
        // tokens; the cluster over the control plane it may start; processes, certificates,
        // kubeconfigs and fixtures below; plain parsers and dumps at the bottom.
        layers: &[
            &["local_kubelet"],
            &["harness"],
            &["node", "argo_cd", "flux"],
            &[
                "cluster",
                "kubelet",
                "crds",
                "lua_literal",
                "operator_rbac",
                "runner",
            ],
            &["control_plane"],
            &[
                "kubeconfig",
                "pki",
                "process",
                "fixtures",
                "requests",
                "wait",
                "external_tools",
                "namespace",
            ],
            &["dump", "operator_requests", "promql", "relay"],
        ],
        known: &[],
    },
];

#[test]
fn modules_import_down_their_layers_and_never_in_a_circle() -> Result<(), String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut failures = Vec::new();
    for rules in &CRATES {
        let tree = ModuleTree::read(&workspace.join(rules.dir))?;
        failures.extend(
            check(rules, &tree)
                .into_iter()
                .map(|failure| format!("{}: {failure}", rules.dir)),
        );
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n\n"))
    }
}

/// What breaks `rules` in `tree`.
fn check(rules: &Rules, tree: &ModuleTree) -> Vec<String> {
    let mut failures = Vec::new();
    let top_level: BTreeSet<&str> = tree
        .modules
        .get(&Vec::new())
        .map(|root| root.children.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let layered: Vec<&str> = rules
        .layers
        .iter()
        .flat_map(|layer| layer.iter().copied())
        .collect();
    for module in &top_level {
        if layered.iter().filter(|name| *name == module).count() != 1 {
            failures.push(format!(
                "the top-level module {module} is not in exactly one layer"
            ));
        }
    }
    for name in &layered {
        if !top_level.contains(name) {
            failures.push(format!(
                "the layers name {name}, which is no top-level module"
            ));
        }
    }
    let all = arrows(tree);
    // A crate of one file has nothing to import between; any other that shows no import
    // between its top-level modules was not read right.
    if top_level.len() > 1 && all.iter().all(|arrow| !arrow.parent.is_empty()) {
        failures.push("no import between top-level modules was read".to_owned());
    }
    let (known, arrows): (Vec<Arrow>, Vec<Arrow>) = all
        .into_iter()
        .partition(|arrow| rules.known.iter().any(|known| matches(known, arrow)));
    for entry in rules.known {
        if !known.iter().any(|arrow| matches(entry, arrow)) {
            failures.push(format!(
                "{} no longer imports {} (listed as: {}): take it off the known list",
                entry.from, entry.to, entry.why
            ));
        }
    }
    failures.extend(cycles(&arrows));
    let layer_of = |module: &str| {
        rules
            .layers
            .iter()
            .position(|layer| layer.contains(&module))
    };
    let mut told = BTreeSet::new();
    for arrow in arrows.iter().filter(|arrow| arrow.parent.is_empty()) {
        if let (Some(from), Some(to)) = (layer_of(&arrow.from), layer_of(&arrow.to))
            && to < from
            && told.insert((&arrow.source, &arrow.target))
        {
            failures.push(format!(
                "in {}: {} imports a layer above it: {arrow}",
                folder_name(&arrow.parent),
                arrow.from
            ));
        }
    }
    failures
}

/// Whether `arrow` is one of the imports `known` lists.
fn matches(known: &Known, arrow: &Arrow) -> bool {
    let starts = |path: &[String], prefix: &str| {
        let prefix: Vec<&str> = prefix.split("::").collect();
        path.len() >= prefix.len() && path.iter().zip(&prefix).all(|(a, b)| a == b)
    };
    starts(&arrow.source, known.from) && starts(&arrow.target, known.to)
}

#[cfg(test)]
mod reading {
    //! The reader and the checks on a small crate written for them.

    use super::*;

    /// Writes `files` (path under the crate, text) into a fresh crate folder.
    fn crate_of(files: &[(&str, &str)]) -> Result<tempfile::TempDir, std::io::Error> {
        let dir = tempfile::tempdir()?;
        for (path, text) in files {
            let file = dir.path().join(path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(file, text)?;
        }
        Ok(dir)
    }

    /// The arrows among `parent`'s children, as `from -> to`, sorted and once each.
    fn drawn(tree: &ModuleTree, parent: &[&str]) -> Vec<String> {
        let parent: Vec<String> = parent.iter().map(|s| (*s).to_owned()).collect();
        let found: BTreeSet<String> = arrows(tree)
            .into_iter()
            .filter(|arrow| arrow.parent == parent)
            .map(|arrow| format!("{} -> {}", arrow.from, arrow.to))
            .collect();
        found.into_iter().collect()
    }

    const SMALL_CRATE: [(&str, &str); 8] = [
        (
            "src/lib.rs",
            "mod a; mod b; mod c; mod d; mod e;\npub use b::Thing;\n",
        ),
        (
            "src/a.rs",
            "use crate::b::X;\n\
             pub(crate) use crate::{c::{inner::Y, Z}, d as renamed};\n\
             // crate::e is only mentioned\n\
             fn f() -> usize { let _ = \"crate::e::ONE\"; crate::d::len() }\n\
             #[cfg(test)]\n\
             mod tests { use crate::e::Q; }\n",
        ),
        (
            "src/b.rs",
            "pub struct Thing;\nfn g() { assert!(matches!(1, super::c::ONE)); }\n",
        ),
        (
            "src/c/mod.rs",
            "mod inner; mod other;\npub const ONE: u8 = 1;\n",
        ),
        (
            "src/c/inner.rs",
            "use super::other::K;\n#[cfg(any(test, feature = \"x\"))]\nuse super::super::e::R;\n",
        ),
        ("src/c/other.rs", "pub use crate::c::inner::M;\n"),
        ("src/e.rs", "pub struct Q;\npub struct R;\n"),
        (
            "src/d.rs",
            "use crate::Thing;\nmod tests { use super::*; fn t() { let _ = len(); } }\n",
        ),
    ];

    #[test]
    fn imports_are_read_from_use_trees_inline_paths_and_macros_but_not_comments_or_tests()
    -> Result<(), String> {
        let dir = crate_of(&SMALL_CRATE).map_err(|error| error.to_string())?;
        let tree = ModuleTree::read(dir.path())?;
        assert_eq!(
            drawn(&tree, &[]),
            ["a -> b", "a -> c", "a -> d", "b -> c", "c -> e", "d -> b",],
            "the re-export `crate::Thing` leads d to b; a's test module is left out"
        );
        assert_eq!(drawn(&tree, &["c"]), ["inner -> other", "other -> inner"]);
        Ok(())
    }

    #[test]
    fn a_cycle_is_found_and_named_with_the_imports_that_make_it() -> Result<(), String> {
        let dir = crate_of(&SMALL_CRATE).map_err(|error| error.to_string())?;
        let tree = ModuleTree::read(dir.path())?;
        let found = cycles(&arrows(&tree));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "in src/c/: {inner, other} import each other: inner -> other -> inner"
            ),
            "{}",
            found[0]
        );
        assert!(
            found[0].contains("src/c/inner.rs:1: crate::c::inner names crate::c::other"),
            "{}",
            found[0]
        );
        Ok(())
    }

    #[test]
    fn a_known_import_is_left_out_and_a_stale_one_is_reported() -> Result<(), String> {
        let dir = crate_of(&SMALL_CRATE).map_err(|error| error.to_string())?;
        let tree = ModuleTree::read(dir.path())?;
        let rules = Rules {
            dir: "small",
            layers: &[&["a"], &["d"], &["b"], &["c"], &["e"]],
            known: &[
                Known {
                    from: "c::other",
                    to: "c::inner",
                    why: "test",
                },
                Known {
                    from: "e",
                    to: "a",
                    why: "test",
                },
            ],
        };
        assert_eq!(
            check(&rules, &tree),
            ["e no longer imports a (listed as: test): take it off the known list"]
        );
        let upside_down = Rules {
            layers: &[&["e"], &["c"], &["b"], &["d"], &["a"]],
            known: &[],
            ..rules
        };
        let failures = check(&upside_down, &tree);
        assert!(
            failures
                .iter()
                .any(|failure| failure.starts_with("in src/: a imports a layer above it: a -> b")),
            "{failures:?}"
        );
        Ok(())
    }

    #[test]
    fn only_code_that_exists_in_test_builds_alone_is_left_out() {
        let attrs = |text: &str| -> Vec<syn::Attribute> {
            syn::parse_str::<syn::ItemStruct>(&format!("{text} struct S;"))
                .map(|item| item.attrs)
                .unwrap_or_default()
        };
        assert!(module_tree::only_in_tests(&attrs("#[cfg(test)]")));
        assert!(module_tree::only_in_tests(&attrs(
            "#[cfg(all(test, unix))]"
        )));
        assert!(!module_tree::only_in_tests(&attrs(
            "#[cfg(any(test, feature = \"test-support\"))]"
        )));
        assert!(!module_tree::only_in_tests(&attrs("#[cfg(not(test))]")));
        assert!(!module_tree::only_in_tests(&attrs(
            "#[cfg(target_os = \"linux\")]"
        )));
    }

    #[test]
    fn every_crate_of_the_workspace_has_rules() -> Result<(), String> {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let manifest = std::fs::read_to_string(workspace.join("Cargo.toml"))
            .map_err(|error| error.to_string())?;
        let members = manifest
            .lines()
            .find_map(|line| line.strip_prefix("members = ["))
            .ok_or("no members in the workspace's Cargo.toml")?;
        let expected: BTreeSet<&str> = members
            .split(['"', ',', ' ', ']'])
            .filter(|member| !member.is_empty())
            .collect();
        let checked: BTreeSet<&str> = CRATES.iter().map(|rules| rules.dir).collect();
        assert_eq!(checked, expected);
        Ok(())
    }
}
