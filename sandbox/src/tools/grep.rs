//! `grep`: lines matching a regex (or literal text) in a file or under a directory, as
//! `path:line: text`, case-insensitive unless asked, at most 100 by default and 500 at all.
//! Binary files are skipped.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};

use super::ToolReply;
use crate::args::GrepArgs;
use crate::io_error::io_error;
use crate::paths::{Access, ResolvedPath, SandboxPaths};
use crate::truncation::{take_chars, truncate_end};
use crate::walk::walk;

/// Matches when the model does not say.
pub(crate) const DEFAULT_MAX_RESULTS: usize = 100;
/// Matches at most.
pub(crate) const MAX_RESULTS: usize = 500;
/// One matching line is cut to this many characters (minified files have huge lines).
const MAX_LINE_CHARS: usize = 300;
/// The whole output, like `ls`.
const MAX_CHARS: usize = 20_000;

/// Searches `args.path` for `args.pattern`.
pub(crate) fn run(paths: &SandboxPaths, args: &GrepArgs) -> ToolReply {
    let resolved = match paths.resolve(&args.path, Access::Read) {
        Ok(resolved) => resolved,
        Err(refused) => return ToolReply::error(format!("Error: {refused}")),
    };
    let virtual_path = &resolved.virtual_path;
    let is_dir = match std::fs::metadata(&resolved.host) {
        Ok(metadata) => metadata.is_dir(),
        Err(failure) => return ToolReply::error(io_error(virtual_path, &failure)),
    };
    if args.pattern.is_empty() {
        return ToolReply::error("Error: the pattern is empty");
    }
    let matcher = match pattern_matcher(args) {
        Ok(matcher) => matcher,
        Err(reply) => return reply,
    };
    let filter = match glob_filter(args) {
        Ok(filter) => filter,
        Err(reply) => return reply,
    };
    let max = args
        .max_results
        .unwrap_or(DEFAULT_MAX_RESULTS)
        .clamp(1, MAX_RESULTS);
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let mut lines: Vec<String> = Vec::new();
    let mut stopped = false;

    let files = if is_dir {
        files_under(paths, &resolved, filter.as_ref())
    } else {
        vec![(resolved.host.clone(), virtual_path.clone())]
    };
    for (host, shown) in files {
        // Unreadable files are skipped, as grep -s would.
        let _ = searcher.search_path(
            &matcher,
            &host,
            Lossy(|line_number, line| {
                if lines.len() >= max {
                    stopped = true;
                    return Ok(false);
                }
                let text = line.trim_end_matches(['\n', '\r']);
                let cut = take_chars(text, MAX_LINE_CHARS);
                let ellipsis = if cut.len() < text.len() { "…" } else { "" };
                lines.push(format!("{shown}:{line_number}: {cut}{ellipsis}"));
                Ok(true)
            }),
        );
        if stopped {
            break;
        }
    }
    if lines.is_empty() {
        return ToolReply::ok(format!(
            "No matches for '{}' in {virtual_path}",
            args.pattern
        ));
    }
    let mut out = lines.join("\n");
    if stopped {
        out.push_str(&format!(
            "\n[stopped at {max} matches; narrow the pattern, path or glob]"
        ));
    }
    let note = format!("[... truncated at {MAX_CHARS} characters; narrow the search]");
    ToolReply::ok(truncate_end(out, MAX_CHARS, &note))
}

/// The matcher of `args.pattern`; an invalid regex is the reply.
fn pattern_matcher(args: &GrepArgs) -> Result<RegexMatcher, ToolReply> {
    RegexMatcherBuilder::new()
        .case_insensitive(!args.case_sensitive)
        .fixed_strings(args.literal)
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|error| {
            ToolReply::error(format!(
                "Error: invalid regex: {error}. Set literal=true to search for the text as is."
            ))
        })
}

/// The `args.glob` filter, when one is given, and whether it has a `/`; an invalid glob is
/// the reply.
fn glob_filter(args: &GrepArgs) -> Result<Option<(GlobMatcher, bool)>, ToolReply> {
    let Some(glob) = args
        .glob
        .as_deref()
        .map(str::trim)
        .filter(|g| !g.is_empty())
    else {
        return Ok(None);
    };
    match Glob::new(glob) {
        Ok(compiled) => Ok(Some((compiled.compile_matcher(), glob.contains('/')))),
        Err(error) => Err(ToolReply::error(format!(
            "Error: invalid glob '{glob}': {error}"
        ))),
    }
}

