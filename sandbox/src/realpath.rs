//! Where a path really leads once every symlink on the way is followed, even when its tail
//! does not exist yet (a file about to be written, a dangling link).
//!
//! `std::fs::canonicalize` fails on missing paths, so a write target or a dangling symlink
//! could not be checked with it; this walk resolves every existing component (following links
//! with their own `..` segments) and appends the missing rest lexically. Nothing missing can
//! be a symlink, so the lexical tail cannot escape on its own.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Linux gives up after 40 links (ELOOP); so do we.
const MAX_LINKS: usize = 40;

/// The path `path` (absolute) leads to, following symlinks component by component.
pub(crate) fn real_path(path: &Path) -> io::Result<PathBuf> {
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_front_components(&mut pending, path);
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    let mut missing = false;
    while let Some(component) = pending.pop_front() {
        if component == ".." {
            resolved.pop();
            continue;
        }
        let next = resolved.join(&component);
        if missing {
            resolved = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(io::Error::other("too many levels of symbolic links"));
                }
                let target = std::fs::read_link(&next)?;
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                push_front_components(&mut pending, &target);
            }
            Ok(_) => resolved = next,
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                missing = true;
                resolved = next;
            }
            Err(error) => return Err(error),
        }
    }
    Ok(resolved)
}

/// Puts `path`'s components (`..` kept, `.` and the root dropped) in front of `pending`.
fn push_front_components(pending: &mut VecDeque<OsString>, path: &Path) {
    for component in path.components().rev() {
        match component {
            Component::Normal(name) => pending.push_front(name.to_owned()),
            Component::ParentDir => pending.push_front(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn follows_relative_and_absolute_links_and_keeps_missing_tails() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let base = dir.path().canonicalize()?;
        std::fs::create_dir_all(base.join("a/b"))?;
        symlink("a/b", base.join("rel"))?;
        symlink(base.join("a"), base.join("abs"))?;
        symlink("../missing", base.join("a/b/dangling"))?;

        assert_eq!(real_path(&base.join("rel/x/y"))?, base.join("a/b/x/y"));
        assert_eq!(real_path(&base.join("abs/b"))?, base.join("a/b"));
        assert_eq!(
            real_path(&base.join("rel/dangling"))?,
            base.join("a/missing")
        );
        Ok(())
    }

    #[test]
    fn link_loops_are_an_error() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let base = dir.path().canonicalize()?;
        symlink("b", base.join("a"))?;
        symlink("a", base.join("b"))?;
        assert!(real_path(&base.join("a/x")).is_err());
        Ok(())
    }
}
