//! The layers of the runner import each other one way only: a test reads every `crate::` path
//! under `runner/src/` (the `use crate::` lines, brace groups included, and paths written
//! inline) and fails on any import cycle among the modules below.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules that must not import each other in a circle.
const LAYERS: [&str; 4] = ["runtime", "middleware", "control", "tools"];

/// Which top-level modules each top-level module names, read from the sources under `src`.
fn imports(src: &Path) -> std::io::Result<BTreeMap<String, BTreeSet<String>>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in rust_files(src)? {
        let Some(module) = top_level_module(src, &path) else {
            continue;
        };
        let text = std::fs::read_to_string(&path)?;
        let named = graph.entry(module.clone()).or_default();
        named.extend(
            crate_paths(&text)
                .into_iter()
                .filter(|target| *target != module),
        );
    }
    Ok(graph)
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files.extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    Ok(files)
}

/// `runtime` for `src/runtime/local.rs` and `src/runtime.rs`; `None` for the crate root.
fn top_level_module(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    match first.strip_suffix(".rs") {
        Some("lib" | "main") => None,
        Some(module) => Some(module.to_owned()),
        None => Some(first.to_owned()),
    }
}

/// The first segment of every `crate::` path in `text`, outside line comments:
/// `crate::a::X` and `crate::{a::X, b::{Y, Z}}` name `a` (and `b`).
fn crate_paths(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut named = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            named.extend(group_heads(group));
        } else {
            named.extend(identifier(rest));
        }
    }
    named
}

/// The first identifier of each item of a brace group, `group` starting after its `{`.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut item_start = true;
    for (index, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if item_start && depth == 0 && !c.is_whitespace() => {
                heads.extend(identifier(&group[index..]));
                item_start = false;
            }
            _ => {}
        }
    }
    heads
}

fn identifier(text: &str) -> Option<String> {
    let name: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty() && name != "self").then_some(name)
}

/// A cycle among `nodes` in `graph`, as the path that closes it (`a -> b -> a`), if any.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>, nodes: &[&str]) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        nodes: &[&str],
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|seen| seen == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if nodes.contains(&next.as_str())
                && let Some(cycle) = visit(next, graph, nodes, path, done)
            {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    nodes
        .iter()
        .find_map(|node| visit(node, graph, nodes, &mut Vec::new(), &mut done))
}

#[test]
fn the_layers_import_each_other_without_a_cycle() -> std::io::Result<()> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src)?;
    for layer in LAYERS {
        assert!(graph.contains_key(layer), "no module {layer} under {src:?}");
    }
    assert!(
        graph["runtime"].contains("middleware"),
        "the reading found runtime's imports: {graph:?}"
    );
    if let Some(cycle) = find_cycle(&graph, &LAYERS) {
        panic!("import cycle: {}", cycle.join(" -> "));
    }
    Ok(())
}

#[test]
fn paths_are_read_from_use_lines_groups_and_inline_code_but_not_comments() {
    let text = "use crate::agent::Agent;\n\
                pub(crate) use crate::{control::{Budget, ControlPlane}, tools::Tool,\n    sandbox};\n\
                use crate::{self as me};\n\
                // crate::runtime is only mentioned\n\
                let x = crate::model::call(); // crate::prompt\n";
    let named: Vec<String> = crate_paths(text).into_iter().collect();
    assert_eq!(named, ["agent", "control", "model", "sandbox", "tools"]);
}

#[test]
fn a_cycle_is_found_and_named() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("runtime", vec!["middleware", "tools"]),
        ("middleware", vec!["control"]),
        ("control", vec!["runtime"]),
        ("tools", vec!["sandbox"]),
    ]
    .into_iter()
    .map(|(from, to)| (from.to_owned(), to.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        find_cycle(&graph, &LAYERS),
        Some(
            ["runtime", "middleware", "control", "runtime"]
                .map(str::to_owned)
                .to_vec()
        )
    );
    let mut acyclic = graph;
    acyclic.insert("control".into(), BTreeSet::new());
    assert_eq!(find_cycle(&acyclic, &LAYERS), None);
    let outside: BTreeMap<String, BTreeSet<String>> =
        [("tools".to_owned(), ["thread".to_owned()].into())].into();
    assert_eq!(find_cycle(&outside, &LAYERS), None);
}
