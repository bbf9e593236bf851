//! The Landlock layer, under the namespaces: writes only to the writable paths (and the
//! harmless character devices), reads everywhere except the hidden folders, no signals to and
//! no ptrace of processes outside the sandbox (so no reading the runner's `/proc/<pid>/environ`
//! and its model key), no abstract unix sockets outside it.
//!
//! Landlock only grants, it cannot deny below a grant: hiding `/home` means granting reads on
//! every other entry of `/` instead of on `/`, so `ls /` itself is refused.

use std::io;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    Scope, path_beneath_rules,
};

use super::Confinement;

/// What Landlock enforces on this process now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Enforced {
    /// The ABI in force: what both the kernel and this build know.
    pub abi: i32,
    /// Every requested right is enforced (older kernels enforce only the rights they know).
    pub fully: bool,
}

/// Newest ABI whose rights are requested; older kernels enforce what they know.
const ABI_REQUESTED: ABI = ABI::V7;

/// Character devices programs write to as a matter of course.
const DEVICES: [&str; 4] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// Restricts this process (and everything it starts) as `spec` describes; an error when the
/// kernel enforces nothing. Only the calling thread is restricted (and the threads and
/// processes it starts later): call it while the process has one thread.
pub(super) fn restrict(spec: &Confinement) -> io::Result<Enforced> {
    let abi = ABI_REQUESTED;
    let readable = readable_paths(Path::new("/"), &spec.hidden);
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|ruleset| ruleset.scope(Scope::from_all(abi)))
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| {
            ruleset.add_rules(path_beneath_rules(&readable, AccessFs::from_read(abi)))
        })
        .and_then(|ruleset| {
            ruleset.add_rules(path_beneath_rules(
                spec.writable_paths(),
                AccessFs::from_all(abi),
            ))
        })
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules(DEVICES, AccessFs::from_all(abi))))
        .and_then(|ruleset| ruleset.restrict_self())
        .map_err(io::Error::other)?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => abi_number(effective_abi),
        LandlockStatus::NotEnabled => {
            return Err(io::Error::other(
                "Landlock is built into this kernel but not enabled (the lsm= boot option)",
            ));
        }
        LandlockStatus::NotImplemented => {
            return Err(io::Error::other("this kernel has no Landlock"));
        }
    };
    match status.ruleset {
        RulesetStatus::NotEnforced => {
            Err(io::Error::other("this kernel does not enforce Landlock"))
        }
        RulesetStatus::PartiallyEnforced => Ok(Enforced { abi, fully: false }),
        RulesetStatus::FullyEnforced => Ok(Enforced { abi, fully: true }),
    }
}

/// The ABI's number (`V6` is 6).
fn abi_number(abi: ABI) -> i32 {
    abi as i32
}

/// The entries under `root` that may be read: all of them except the hidden folders, going
/// down into the folders that hold a hidden one. A symlink counts as where it leads and is
/// never gone down into. Sorted. With nothing to hide, `root` itself (so `ls /` works).
fn readable_paths(root: &Path, hidden: &[PathBuf]) -> Vec<PathBuf> {
    let hidden: Vec<PathBuf> = hidden
        .iter()
        .filter_map(|path| path.canonicalize().ok())
        // Hiding the root would hide everything; such a "home" is not one.
        .filter(|path| path.parent().is_some())
        .collect();
    if hidden.is_empty() {
        return vec![root.to_path_buf()];
    }
    let mut readable = Vec::new();
    collect(root, &hidden, &mut readable);
    readable.sort();
    readable
}

fn collect(dir: &Path, hidden: &[PathBuf], readable: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let real = path.canonicalize().unwrap_or_else(|_| path.clone());
        if hidden.iter().any(|h| real.starts_with(h)) {
            continue;
        }
        if hidden.iter().any(|h| h.starts_with(&real)) {
            if real == path {
                collect(&path, hidden, readable);
            }
            continue;
        }
        readable.push(path);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn everything_but_the_hidden_folders_is_readable() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().canonicalize()?;
        for folder in ["usr/bin", "home/alice/.ssh", "home/bob", "opt"] {
            std::fs::create_dir_all(root.join(folder))?;
        }
        std::fs::write(root.join("file"), "x")?;
        symlink(root.join("home/alice"), root.join("alias"))?;
        symlink(root.join("home"), root.join("homes"))?;
        symlink(root.join("usr/bin"), root.join("bin"))?;
        let hidden = [
            root.join("home/alice"),
            root.join("missing"),
            PathBuf::from("/"),
        ];
        assert_eq!(
            readable_paths(&root, &hidden),
            vec![
                root.join("bin"),
                root.join("file"),
                root.join("home/bob"),
                root.join("opt"),
                root.join("usr"),
            ]
        );
        Ok(())
    }

    #[test]
    fn nothing_hidden_grants_the_root_itself() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir_all(dir.path().join("a/b"))?;
        assert_eq!(
            readable_paths(dir.path(), &[]),
            vec![dir.path().to_path_buf()]
        );
        let missing = [dir.path().join("missing")];
        assert_eq!(
            readable_paths(dir.path(), &missing),
            vec![dir.path().to_path_buf()]
        );
        Ok(())
    }
}
