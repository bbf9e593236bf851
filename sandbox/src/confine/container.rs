//! A container's view of the machine, for a process that plays the container runtime (the
//! e2e suite's `local-kubelet`): a fresh tmpfs as `/`, the host's system folders (`/usr`,
//! `/etc`...) bound read-only at their own paths, and the Pod's volumes and files bound where
//! the Pod mounts them. Nothing else of the host can be reached.
//!
//! Three processes take part. The *entry* ([`ContainerRoot::enter`]) creates the user, mount
//! and PID namespaces and builds the root; it stays outside the new PID namespace, and its
//! first child is the container's *init*, which calls [`init_container`] (a `/proc` of its
//! own, no capability left) and then runs the container's command as PID 1: when it exits,
//! the kernel kills everything else in the container. An *exec* (a probe) calls
//! [`join_container`] to enter a running container's namespaces.

use std::io;
use std::os::unix::fs::{DirBuilderExt, symlink};
use std::path::{Component, Path, PathBuf};

use nix::sched::{CloneFlags, setns};
use rustix::process::getppid;
use rustix::thread::{CapabilitySet, capabilities, configure_capability_in_ambient_set};
use serde::{Deserialize, Serialize};

use super::mounts;
use super::setup::{self, ConfineError, Step};
use super::{Bind, Tmpfs};

/// A symlink created inside the root.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Symlink {
    /// Where it is, inside the root.
    pub path: PathBuf,
    /// What it points to, kept as written.
    pub target: PathBuf,
}

/// What a container sees; every path but `staging` and the bind sources is inside the new
/// root.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ContainerRoot {
    /// An empty host folder the root's tmpfs is mounted on (only the container sees it).
    pub staging: PathBuf,
    /// Host paths shown read-only at the same place: a folder is bound with what is mounted
    /// under it; a symlink (`/bin -> usr/bin` on a merged-`/usr` system) is copied as one;
    /// a missing path is skipped.
    pub system: Vec<PathBuf>,
    /// Fresh tmpfs mounts (`/dev`, `/dev/shm`), made before the binds.
    pub tmpfs: Vec<Tmpfs>,
    /// Host folders and files bound inside, in order (parents first). A file is bound onto
    /// an empty file created for it.
    pub binds: Vec<Bind>,
    /// Symlinks made last (`/dev/fd -> /proc/self/fd`).
    pub symlinks: Vec<Symlink>,
    /// Whether `/` stays writable (`readOnlyRootFilesystem: false`).
    pub writable: bool,
    /// The working directory.
    pub cwd: PathBuf,
}

