//! `glob`: paths under a directory matching a glob (`*` stays within a folder, `**` crosses
//! folders), sorted, at most 200 by default and 1000 at all.

use globset::GlobBuilder;

use super::ToolReply;
use crate::args::GlobArgs;
use crate::io_error::io_error;
use crate::paths::{Access, SandboxPaths};
use crate::walk::walk;

/// Results when the model does not say.
pub(crate) const DEFAULT_MAX_RESULTS: usize = 200;
/// Results at most.
pub(crate) const MAX_RESULTS: usize = 1000;

/// Finds paths under `args.path` matching `args.pattern`.
pub(crate) fn run(paths: &SandboxPaths, args: &GlobArgs) -> ToolReply {
    let resolved = match paths.resolve(&args.path, Access::Read) {
        Ok(resolved) => resolved,
        Err(refused) => return ToolReply::error(format!("Error: {refused}")),
    };
    let virtual_dir = &resolved.virtual_path;
    match std::fs::metadata(&resolved.host) {
        Ok(metadata) if !metadata.is_dir() => {
            return ToolReply::error(format!("Error: {virtual_dir} is not a directory"));
        }
        Ok(_) => {}
        Err(failure) => return ToolReply::error(io_error(virtual_dir, &failure)),
    }
    let pattern = match relative_pattern(args.pattern.trim(), virtual_dir) {
        Ok(pattern) => pattern,
        Err(message) => return ToolReply::error(message),
    };
    let matcher = match GlobBuilder::new(pattern).literal_separator(true).build() {
        Ok(glob) => glob.compile_matcher(),
        Err(error) => {
            return ToolReply::error(format!("Error: invalid glob '{pattern}': {error}"));
        }
    };
    let max = args
        .max_results
        .unwrap_or(DEFAULT_MAX_RESULTS)
        .clamp(1, MAX_RESULTS);
    let mut found = Vec::new();
    let mut total = 0usize;
    let host_root = paths.host_root(resolved.root);
    for entry in walk(&resolved.host, host_root, None).filter_map(Result::ok) {
        if entry.depth() == 0 {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if is_dir && !args.include_dirs {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(&resolved.host) else {
            continue;
        };
        if !matcher.is_match(relative) {
            continue;
        }
        total += 1;
        if found.len() < max {
            let suffix = if is_dir { "/" } else { "" };
            found.push(format!(
                "{virtual_dir}/{}{suffix}",
                relative.to_string_lossy()
            ));
        }
    }
    if found.is_empty() {
        return ToolReply::ok(format!("No paths match '{pattern}' under {virtual_dir}"));
    }
    let mut out = found.join("\n");
    if total > found.len() {
        out.push_str(&format!(
            "\n[showing the first {} of {total} matches; narrow the pattern or path]",
            found.len()
        ));
    }
    ToolReply::ok(out)
}

/// The pattern relative to the searched directory; an absolute pattern is accepted when it
/// starts with that directory.
fn relative_pattern<'a>(pattern: &'a str, virtual_dir: &str) -> Result<&'a str, String> {
    if pattern.is_empty() {
        return Err("Error: the pattern is empty".to_owned());
    }
    if !pattern.starts_with('/') {
        return Ok(pattern);
    }
    pattern
        .strip_prefix(virtual_dir)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|rest| !rest.is_empty())
        .ok_or_else(|| {
            format!("Error: the pattern must be relative to path ({virtual_dir}), e.g. '**/*.py'")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::workspace_with;

    fn setup() -> std::io::Result<(tempfile::TempDir, SandboxPaths)> {
        workspace_with(&[
            ("a.py", ""),
            ("src/b.py", ""),
            ("src/util/c.py", ""),
            ("src/util/d.txt", ""),
            (".git/e.py", ""),
        ])
    }

    fn glob(paths: &SandboxPaths, pattern: &str, dirs: bool, max: Option<usize>) -> String {
        run(
            paths,
            &GlobArgs {
                description: String::new(),
                pattern: pattern.into(),
                path: "/mnt/user-data/workspace".into(),
                include_dirs: dirs,
                max_results: max,
            },
        )
        .content
    }

    #[test]
    fn star_stays_in_a_folder_and_double_star_crosses() -> std::io::Result<()> {
        let (_dir, paths) = setup()?;
        assert_eq!(
            glob(&paths, "*.py", false, None),
            "/mnt/user-data/workspace/a.py"
        );
        assert_eq!(
            glob(&paths, "**/*.py", false, None),
            "/mnt/user-data/workspace/a.py\n/mnt/user-data/workspace/src/b.py\n\
             /mnt/user-data/workspace/src/util/c.py"
        );
        assert_eq!(
            glob(&paths, "/mnt/user-data/workspace/src/*", true, None),
            "/mnt/user-data/workspace/src/b.py\n/mnt/user-data/workspace/src/util/"
        );
        Ok(())
    }

    #[test]
    fn results_are_capped_and_empty_results_said() -> std::io::Result<()> {
        let (_dir, paths) = setup()?;
        assert_eq!(
            glob(&paths, "**/*", false, Some(1)),
            "/mnt/user-data/workspace/a.py\n[showing the first 1 of 4 matches; narrow the \
             pattern or path]"
        );
        assert_eq!(
            glob(&paths, "*.rs", false, None),
            "No paths match '*.rs' under /mnt/user-data/workspace"
        );
        assert!(glob(&paths, "/etc/*", false, None).contains("must be relative"));
        assert!(glob(&paths, "a[", false, None).starts_with("Error: invalid glob"));
        Ok(())
    }
}
