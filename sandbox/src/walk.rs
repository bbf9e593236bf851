//! Directory walks for `ls`, `glob` and `grep` that stay inside one root.
//!
//! Symlinks are followed (ConfigMap skill mounts are symlink trees) only while their target
//! stays under the root the walk started in; the others are skipped. ConfigMap bookkeeping
//! entries (`..data`, `..2024_...`) and bulky tool directories are never descended into.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use ignore::{DirEntry, WalkBuilder};

use super::realpath::real_path;

/// Directories walks do not enter: version control and dependency caches that would drown
/// the results.
pub(crate) const SKIPPED_DIRS: [&str; 4] = [".git", "node_modules", "__pycache__", ".venv"];

/// Whether a name is ConfigMap bookkeeping (`..data`, `..2024_01_01...`), invisible to tools.
pub(crate) fn is_configmap_internal(name: &OsStr) -> bool {
    name.as_encoded_bytes().starts_with(b"..")
}

/// Whether a walk should enter (or a listing show) the entry at `path`, given the root's
/// real path: ConfigMap internals are hidden and symlinks must stay inside the root.
pub(crate) fn visible(path: &Path, real_root: &Path) -> bool {
    if path.file_name().is_some_and(is_configmap_internal) {
        return false;
    }
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    !is_link || real_path(path).is_ok_and(|real| real.starts_with(real_root))
}

/// A sorted, symlink-following walk of `start` (depth 0 is `start` itself) that never leaves
/// the root whose host directory is `host_root`.
pub(crate) fn walk(start: &Path, host_root: &Path, max_depth: Option<usize>) -> ignore::Walk {
    let real_root: PathBuf = real_path(host_root).unwrap_or_else(|_| host_root.to_path_buf());
    WalkBuilder::new(start)
        .standard_filters(false)
        .follow_links(true)
        .max_depth(max_depth)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry: &DirEntry| {
            if entry.depth() == 0 {
                return true;
            }
            let skipped_dir = entry.file_type().is_some_and(|t| t.is_dir())
                && entry
                    .file_name()
                    .to_str()
                    .is_some_and(|name| SKIPPED_DIRS.contains(&name));
            !skipped_dir && visible(entry.path(), &real_root)
        })
        .build()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn walks_inside_links_skips_escaping_ones_and_internals() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let base = dir.path().canonicalize()?;
        let root = base.join("root");
        std::fs::create_dir_all(root.join("..2024/sub"))?;
        std::fs::write(root.join("..2024/sub/f.txt"), "x")?;
        symlink("..2024", root.join("..data"))?;
        symlink("..data/sub", root.join("sub"))?;
        std::fs::create_dir_all(base.join("outside"))?;
        std::fs::write(base.join("outside/secret"), "x")?;
        symlink("../outside", root.join("escape"))?;
        std::fs::create_dir_all(root.join("node_modules/pkg"))?;

        let found: Vec<String> = walk(&root, &root, None)
            .filter_map(Result::ok)
            .filter_map(|e| {
                e.path()
                    .strip_prefix(&root)
                    .ok()
                    .map(|p| p.display().to_string())
            })
            .collect();
        assert_eq!(found, vec!["", "sub", "sub/f.txt"]);
        Ok(())
    }
}