impl ContainerRoot {
    /// Makes this process the container's entry. Call it while the process has a single
    /// thread, and create no thread afterwards (the kernel refuses threads in a process whose
    /// children go to another PID namespace). The next child it starts is the container's
    /// init; it gets `CAP_SYS_ADMIN` and `CAP_SETPCAP` as ambient capabilities so that it can
    /// mount its `/proc` and then give up every capability
    /// (a user other than root loses every capability when it runs a program).
    // Over 80 lines: the steps' order is the confinement (open every source before the new
    // root hides it, mount, make read-only, pivot, then drop capabilities), so it reads as one
    // sequence.
    pub fn enter(&self) -> Result<(), ConfineError> {
        let parent = getppid();
        for path in self.inner_paths() {
            check_inner(path)?;
        }
        setup::unshare_as_self(CloneFlags::CLONE_NEWPID)?;
        mounts::make_private().step("making mounts private")?;
        let system = self
            .system
            .iter()
            .filter_map(|path| match std::fs::symlink_metadata(path) {
                Err(error) if error.kind() == io::ErrorKind::NotFound => None,
                Err(error) => Some(Err(mounts::with_path(error, path))),
                Ok(meta) if meta.file_type().is_symlink() => Some(
                    std::fs::read_link(path)
                        .map(|target| (path, SystemPath::Link(target)))
                        .map_err(|e| mounts::with_path(e, path)),
                ),
                Ok(_) => Some(
                    mounts::clone_tree(path)
                        .map(|tree| (path, SystemPath::Tree(tree)))
                        .map_err(|e| mounts::with_path(e, path)),
                ),
            })
            .collect::<Result<Vec<_>, _>>()
            .step("opening a system folder")?;
        let binds = self
            .binds
            .iter()
            .map(|bind| {
                let is_dir = std::fs::metadata(&bind.source)?.is_dir();
                Ok((bind, mounts::clone_tree(&bind.source)?, is_dir))
            })
            .collect::<io::Result<Vec<_>>>()
            .step("opening a volume to bind")?;

        let root = &self.staging;
        mounts::mount_tmpfs(root, false)
            .map_err(|e| mounts::with_path(e, root))
            .step("mounting the root")?;
        for (path, what) in &system {
            let inside = inner(root, path);
            match what {
                SystemPath::Link(target) => symlink(target, &inside)
                    .map_err(|e| mounts::with_path(e, &inside))
                    .step("copying a system symlink")?,
                SystemPath::Tree(tree) => {
                    std::fs::create_dir_all(&inside)
                        .and_then(|()| mounts::attach(tree, &inside))
                        .and_then(|()| mounts::read_only_tree(&inside))
                        .map_err(|e| mounts::with_path(e, &inside))
                        .step("binding a system folder")?;
                }
            }
        }
        std::fs::DirBuilder::new()
            .mode(0o1777)
            .create(inner(root, Path::new("/tmp")))
            .or_else(|error| match error.kind() {
                io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(error),
            })
            .step("creating /tmp")?;
        for tmpfs in &self.tmpfs {
            let inside = inner(root, &tmpfs.path);
            std::fs::create_dir_all(&inside)
                .and_then(|()| mounts::mount_tmpfs(&inside, tmpfs.writable))
                .map_err(|e| mounts::with_path(e, &inside))
                .step("mounting a tmpfs")?;
        }
        for (bind, tree, is_dir) in &binds {
            let inside = inner(root, &bind.target);
            mount_point(&inside, *is_dir)
                .and_then(|()| mounts::attach(tree, &inside))
                .map_err(|e| mounts::with_path(e, &inside))
                .step("binding a volume")?;
            if !bind.writable {
                mounts::read_only_tree(&inside).step("remounting a volume read-only")?;
            }
        }
        for link in &self.symlinks {
            let inside = inner(root, &link.path);
            symlink(&link.target, &inside)
                .map_err(|e| mounts::with_path(e, &inside))
                .step("creating a symlink")?;
        }
        // A runtime creates a missing working directory, as runc does (through the mounts).
        let cwd = inner(root, &self.cwd);
        std::fs::create_dir_all(&cwd)
            .map_err(|e| mounts::with_path(e, &cwd))
            .step("creating the working directory")?;
        for tmpfs in self.tmpfs.iter().filter(|tmpfs| !tmpfs.writable) {
            setup::read_only(&inner(root, &tmpfs.path))?;
        }
        if !self.writable {
            setup::read_only(root)?;
        }
        mounts::pivot_into(root).step("entering the root")?;
        std::env::set_current_dir(&self.cwd)
            .map_err(|e| mounts::with_path(e, &self.cwd))
            .step("entering the working directory")?;
        // The container never outlives the runtime that started it.
        setup::die_with(parent)?;
        pass_init_capabilities().step("passing capabilities to the init")?;
        Ok(())
    }

    fn inner_paths(&self) -> impl Iterator<Item = &Path> {
        let cwd = (self.cwd != Path::new("/")).then_some(&*self.cwd);
        let tmpfs = self.tmpfs.iter().map(|t| &*t.path);
        let binds = self.binds.iter().map(|b| &*b.target);
        let links = self.symlinks.iter().map(|l| &*l.path);
        self.system
            .iter()
            .map(PathBuf::as_path)
            .chain(tmpfs)
            .chain(binds)
            .chain(links)
            .chain(cwd)
    }
}

enum SystemPath {
    Link(PathBuf),
    Tree(std::os::fd::OwnedFd),
}