/// The files under the directory `resolved` that pass `filter`, each with its host path and
/// the path shown for it.
fn files_under(
    paths: &SandboxPaths,
    resolved: &ResolvedPath,
    filter: Option<&(GlobMatcher, bool)>,
) -> Vec<(PathBuf, String)> {
    walk(&resolved.host, paths.host_root(resolved.root), None)
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
        .filter_map(|entry| {
            let relative = entry
                .path()
                .strip_prefix(&resolved.host)
                .ok()?
                .to_path_buf();
            if !passes(filter, &relative) {
                return None;
            }
            let shown = format!("{}/{}", resolved.virtual_path, relative.to_string_lossy());
            Some((entry.into_path(), shown))
        })
        .collect()
}

/// Whether a file passes the `glob` filter: a glob with a `/` matches the path relative to
/// the searched directory, one without matches the file name anywhere (like `rg -g`).
fn passes(filter: Option<&(GlobMatcher, bool)>, relative: &Path) -> bool {
    match filter {
        None => true,
        Some((matcher, true)) => matcher.is_match(relative),
        Some((matcher, false)) => relative
            .file_name()
            .is_some_and(|name| matcher.is_match(Path::new(name))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::workspace_with;

    fn setup() -> std::io::Result<(tempfile::TempDir, SandboxPaths)> {
        workspace_with(&[
            ("notes.md", "TODO: write tests\nnothing\n"),
            ("src/lib.rs", "fn a() {}\n// todo(x): more\n"),
            ("src/blob.bin", "todo\0\0\0"),
        ])
    }

    fn args(pattern: &str) -> GrepArgs {
        GrepArgs {
            description: String::new(),
            pattern: pattern.into(),
            path: "/mnt/user-data/workspace".into(),
            glob: None,
            literal: false,
            case_sensitive: false,
            max_results: None,
        }
    }

    #[test]
    fn finds_lines_case_insensitively_and_skips_binaries() -> std::io::Result<()> {
        let (_dir, paths) = setup()?;
        assert_eq!(
            run(&paths, &args("todo")).content,
            "/mnt/user-data/workspace/notes.md:1: TODO: write tests\n\
             /mnt/user-data/workspace/src/lib.rs:2: // todo(x): more"
        );
        let exact = GrepArgs {
            case_sensitive: true,
            ..args("TODO")
        };
        assert_eq!(
            run(&paths, &exact).content,
            "/mnt/user-data/workspace/notes.md:1: TODO: write tests"
        );
        Ok(())
    }

    #[test]
    fn literal_glob_single_file_and_limits() -> std::io::Result<()> {
        let (_dir, paths) = setup()?;
        let invalid = run(&paths, &args("todo("));
        assert!(invalid.is_error);
        assert!(invalid.content.contains("literal=true"));
        let literal = GrepArgs {
            literal: true,
            ..args("todo(")
        };
        let globbed = GrepArgs {
            glob: Some("*.md".into()),
            ..args("todo")
        };
        let one_file = GrepArgs {
            path: "src/lib.rs".into(),
            ..args("fn")
        };
        let cases = [
            (
                literal,
                "/mnt/user-data/workspace/src/lib.rs:2: // todo(x): more",
            ),
            (
                globbed,
                "/mnt/user-data/workspace/notes.md:1: TODO: write tests",
            ),
            (one_file, "/mnt/user-data/workspace/src/lib.rs:1: fn a() {}"),
            (
                args("zzz"),
                "No matches for 'zzz' in /mnt/user-data/workspace",
            ),
        ];
        for (case, expected) in cases {
            assert_eq!(run(&paths, &case).content, expected, "{}", case.pattern);
        }
        let capped = GrepArgs {
            max_results: Some(1),
            ..args("todo")
        };
        assert!(
            run(&paths, &capped)
                .content
                .ends_with("[stopped at 1 matches; narrow the pattern, path or glob]")
        );
        Ok(())
    }
}
