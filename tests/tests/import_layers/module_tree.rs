//! A crate's module tree as the compiler builds it: from `src/lib.rs`, following each `mod`
//! item to its file (`x.rs` or `x/mod.rs`) or into its braces, with every path each module
//! names and the names its `use` items bind. Paths are read from the syntax tree (`syn`), so
//! comments, strings and doc text never count, brace groups and renames are what the compiler
//! sees, and `super::` inside an inline `mod tests` means the file's module. Paths inside
//! macro calls (`assert!`, `matches!`...) are token streams to `syn`; they are read from the
//! tokens.
//!
//! Code that exists only in test builds (`#[cfg(test)]` items and modules) is left out: a test
//! may reach anywhere in its crate, and test doubles fake what lies below them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::Visit;

/// A module's path below the crate root: `[]` is the root, `["sandbox", "host"]` is
/// `crate::sandbox::host`.
pub type ModulePath = Vec<String>;

/// A path as a module writes it (`super::paths::WORKSPACE`), where it does.
#[derive(Clone, Debug)]
pub struct Written {
    pub segments: Vec<String>,
    pub line: usize,
}

/// One module of the tree.
#[derive(Debug, Default)]
pub struct Module {
    /// The file it is written in, relative to the crate's folder.
    pub file: PathBuf,
    /// Its child modules.
    pub children: BTreeSet<String>,
    /// The names its `use` items bind, to the path each names as written (`use a::b as c`
    /// binds `c` to `a::b`).
    pub uses: BTreeMap<String, Vec<String>>,
    /// The paths of its glob imports (`use super::*`), as written.
    pub globs: Vec<Vec<String>>,
    /// Every path it names.
    pub named: Vec<Written>,
}

/// Every module of one crate.
#[derive(Debug, Default)]
pub struct ModuleTree {
    pub modules: BTreeMap<ModulePath, Module>,
}

/// Bindings are followed at most this deep: a `use` that leads back to itself ends there.
const MAX_HOPS: usize = 16;

impl ModuleTree {
    /// The tree of the crate in `dir` (a folder holding `src/lib.rs`).
    pub fn read(dir: &Path) -> Result<Self, String> {
        let mut tree = ModuleTree::default();
        let root = dir.join("src/lib.rs");
        tree.read_file(dir, &root, Vec::new(), &dir.join("src"))?;
        Ok(tree)
    }

    /// Reads `file`, the module `path`, whose `mod x;` items live in `children_dir`.
    fn read_file(
        &mut self,
        crate_dir: &Path,
        file: &Path,
        path: ModulePath,
        children_dir: &Path,
    ) -> Result<(), String> {
        let text = std::fs::read_to_string(file)
            .map_err(|error| format!("cannot read {}: {error}", file.display()))?;
        let parsed = syn::parse_file(&text)
            .map_err(|error| format!("cannot parse {}: {error}", file.display()))?;
        let relative = file.strip_prefix(crate_dir).unwrap_or(file).to_path_buf();
        self.read_items(crate_dir, &relative, &parsed.items, path, children_dir)
    }

    fn read_items(
        &mut self,
        crate_dir: &Path,
        file: &Path,
        items: &[syn::Item],
        path: ModulePath,
        children_dir: &Path,
    ) -> Result<(), String> {
        let mut module = Module {
            file: file.to_path_buf(),
            ..Module::default()
        };
        let mut nested = Vec::new();
        for item in items.iter().filter(|item| !only_in_tests(item_attrs(item))) {
            match item {
                syn::Item::Mod(declared) => {
                    let name = declared.ident.to_string();
                    module.children.insert(name.clone());
                    nested.push((declared, name));
                }
                syn::Item::Use(used) => {
                    for (segments, binding) in flatten_use(&used.tree) {
                        let line = used.use_token.span.start().line;
                        match binding {
                            Binding::Name(name) => {
                                module.uses.insert(name, segments.clone());
                            }
                            Binding::Glob => module.globs.push(segments.clone()),
                            Binding::Nothing => {}
                        }
                        module.named.push(Written { segments, line });
                    }
                }
                other => {
                    let mut collector = PathCollector::default();
                    collector.visit_item(other);
                    module.named.extend(collector.named);
                }
            }
        }
        self.modules.insert(path.clone(), module);
        for (declared, name) in nested {
            if declared
                .attrs
                .iter()
                .any(|attr| attr.path().is_ident("path"))
            {
                return Err(format!(
                    "{}: `#[path] mod {name}` is not followed by this reader",
                    file.display()
                ));
            }
            let mut child = path.clone();
            child.push(name.clone());
            let child_dir = children_dir.join(&name);
            match &declared.content {
                Some((_, items)) => {
                    self.read_items(crate_dir, file, items, child, &child_dir)?;
                }
                None => {
                    let flat = children_dir.join(format!("{name}.rs"));
                    let folder = child_dir.join("mod.rs");
                    let source = if flat.is_file() { flat } else { folder };
                    self.read_file(crate_dir, &source, child, &child_dir)?;
                }
            }
        }
        Ok(())
    }