/// Paths inside the root are absolute and never go up: they are joined under the staging
/// folder while the host tree is still there.
fn check_inner(path: &Path) -> Result<(), ConfineError> {
    let mut components = path.components();
    let absolute = components.next() == Some(Component::RootDir);
    if absolute && components.all(|c| matches!(c, Component::Normal(_))) && path != Path::new("/") {
        return Ok(());
    }
    Err(ConfineError::new(
        "checking the paths",
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} must be absolute, below / and without `..`",
                path.display()
            ),
        ),
    ))
}

fn inner(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// An empty folder, or an empty file for a file, to mount onto.
fn mount_point(path: &Path, is_dir: bool) -> io::Result<()> {
    if is_dir {
        return std::fs::create_dir_all(path);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
}

/// What the init needs until it has set up: `CAP_SYS_ADMIN` to mount its `/proc`, and
/// `CAP_SETPCAP` to lock the secure bits as it gives up every capability.
const INIT_CAPABILITIES: [CapabilitySet; 2] = [CapabilitySet::SYS_ADMIN, CapabilitySet::SETPCAP];

/// The init's capabilities in the inheritable and ambient sets, so the next program keeps
/// them.
fn pass_init_capabilities() -> io::Result<()> {
    let mut sets = capabilities(None)?;
    for capability in INIT_CAPABILITIES {
        sets.inheritable |= capability;
    }
    rustix::thread::set_capabilities(None, sets)?;
    for capability in INIT_CAPABILITIES {
        configure_capability_in_ambient_set(capability, true)?;
    }
    Ok(())
}

/// What the init found for `/proc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcView {
    /// A `/proc` of the container's PID namespace: only its own processes show.
    Own,
    /// The kernel refused a fresh `/proc` (it does where the host's is partly hidden, as in
    /// many containers): the host's stays, bound by the entry.
    Host,
}

/// In the container's init, before it runs the command: a `/proc` of the container's PID
/// namespace over the host's, then no capability left, for good.
pub fn init_container() -> Result<ProcView, ConfineError> {
    let view = match mounts::mount_proc(Path::new("/proc")) {
        Ok(()) => ProcView::Own,
        Err(_) => ProcView::Host,
    };
    setup::drop_capabilities().step("dropping capabilities")?;
    Ok(view)
}

/// Enters the namespaces of the running container whose entry process is `entry` (its user
/// and mount namespaces; the children of this process start in its PID namespace), moves to
/// `cwd` there and gives up every capability. Call it while the process has a single thread.
pub fn join_container(entry: u32, cwd: &Path) -> Result<(), ConfineError> {
    let ns = Path::new("/proc").join(entry.to_string()).join("ns");
    let open = |name: &str| {
        std::fs::File::open(ns.join(name)).map_err(|e| mounts::with_path(e, &ns.join(name)))
    };
    let user = open("user").step("opening the container's namespaces")?;
    let mount = open("mnt").step("opening the container's namespaces")?;
    let pid = open("pid_for_children").step("opening the container's namespaces")?;
    setns(user, CloneFlags::CLONE_NEWUSER)
        .map_err(io::Error::from)
        .step("entering the user namespace")?;
    setns(mount, CloneFlags::CLONE_NEWNS)
        .map_err(io::Error::from)
        .step("entering the mount namespace")?;
    setns(pid, CloneFlags::CLONE_NEWPID)
        .map_err(io::Error::from)
        .step("entering the PID namespace")?;
    std::env::set_current_dir(cwd)
        .map_err(|e| mounts::with_path(e, cwd))
        .step("entering the working directory")?;
    setup::drop_capabilities().step("dropping capabilities")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_paths_are_absolute_and_never_go_up() {
        for good in ["/dev/null", "/mnt/user-data", "/var/run/secrets/herd.dev"] {
            assert!(check_inner(Path::new(good)).is_ok(), "{good}");
        }
        for bad in ["/", "relative", "/mnt/../etc", "", "/a/../../b"] {
            assert!(check_inner(Path::new(bad)).is_err(), "{bad}");
        }
        assert_eq!(
            inner(Path::new("/stage"), Path::new("/mnt/x")),
            PathBuf::from("/stage/mnt/x")
        );
    }
}
