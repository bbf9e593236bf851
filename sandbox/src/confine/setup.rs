//! The confinement steps, in the order they must happen. Runs in a single-threaded process
//! (`unshare(CLONE_NEWUSER)` refuses any other).

use std::io;
use std::path::Path;

use nix::sched::{CloneFlags, unshare};
use rustix::process::{Pid, Signal, getgid, getppid, getuid, set_parent_process_death_signal};
use rustix::thread::{
    CapabilitiesSecureBits, CapabilitySet, CapabilitySets, clear_ambient_capability_set,
    set_capabilities, set_capabilities_secure_bits,
};

use super::{Confinement, landlock_rules, mounts};

/// A confinement step failed; the process is left half-confined and must exit.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct ConfineError {
    step: &'static str,
    source: io::Error,
}

impl ConfineError {
    pub(super) fn new(step: &'static str, source: io::Error) -> Self {
        ConfineError { step, source }
    }
}

pub(super) trait Step<T> {
    fn step(self, step: &'static str) -> Result<T, ConfineError>;
}

impl<T, E: Into<io::Error>> Step<T> for Result<T, E> {
    fn step(self, step: &'static str) -> Result<T, ConfineError> {
        self.map_err(|error| ConfineError::new(step, error.into()))
    }
}

/// Confines this process as `spec` describes; what Landlock enforces.
pub(super) fn confine(spec: &Confinement) -> Result<landlock_rules::Enforced, ConfineError> {
    let parent = getppid();
    if !spec.namespaces {
        // Landlock alone: the host's own tree, paths mapped by the sandbox; no capability to
        // drop (an unprivileged process holds none, and Landlock sets no_new_privs).
        std::env::set_current_dir(&spec.cwd)
            .map_err(|e| mounts::with_path(e, &spec.cwd))
            .step("entering the working directory")?;
        die_with(parent)?;
        return landlock_rules::restrict(spec).step("restricting with Landlock");
    }
    unshare_as_self(CloneFlags::empty())?;
    mounts::make_private().step("making mounts private")?;
    let trees = spec
        .binds
        .iter()
        .map(|bind| {
            mounts::clone_tree(&bind.source).map_err(|e| mounts::with_path(e, &bind.source))
        })
        .collect::<Result<Vec<_>, _>>()
        .step("opening a folder to bind")?;
    mounts::read_only_everywhere().step("remounting the host read-only")?;
    for tmpfs in &spec.tmpfs {
        mounts::mount_tmpfs(&tmpfs.path, tmpfs.writable)
            .map_err(|e| mounts::with_path(e, &tmpfs.path))
            .step("mounting a tmpfs")?;
    }
    for (bind, tree) in spec.binds.iter().zip(&trees) {
        std::fs::create_dir_all(&bind.target)
            .and_then(|()| mounts::attach(tree, &bind.target))
            .map_err(|e| mounts::with_path(e, &bind.target))
            .step("binding a folder")?;
        if !bind.writable {
            read_only(&bind.target)?;
        }
    }
    for tmpfs in spec.tmpfs.iter().filter(|tmpfs| !tmpfs.writable) {
        read_only(&tmpfs.path)?;
    }
    std::env::set_current_dir(&spec.cwd)
        .map_err(|e| mounts::with_path(e, &spec.cwd))
        .step("entering the working directory")?;

    // The sandbox never outlives the run that started it.
    die_with(parent)?;
    let enforced = landlock_rules::restrict(spec).step("restricting with Landlock")?;
    drop_capabilities().step("dropping capabilities")?;
    Ok(enforced)
}

/// Moves this process into a new user namespace (and the namespaces `more` names, owned by
/// it) holding every capability there. The same ids inside as outside: files keep their
/// owners, and a non-root user holds no capability once it runs a program.
pub(super) fn unshare_as_self(more: CloneFlags) -> Result<(), ConfineError> {
    let uid = getuid().as_raw();
    let gid = getgid().as_raw();
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | more)
        .map_err(io::Error::from)
        .step("creating a user and mount namespace")?;
    write_proc("/proc/self/setgroups", "deny").step("denying setgroups")?;
    write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1")).step("writing uid_map")?;
    write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1")).step("writing gid_map")?;
    Ok(())
}

/// Makes the kernel kill this process when `parent` (its parent when it started) exits, and
/// fails when that already happened.
pub(super) fn die_with(parent: Option<Pid>) -> Result<(), ConfineError> {
    set_parent_process_death_signal(Some(Signal::KILL)).step("setting the parent-death signal")?;
    if getppid() != parent {
        return Err(ConfineError::new(
            "starting",
            io::Error::other("the parent process exited"),
        ));
    }
    Ok(())
}

pub(super) fn read_only(path: &Path) -> Result<(), ConfineError> {
    mounts::remount_read_only(path)
        .map_err(|e| mounts::with_path(e, path))
        .step("remounting read-only")
}

fn write_proc(path: &str, content: &str) -> io::Result<()> {
    match std::fs::write(path, content) {
        // Kernels before 3.19 have no setgroups file and need no denial.
        Err(error) if error.kind() == io::ErrorKind::NotFound && path.ends_with("setgroups") => {
            Ok(())
        }
        other => other,
    }
}

/// Gives up every capability held in the new namespace, for good: uid 0 inside (when the
/// runner runs as root) gains none when it runs a program, so nothing the model starts can
/// remount what was made read-only.
pub(super) fn drop_capabilities() -> io::Result<()> {
    set_capabilities_secure_bits(
        CapabilitiesSecureBits::NO_ROOT
            | CapabilitiesSecureBits::NO_ROOT_LOCKED
            | CapabilitiesSecureBits::NO_SETUID_FIXUP
            | CapabilitiesSecureBits::NO_SETUID_FIXUP_LOCKED
            | CapabilitiesSecureBits::KEEP_CAPS_LOCKED
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE,
    )?;
    clear_ambient_capability_set()?;
    set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )?;
    Ok(())
}