    /// The module `written`, named in the module `from`, leads into (the module itself for
    /// `crate::a::b`, the module holding the item for `crate::a::Item`), following `use`
    /// bindings and re-exports; `None` for paths outside the crate (std, other crates, local
    /// names).
    pub fn target(&self, from: &ModulePath, written: &[String]) -> Option<ModulePath> {
        let absolute = self.absolute(from, written, 0)?;
        self.deepest_module(&absolute, 0)
    }

    /// `written` as a path from the crate root.
    fn absolute(&self, from: &ModulePath, written: &[String], hops: usize) -> Option<Vec<String>> {
        if hops > MAX_HOPS {
            return None;
        }
        let (first, rest) = written.split_first()?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some([from.as_slice(), rest].concat()),
            "super" => {
                let ups = written.iter().take_while(|s| *s == "super").count();
                let base = from.len().checked_sub(ups)?;
                Some([&from[..base], &written[ups..]].concat())
            }
            _ => {
                let module = self.modules.get(from)?;
                if module.children.contains(first) {
                    return Some([from.as_slice(), written].concat());
                }
                if let Some(bound) = module.uses.get(first) {
                    let base = self.absolute(from, bound, hops + 1)?;
                    return Some([base.as_slice(), rest].concat());
                }
                module.globs.iter().find_map(|glob| {
                    let source = self.absolute(from, glob, hops + 1)?;
                    let source_module = self.modules.get(&source)?;
                    (source_module.children.contains(first)
                        || source_module.uses.contains_key(first))
                    .then(|| self.absolute(&source, written, hops + 1))
                    .flatten()
                })
            }
        }
    }

    /// The deepest module along `absolute`, going through the `use` bindings of the modules
    /// on the way (`crate::sandbox::SandboxHost` is in `sandbox::host` when `sandbox`
    /// re-exports it from there).
    fn deepest_module(&self, absolute: &[String], hops: usize) -> Option<ModulePath> {
        if hops > MAX_HOPS {
            return None;
        }
        let mut current: ModulePath = Vec::new();
        for (index, segment) in absolute.iter().enumerate() {
            let module = self.modules.get(&current)?;
            if module.children.contains(segment) {
                current.push(segment.clone());
                continue;
            }
            let rest = &absolute[index + 1..];
            let through_use = module
                .uses
                .get(segment)
                .and_then(|bound| self.absolute(&current, bound, hops + 1))
                .map(|base| [base.as_slice(), rest].concat());
            return match through_use {
                Some(followed) => self.deepest_module(&followed, hops + 1),
                None => Some(current),
            };
        }
        Some(current)
    }
}

/// What one path of a `use` item binds.
enum Binding {
    Name(String),
    Glob,
    /// `use a::B as _`.
    Nothing,
}

