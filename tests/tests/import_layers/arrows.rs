//! Imports between sibling modules. Each path a module names that leads into another module of
//! the crate is one arrow, drawn between the ancestors of the two that are siblings:
//! `runtime::local` naming `sandbox::host::SandboxHost` is the arrow `runtime -> sandbox`
//! among the crate's top-level modules, `sandbox::host` naming `sandbox::tools::bash` is
//! `host -> tools` among the modules of `sandbox/`. A module naming one of its own ancestors
//! or descendants draws no arrow: a parent declares its children, and children use what their
//! parent defines.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::PathBuf;

use crate::module_tree::{ModulePath, ModuleTree};

/// One import between sibling modules, with the path that makes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrow {
    /// The module whose children it joins (`[]`: the crate's top level).
    pub parent: ModulePath,
    pub from: String,
    pub to: String,
    /// The module that names the path (`from` or one of its descendants).
    pub source: ModulePath,
    /// The module the path leads into (`to` or one of its descendants).
    pub target: ModulePath,
    pub file: PathBuf,
    pub line: usize,
}

impl fmt::Display for Arrow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} -> {} ({}:{}: {} names {})",
            self.from,
            self.to,
            self.file.display(),
            self.line,
            module_name(&self.source),
            module_name(&self.target)
        )
    }
}

/// `crate::a::b`, or `crate` for the root.
pub fn module_name(path: &[String]) -> String {
    ["crate"]
        .into_iter()
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("::")
}

/// The folder of a parent module, as a person finds it: `src/` or `src/sandbox/`.
pub fn folder_name(parent: &[String]) -> String {
    parent
        .iter()
        .fold("src/".to_owned(), |folder, name| format!("{folder}{name}/"))
}

/// Every arrow of the crate, one per path that makes one.
pub fn arrows(tree: &ModuleTree) -> Vec<Arrow> {
    let mut arrows = Vec::new();
    for (source, module) in &tree.modules {
        for written in &module.named {
            let Some(target) = tree.target(source, &written.segments) else {
                continue;
            };
            let common = source
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            let (Some(from), Some(to)) = (source.get(common), target.get(common)) else {
                continue;
            };
            arrows.push(Arrow {
                parent: source[..common].to_vec(),
                from: from.clone(),
                to: to.clone(),
                source: source.clone(),
                target: target.clone(),
                file: module.file.clone(),
                line: written.line,
            });
        }
    }
    arrows
}

/// The import cycles among siblings, one message each: the modules of each strongly connected
/// group, one cycle through them, and a path that makes each of its arrows.
pub fn cycles(arrows: &[Arrow]) -> Vec<String> {
    let mut by_parent: BTreeMap<&ModulePath, Vec<&Arrow>> = BTreeMap::new();
    for arrow in arrows {
        by_parent.entry(&arrow.parent).or_default().push(arrow);
    }
    let mut found = Vec::new();
    for (parent, arrows) in by_parent {
        let mut graph: BTreeMap<&str, BTreeMap<&str, &Arrow>> = BTreeMap::new();
        for arrow in arrows {
            graph.entry(&arrow.to).or_default();
            graph
                .entry(&arrow.from)
                .or_default()
                .entry(&arrow.to)
                .or_insert(arrow);
        }
        for group in strongly_connected(&graph) {
            if group.len() < 2 {
                continue;
            }
            let cycle = shortest_cycle(&graph, &group);
            let hops: Vec<String> = cycle
                .windows(2)
                .map(|pair| format!("    {}", graph[pair[0]][pair[1]]))
                .collect();
            found.push(format!(
                "in {}: {{{}}} import each other: {}\n{}",
                folder_name(parent),
                group.iter().copied().collect::<Vec<_>>().join(", "),
                cycle.join(" -> "),
                hops.join("\n")
            ));
        }
    }
    found
}

/// Tarjan's strongly connected components of `graph`.
fn strongly_connected<'a>(
    graph: &BTreeMap<&'a str, BTreeMap<&'a str, &Arrow>>,
) -> Vec<BTreeSet<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        groups: Vec<BTreeSet<&'a str>>,
    }
    fn visit<'a>(
        node: &'a str,
        graph: &BTreeMap<&'a str, BTreeMap<&'a str, &Arrow>>,
        state: &mut State<'a>,
    ) {
        let index = state.index.len();
        state.index.insert(node, index);
        state.low.insert(node, index);
        state.stack.push(node);
        state.on_stack.insert(node);
        for &next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            if !state.index.contains_key(next) {
                visit(next, graph, state);
                let low = state.low[node].min(state.low[next]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(next) {
                let low = state.low[node].min(state.index[next]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut group = BTreeSet::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                group.insert(member);
                if member == node {
                    break;
                }
            }
            state.groups.push(group);
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        groups: Vec::new(),
    };
    for &node in graph.keys() {
        if !state.index.contains_key(node) {
            visit(node, graph, &mut state);
        }
    }
    state.groups
}

/// A shortest cycle through the first module of `group` (a strongly connected group, so
/// there is one), as the path that closes it: `a -> b -> a`.
fn shortest_cycle<'a>(
    graph: &BTreeMap<&'a str, BTreeMap<&'a str, &Arrow>>,
    group: &BTreeSet<&'a str>,
) -> Vec<&'a str> {
    let Some(&start) = group.first() else {
        return Vec::new();
    };
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            if !group.contains(next) {
                continue;
            }
            if next == start {
                let mut cycle = vec![start, node];
                let mut at = node;
                while let Some(&before) = came_from.get(at) {
                    cycle.push(before);
                    at = before;
                }
                cycle.push(start);
                cycle.dedup();
                // Built backwards from the closing arrow.
                cycle.reverse();
                return cycle;
            }
            if next != start && !came_from.contains_key(next) {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    vec![start]
}
