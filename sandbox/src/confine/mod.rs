//! Confinement: a `herd-runner` process that sees the machine the way a Run's `sandbox`
//! container does. In its own user and mount namespace the host is read-only, a few host
//! folders are bound at their pod paths (`/mnt/user-data`, `/mnt/skills`), `/tmp` is private,
//! and Landlock is a second layer (writes only where the description allows them, no reads of
//! the host's home, no signals or ptrace out of the sandbox).
//!
//! A [`Confinement`] describes the view; [`Confinement::command`] builds the command that
//! starts a confined `herd-runner`. The child confines itself in [`enter_if_requested`],
//! which `main` calls before it builds the tokio runtime: `unshare(CLONE_NEWUSER)` refuses a
//! multi-threaded process. [`probe`] runs the whole setup in a throw-away child, because a
//! working `unshare` proves little (AppArmor on Ubuntu ≥ 23.10 lets it succeed and then
//! denies `mount`).
//!
//! Without user namespaces (in a container, where seccomp refuses `unshare`), Landlock can
//! still be applied alone ([`Confinement::landlock_only`]): `herd-runner run --sandbox
//! landlock`, and a Pod's `sandbox` container, which restricts itself in
//! [`restrict_pod_sandbox`]. Either way the sandbox says which layers it holds
//! ([`layers`]), in its `hello` answer.
//!
//! [`ContainerRoot`] is the other view: a container of a Pod, for the e2e suite's kubelet.

mod container;
mod landlock_rules;
pub(crate) mod layers;
mod mountinfo;
mod mounts;
mod probe;
mod setup;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use herd_crds::report::SandboxLayer;
use serde::{Deserialize, Serialize};

pub use container::{ContainerRoot, ProcView, Symlink, init_container, join_container};
pub(crate) use probe::probe;
pub use setup::ConfineError;

/// The environment variable that carries the description to the child (JSON).
pub(crate) const CONFINE_ENV: &str = "HERD_CONFINE";

/// Exit code of a child that could not confine itself (EX_OSERR).
pub(crate) const EXIT_CONFINE_FAILED: u8 = 71;

/// Variables a confined child keeps from its parent; everything else (model keys, tokens,
/// host paths in `TMPDIR`...) stays out.
const KEPT_VARS: [&str; 6] = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HERD_LOG"];

/// A fresh, empty tmpfs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Tmpfs {
    /// Where it is mounted (an existing folder of the host tree, or one inside an earlier
    /// tmpfs).
    pub path: PathBuf,
    /// Writable, or read-only once the binds under it are in place.
    pub writable: bool,
}

/// A host folder made visible inside.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Bind {
    /// The host folder.
    pub source: PathBuf,
    /// Where it appears; created when missing, which only works inside a tmpfs (the host
    /// tree is read-only).
    pub target: PathBuf,
    /// Writable (also for Landlock), or read-only.
    pub writable: bool,
}

/// What a confined process sees.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Confinement {
    /// In private user and mount namespaces (with the tmpfs mounts and binds below); without
    /// them, Landlock alone over the host's own tree.
    #[serde(default = "yes")]
    pub namespaces: bool,
    /// Mounted first, in order, over the read-only host tree.
    pub tmpfs: Vec<Tmpfs>,
    /// Bound after the tmpfs mounts, in order.
    pub binds: Vec<Bind>,
    /// Host folders Landlock keeps unreadable (missing ones are skipped).
    pub hidden: Vec<PathBuf>,
    /// More folders Landlock lets be written, besides the writable tmpfs mounts and binds
    /// (Landlock alone has neither).
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// The working directory inside.
    pub cwd: PathBuf,
    /// Check the confinement and exit instead of running the command.
    #[serde(default)]
    pub probe: bool,
}

fn yes() -> bool {
    true
}

impl Confinement {
    /// The view of a Run's `sandbox` container: `user_data` at `/mnt/user-data`, `skills` at
    /// `/mnt/skills` (read-only), a private `/tmp`, the host's home hidden.
    pub(crate) fn sandbox_container(user_data: &Path, skills: &Path) -> Self {
        Confinement {
            tmpfs: vec![
                Tmpfs {
                    path: "/mnt".into(),
                    writable: false,
                },
                Tmpfs {
                    path: "/tmp".into(),
                    writable: true,
                },
            ],
            binds: vec![
                Bind {
                    source: user_data.to_path_buf(),
                    target: "/mnt/user-data".into(),
                    writable: true,
                },
                Bind {
                    source: skills.to_path_buf(),
                    target: "/mnt/skills".into(),
                    writable: false,
                },
            ],
            hidden: host_homes(),
            writable: Vec::new(),
            namespaces: true,
            cwd: "/mnt/user-data".into(),
            probe: false,
        }
    }

    /// Landlock alone: the host's tree as it is, readable everywhere (home folders too:
    /// hiding them would hide the work folder and the tools installed there), writable only
    /// in `writable` (the first is the working directory).
    pub(crate) fn landlock_only(writable: Vec<PathBuf>) -> Self {
        Confinement {
            namespaces: false,
            tmpfs: Vec::new(),
            binds: Vec::new(),
            hidden: Vec::new(),
            cwd: writable.first().cloned().unwrap_or_else(|| "/".into()),
            writable,
            probe: false,
        }
    }

