//! `ls`: a two-level tree of a directory, capped at 20000 characters.

use std::path::Path;

use super::ToolReply;
use crate::args::LsArgs;
use crate::io_error::io_error;
use crate::paths::{Access, SandboxPaths};
use crate::realpath::real_path;
use crate::truncation::truncate_end;
use crate::walk::{SKIPPED_DIRS, visible};

/// DeerFlow's cap on `ls` output.
pub(crate) const MAX_CHARS: usize = 20_000;
/// Entries listed per directory; a huge directory would otherwise be read in full.
const MAX_ENTRIES_PER_DIR: usize = 1000;

/// Lists `args.path` two levels deep: the directory's entries, and inside each subdirectory
/// its entries, indented. Directories end in `/`.
pub(crate) fn run(paths: &SandboxPaths, args: &LsArgs) -> ToolReply {
    let resolved = match paths.resolve(&args.path, Access::Read) {
        Ok(resolved) => resolved,
        Err(refused) => return ToolReply::error(format!("Error: {refused}")),
    };
    let virtual_path = &resolved.virtual_path;
    match std::fs::metadata(&resolved.host) {
        Ok(metadata) if !metadata.is_dir() => {
            return ToolReply::error(format!(
                "Error: {virtual_path} is a file, not a directory; use read_file"
            ));
        }
        Ok(_) => {}
        Err(failure) => return ToolReply::error(io_error(virtual_path, &failure)),
    }
    let host_root = paths.host_root(resolved.root);
    let real_root = real_path(host_root).unwrap_or_else(|_| host_root.to_path_buf());
    let mut out = String::new();
    let top = match entries(&resolved.host, &real_root) {
        Ok(top) => top,
        Err(failure) => return ToolReply::error(io_error(virtual_path, &failure)),
    };
    if top.names.is_empty() {
        return ToolReply::ok(format!("{virtual_path} is empty"));
    }
    out.push_str(virtual_path);
    out.push_str("/\n");
    render(&mut out, &top, &resolved.host, &real_root, 1);
    let note = format!("[... truncated at {MAX_CHARS} characters; list a subdirectory]");
    ToolReply::ok(truncate_end(out, MAX_CHARS, &note))
}

/// One directory's visible entries.
struct Listing {
    /// (name, is_dir), sorted by name.
    names: Vec<(String, bool)>,
    /// Entries left out past `MAX_ENTRIES_PER_DIR`.
    more: usize,
}

fn entries(dir: &Path, real_root: &Path) -> std::io::Result<Listing> {
    let mut names: Vec<(String, bool)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|entry| visible(&entry.path(), real_root))
        .map(|entry| {
            let is_dir = std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir());
            (entry.file_name().to_string_lossy().into_owned(), is_dir)
        })
        .collect();
    names.sort();
    let more = names.len().saturating_sub(MAX_ENTRIES_PER_DIR);
    names.truncate(MAX_ENTRIES_PER_DIR);
    Ok(Listing { names, more })
}

fn render(out: &mut String, listing: &Listing, dir: &Path, real_root: &Path, depth: usize) {
    let indent = "  ".repeat(depth);
    for (name, is_dir) in &listing.names {
        if out.len() > MAX_CHARS * 4 {
            // Far past the cap already (even at 4 bytes a character): stop reading.
            return;
        }
        out.push_str(&indent);
        out.push_str(name);
        if *is_dir {
            out.push('/');
        }
        out.push('\n');
        if *is_dir && depth < 2 && !SKIPPED_DIRS.contains(&name.as_str()) {
            let child = dir.join(name);
            if let Ok(inner) = entries(&child, real_root) {
                render(out, &inner, &child, real_root, depth + 1);
            }
        }
    }
    if listing.more > 0 {
        out.push_str(&format!("{indent}... and {} more\n", listing.more));
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::paths::SandboxRoots;
    use crate::tools::workspace_with;

    #[test]
    fn lists_two_levels_hides_internals_and_escaping_links() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let base = dir.path().canonicalize()?;
        let roots = SandboxRoots::under(&base);
        let ws = roots.user_data.join("workspace");
        std::fs::create_dir_all(ws.join("src/deep/deeper"))?;
        std::fs::write(ws.join("src/main.rs"), "")?;
        std::fs::write(ws.join("README.md"), "")?;
        std::fs::create_dir_all(ws.join("node_modules/x"))?;
        std::fs::create_dir_all(ws.join("..2024"))?;
        symlink("/etc", ws.join("etc"))?;
        symlink("src", ws.join("code"))?;
        let paths = SandboxPaths::new(&roots)?;
        let reply = run(
            &paths,
            &LsArgs {
                description: String::new(),
                path: "/mnt/user-data/workspace".into(),
            },
        );
        assert!(!reply.is_error);
        assert_eq!(
            reply.content,
            "/mnt/user-data/workspace/\n  README.md\n  code/\n    deep/\n    main.rs\n  \
             node_modules/\n  src/\n    deep/\n    main.rs\n"
        );
        Ok(())
    }

    #[test]
    fn files_and_missing_paths_are_errors() -> std::io::Result<()> {
        let (dir, paths) = workspace_with(&[("a.txt", "")])?;
        let ls = |path: &str| {
            run(
                &paths,
                &LsArgs {
                    description: String::new(),
                    path: path.into(),
                },
            )
        };
        assert!(ls("a.txt").content.contains("is a file"));
        assert_eq!(
            ls("nope").content,
            "Error: /mnt/user-data/workspace/nope does not exist"
        );
        assert_eq!(
            ls("/mnt/user-data/workspace").content,
            "/mnt/user-data/workspace/\n  a.txt\n"
        );
        let roots = SandboxRoots::under(dir.path());
        std::fs::remove_file(roots.user_data.join("workspace/a.txt"))?;
        assert_eq!(
            ls("/mnt/user-data/workspace").content,
            "/mnt/user-data/workspace is empty"
        );
        Ok(())
    }
}