/// Every path of a `use` tree, with what it binds: `use a::{b::{self, C}, d as e, f::*}`
/// names `a::b` (binding `b`), `a::b::C`, `a::d` (binding `e`) and `a::f` (a glob).
fn flatten_use(tree: &syn::UseTree) -> Vec<(Vec<String>, Binding)> {
    fn walk(prefix: &[String], tree: &syn::UseTree, out: &mut Vec<(Vec<String>, Binding)>) {
        let named = |ident: &syn::Ident| -> (Vec<String>, Option<String>) {
            if ident == "self" {
                (prefix.to_vec(), prefix.last().cloned())
            } else {
                (
                    [prefix, &[ident.to_string()]].concat(),
                    Some(ident.to_string()),
                )
            }
        };
        match tree {
            syn::UseTree::Path(path) => {
                walk(
                    &[prefix, &[path.ident.to_string()]].concat(),
                    &path.tree,
                    out,
                );
            }
            syn::UseTree::Name(name) => {
                let (segments, bound) = named(&name.ident);
                out.push((segments, bound.map_or(Binding::Nothing, Binding::Name)));
            }
            syn::UseTree::Rename(rename) => {
                let (segments, _) = named(&rename.ident);
                let binding = if rename.rename == "_" {
                    Binding::Nothing
                } else {
                    Binding::Name(rename.rename.to_string())
                };
                out.push((segments, binding));
            }
            syn::UseTree::Glob(_) => out.push((prefix.to_vec(), Binding::Glob)),
            syn::UseTree::Group(group) => {
                for item in &group.items {
                    walk(prefix, item, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&[], tree, &mut out);
    out
}

/// The paths of everything but `mod` and module-level `use` items: types, expressions,
/// patterns, attributes, `use` items inside functions, and the paths inside macro calls.
#[derive(Default)]
struct PathCollector {
    named: Vec<Written>,
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !only_in_tests(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(item) => &item.attrs,
            syn::ImplItem::Fn(item) => &item.attrs,
            syn::ImplItem::Type(item) => &item.attrs,
            syn::ImplItem::Macro(item) => &item.attrs,
            _ => return syn::visit::visit_impl_item(self, item),
        };
        if !only_in_tests(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_stmt(&mut self, stmt: &'ast syn::Stmt) {
        let test_only = match stmt {
            syn::Stmt::Local(local) => only_in_tests(&local.attrs),
            syn::Stmt::Macro(mac) => only_in_tests(&mac.attrs),
            _ => false,
        };
        if !test_only {
            syn::visit::visit_stmt(self, stmt);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = path
                .segments
                .first()
                .map_or(0, |segment| segment.ident.span().start().line);
            self.named.push(Written { segments, line });
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, used: &'ast syn::ItemUse) {
        let line = used.use_token.span.start().line;
        for (segments, _) in flatten_use(&used.tree) {
            self.named.push(Written { segments, line });
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.named.extend(macro_paths(mac.tokens.clone()));
        syn::visit::visit_macro(self, mac);
    }
}

/// The paths in a macro call's tokens: `crate::a::b`, `super::x`, `self::y`, and `a::b`
/// sequences of two names or more (names in scope are resolved like any other path).
pub fn macro_paths(tokens: TokenStream) -> Vec<Written> {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut found = Vec::new();
    let mut index = 0;
    while index < trees.len() {
        match &trees[index] {
            TokenTree::Group(group) => {
                found.extend(macro_paths(group.stream()));
                index += 1;
            }
            TokenTree::Ident(first) if !follows_path_separator(&trees, index) => {
                let mut segments = vec![first.to_string()];
                let mut next = index + 1;
                while let (Some(TokenTree::Ident(name)), true) =
                    (trees.get(next + 2), is_path_separator(&trees, next))
                {
                    segments.push(name.to_string());
                    next += 3;
                }
                let prefixed = matches!(segments[0].as_str(), "crate" | "super" | "self");
                if segments.len() > 1 || prefixed {
                    found.push(Written {
                        segments,
                        line: first.span().start().line,
                    });
                }
                index = next;
            }
            _ => index += 1,
        }
    }
    found
}

/// Whether `::` starts at `index`.
fn is_path_separator(trees: &[TokenTree], index: usize) -> bool {
    matches!(
        (trees.get(index), trees.get(index + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

/// Whether the name at `index` comes after `::` (the tail of a path, read with its head).
fn follows_path_separator(trees: &[TokenTree], index: usize) -> bool {
    index >= 2 && is_path_separator(trees, index - 2)
}

/// The attributes of an item.
fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(item) => &item.attrs,
        syn::Item::Enum(item) => &item.attrs,
        syn::Item::ExternCrate(item) => &item.attrs,
        syn::Item::Fn(item) => &item.attrs,
        syn::Item::ForeignMod(item) => &item.attrs,
        syn::Item::Impl(item) => &item.attrs,
        syn::Item::Macro(item) => &item.attrs,
        syn::Item::Mod(item) => &item.attrs,
        syn::Item::Static(item) => &item.attrs,
        syn::Item::Struct(item) => &item.attrs,
        syn::Item::Trait(item) => &item.attrs,
        syn::Item::TraitAlias(item) => &item.attrs,
        syn::Item::Type(item) => &item.attrs,
        syn::Item::Union(item) => &item.attrs,
        syn::Item::Use(item) => &item.attrs,
        _ => &[],
    }
}

/// Whether `attrs` hold a `cfg` that is false outside test builds (`cfg(test)`,
/// `cfg(all(test, unix))`), whatever the other settings (`cfg(any(test, feature = "x"))`
/// may hold in a build without tests).
pub fn only_in_tests(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident("cfg"))
        .filter_map(|attr| attr.parse_args::<syn::Meta>().ok())
        .any(|predicate| outside_tests(&predicate) == Some(false))
}

/// A `cfg` predicate's value in a build without tests: `None` where it depends on other
/// settings (features, the target).
fn outside_tests(predicate: &syn::Meta) -> Option<bool> {
    match predicate {
        syn::Meta::Path(path) if path.is_ident("test") => Some(false),
        syn::Meta::List(list) => {
            let operands: Vec<Option<bool>> = list
                .parse_args_with(
                    syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
                )
                .ok()?
                .iter()
                .map(outside_tests)
                .collect();
            if list.path.is_ident("not") {
                operands.first().copied().flatten().map(|value| !value)
            } else if list.path.is_ident("all") {
                if operands.contains(&Some(false)) {
                    Some(false)
                } else if operands.iter().all(|value| *value == Some(true)) {
                    Some(true)
                } else {
                    None
                }
            } else if list.path.is_ident("any") {
                if operands.contains(&Some(true)) {
                    Some(true)
                } else if operands.iter().all(|value| *value == Some(false)) {
                    Some(false)
                } else {
                    None
                }
            } else {
                None
            }
        }
        _ => None,
    }
}
