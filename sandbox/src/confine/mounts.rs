//! The mount operations of confinement, each one syscall through rustix. They only work in
//! a mount namespace this process owns (after `unshare`).

use std::ffi::CStr;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{CWD, StatVfsMountFlags, statvfs};
use rustix::io::Errno;
use rustix::mount::{
    MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags, UnmountFlags, mount,
    mount_change, mount_remount, move_mount, open_tree, unmount,
};
use rustix::process::pivot_root;

use super::mountinfo::mount_points;

/// Stops mounts made here from propagating back to the host (and the host's into here).
pub(super) fn make_private() -> io::Result<()> {
    mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )?;
    Ok(())
}

/// A detached copy of the mounts at `source` (submounts included: a copy without them would
/// uncover what they hide, which the kernel refuses in a user namespace). Taken before the
/// tmpfs mounts, so a source under `/tmp` or `/mnt` is still reachable.
pub(super) fn clone_tree(source: &Path) -> io::Result<OwnedFd> {
    let flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_RECURSIVE;
    Ok(open_tree(CWD, source, flags)?)
}

/// Attaches a copy made by [`clone_tree`] at `target`.
pub(super) fn attach(tree: &OwnedFd, target: &Path) -> io::Result<()> {
    move_mount(
        tree,
        "",
        CWD,
        target,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )?;
    Ok(())
}

/// Mounts an empty tmpfs at `path`: world-writable with the sticky bit like any `/tmp` when
/// `writable`, else 0755.
pub(super) fn mount_tmpfs(path: &Path, writable: bool) -> io::Result<()> {
    let options: &CStr = if writable { c"mode=1777" } else { c"mode=0755" };
    mount(
        "tmpfs",
        path,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        options,
    )?;
    Ok(())
}

/// Makes the mount at `path` read-only. `nosuid`, `nodev` and `noexec` are repeated because
/// in a user namespace a remount that would drop them is refused; the atime mode is left
/// out, which keeps it.
pub(super) fn remount_read_only(path: &Path) -> io::Result<()> {
    let current = statvfs(path)?.f_flag;
    let mut flags = MountFlags::BIND | MountFlags::RDONLY;
    for (has, keep) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
    ] {
        if current.contains(has) {
            flags |= keep;
        }
    }
    mount_remount(path, flags, "")?;
    Ok(())
}

/// Makes every mount of this namespace read-only. A mount that cannot be reached (hidden
/// under another one, or in a folder this user may not enter) is skipped: nothing can write
/// through it either.
pub(super) fn read_only_everywhere() -> io::Result<()> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    for point in mount_points(&info) {
        match remount_read_only(&point) {
            Ok(()) => {}
            Err(error) if unreachable(&error) => {}
            Err(error) => return Err(with_path(error, &point)),
        }
    }
    Ok(())
}

/// Makes the mount at `path` and every mount under it read-only: a bound folder keeps what
/// the host mounted inside it (a container's `/etc/hosts`...), which must not stay writable.
pub(super) fn read_only_tree(path: &Path) -> io::Result<()> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    remount_read_only(path).map_err(|error| with_path(error, path))?;
    for point in mount_points(&info) {
        if point == path || !point.starts_with(path) {
            continue;
        }
        match remount_read_only(&point) {
            Ok(()) => {}
            Err(error) if unreachable(&error) => {}
            Err(error) => return Err(with_path(error, &point)),
        }
    }
    Ok(())
}

/// Makes the mount at `root` this process's `/` and lets go of the old root (with everything
/// mounted under it), so nothing outside `root` can be reached any more.
pub(super) fn pivot_into(root: &Path) -> io::Result<()> {
    std::env::set_current_dir(root)?;
    // The old root goes on top of the new one, then away: no folder for it is needed.
    pivot_root(".", ".")?;
    unmount(".", UnmountFlags::DETACH)?;
    std::env::set_current_dir("/")
}

/// Mounts a `proc` of this process's PID namespace at `path`.
pub(super) fn mount_proc(path: &Path) -> io::Result<()> {
    mount(
        "proc",
        path,
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        c"",
    )?;
    Ok(())
}

fn unreachable(error: &io::Error) -> bool {
    [
        Errno::NOENT,
        Errno::ACCESS,
        Errno::NOTDIR,
        Errno::LOOP,
        Errno::STALE,
        // The path now leads into a mount made over this one, not to its root.
        Errno::INVAL,
    ]
    .iter()
    .any(|errno| error.raw_os_error() == Some(errno.raw_os_error()))
}

/// The error with the path it concerns.
pub(super) fn with_path(error: io::Error, path: &Path) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}