    /// Where writes are allowed inside: the writable tmpfs mounts and binds, and `writable`.
    pub(crate) fn writable_paths(&self) -> Vec<&Path> {
        let tmpfs = self.tmpfs.iter().filter(|t| t.writable).map(|t| &*t.path);
        let binds = self.binds.iter().filter(|b| b.writable).map(|b| &*b.target);
        let more = self.writable.iter().map(PathBuf::as_path);
        tmpfs.chain(binds).chain(more).collect()
    }

    /// A command running `exe` (a `herd-runner` binary) confined as described, with an
    /// environment cut down to the locale, `PATH` and `HOME=/tmp`. Add the subcommand and
    /// its arguments; the child confines itself before it parses them.
    pub(crate) fn command(&self, exe: &Path) -> Result<std::process::Command, serde_json::Error> {
        let mut command = std::process::Command::new(exe);
        command
            .env_clear()
            .envs(
                KEPT_VARS
                    .iter()
                    .filter_map(|var| Some((var, std::env::var_os(var)?))),
            )
            .env("HOME", "/tmp")
            .env(CONFINE_ENV, serde_json::to_string(self)?);
        Ok(command)
    }
}

/// The host's home folders: `/home`, `/root` and `$HOME`.
fn host_homes() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = vec!["/home".into(), "/root".into()];
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from)
        && home.is_absolute()
        && !homes.contains(&home)
    {
        homes.push(home);
    }
    homes
}

/// What `main` does after [`enter_if_requested`].
#[derive(Debug)]
pub enum Entry {
    /// Not a confined child (no layers), or confined now with these layers: go on with the
    /// command line.
    Continue(Vec<SandboxLayer>),
    /// A probe finished or confinement failed: exit with this code.
    Exit(ExitCode),
}

/// Confines this process when its parent asked for it (the description in
/// [`CONFINE_ENV`]). Call it first thing in `main`, while the process has a single thread.
pub fn enter_if_requested() -> Entry {
    let Some(raw) = std::env::var_os(CONFINE_ENV) else {
        return Entry::Continue(Vec::new());
    };
    match enter(raw) {
        Ok(Some(layers)) => Entry::Continue(layers),
        Ok(None) => Entry::Exit(ExitCode::SUCCESS),
        Err(error) => {
            eprintln!("error: cannot confine the sandbox: {error}");
            Entry::Exit(ExitCode::from(EXIT_CONFINE_FAILED))
        }
    }
}

/// Confines this process: its layers, or `None` when it was a probe that passed.
fn enter(raw: OsString) -> Result<Option<Vec<SandboxLayer>>, ConfineError> {
    let spec: Confinement = serde_json::from_slice(raw.as_encoded_bytes())
        .map_err(|error| ConfineError::new("reading the description", error.into()))?;
    let enforced = setup::confine(&spec)?;
    if spec.probe {
        probe::check(&spec)?;
        return Ok(None);
    }
    Ok(Some(vec![
        layers::namespaces(&spec),
        layers::landlock(&Ok(enforced), &spec),
    ]))
}

/// Restricts a Pod's `sandbox` container process with Landlock, best effort: writes only to
/// `writable` (the workspace and the temp folder), reads everywhere. Call it while the
/// process has a single thread, after binding the socket (whose folder stays unwritable).
/// Never fails: where the kernel has no Landlock the sandbox runs on without it, as the
/// returned layers (and the log) say, beside what the container itself holds.
pub(crate) fn restrict_pod_sandbox(writable: Vec<PathBuf>) -> Vec<SandboxLayer> {
    // Before Landlock, which sets no_new_privs itself.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let spec = Confinement::landlock_only(writable);
    let enforced = landlock_rules::restrict(&spec).map_err(|error| error.to_string());
    if let Err(why) = &enforced {
        // The log is not set up yet: straight to the container's log.
        eprintln!("warning: the tools run without Landlock: {why}");
    }
    let mut layers = vec![
        layers::landlock(&enforced, &spec),
        layers::namespaces_in_a_pod(),
    ];
    layers.extend(layers::process(&status));
    layers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_container_view_writes_only_to_user_data_and_tmp() {
        let spec = Confinement::sandbox_container(Path::new("/w/user-data"), Path::new("/w/s"));
        assert_eq!(
            spec.writable_paths(),
            vec![Path::new("/tmp"), Path::new("/mnt/user-data")]
        );
        assert!(spec.hidden.contains(&PathBuf::from("/home")));
        assert!(spec.hidden.contains(&PathBuf::from("/root")));
    }

    #[test]
    fn the_command_carries_the_description_and_no_secrets() -> anyhow::Result<()> {
        let spec = Confinement::sandbox_container(Path::new("/w/user-data"), Path::new("/w/s"));
        let command = spec.command(Path::new("/bin/herd-runner"))?;
        let envs: std::collections::BTreeMap<_, _> = command
            .get_envs()
            .filter_map(|(key, value)| Some((key.to_str()?, value?.to_str()?)))
            .collect();
        assert_eq!(envs.get("HOME"), Some(&"/tmp"));
        let carried: Confinement = serde_json::from_str(envs.get(CONFINE_ENV).unwrap_or(&""))?;
        assert_eq!(carried, spec);
        assert!(
            envs.keys()
                .all(|key| KEPT_VARS.contains(key) || ["HOME", CONFINE_ENV].contains(key))
        );
        Ok(())
    }
}
