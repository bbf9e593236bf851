//! `local-kubelet`'s container runtime on this machine, without a cluster: a container built
//! from a Pod's container sees only its root (the host's system folders read-only, a small
//! `/dev`) and the volumes bound into it; its exit code and termination message come back;
//! SIGTERM reaches its PID 1; an exec runs inside it. Where this machine cannot create the
//! namespaces, the tests say so and skip; with `CI=true` they fail instead.

#![cfg(target_os = "linux")]
// Test helpers outside #[test] functions: a failure to set up must fail the test loudly.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use herd_e2e::kubelet::container_view::{HostFiles, VolumeDir, container_root};
use herd_e2e::kubelet::runtime::container::{
    ContainerDir, ExecOutcome, Exit, Request, Running, StartError, exec, start,
};
use herd_e2e::kubelet::runtime::spec::ContainerSpec;
use k8s_openapi::api::core::v1::Container;
use serde_json::json;
use tokio::sync::mpsc;

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_local-kubelet"))
}

/// The user an unprivileged run switches to.
const NOBODY: u32 = 65534;

/// A Pod's worth of host folders: a writable `shared` volume, a read-only `config` one; and
/// the program that runs containers (`local-kubelet`, or a wrapper running a copy of it as
/// [`NOBODY`]).
struct Host {
    dir: tempfile::TempDir,
    exe: PathBuf,
    /// Files the container writes are made writable for it (it may not be their owner).
    shared_files: bool,
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::Builder::new()
            .prefix("herd-kubelet-runtime-")
            .tempdir()
            .expect("a scratch folder");
        Host::with(dir, exe().to_path_buf(), false)
    }

    /// Containers started as [`NOBODY`] from a copy of the binary, in folders everyone may
    /// enter; `None` (after saying why) where users cannot be switched.
    fn unprivileged() -> Option<Host> {
        if !rustix::process::geteuid().is_root() {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED the uid {NOBODY} container test: it needs root to switch users"
            );
            return None;
        }
        if std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_err()
        {
            skip("setpriv (util-linux) is not installed");
            return None;
        }
        // Outside /tmp, whose folder here only its owner may enter.
        let dir = tempfile::Builder::new()
            .prefix("herd-kubelet-runtime-")
            .tempdir_in("/var/tmp")
            .expect("a scratch folder");
        let copy = dir.path().join("local-kubelet");
        std::fs::copy(exe(), &copy).expect("a copy of the binary");
        let wrapper = dir.path().join("as-nobody");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups {} \"$@\"\n",
                copy.display()
            ),
        )
        .expect("the wrapper");
        for (path, mode) in [(dir.path(), 0o755), (&*copy, 0o755), (&*wrapper, 0o755)] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        wait_until_runnable(&copy);
        let host = Host::with(dir, wrapper, true);
        for folder in ["volumes", "volumes/config"] {
            std::fs::set_permissions(
                host.dir.path().join(folder),
                std::fs::Permissions::from_mode(0o755),
            )
            .expect("chmod");
        }
        std::fs::set_permissions(
            host.volume("shared"),
            std::fs::Permissions::from_mode(0o777),
        )
        .expect("chmod");
        Some(host)
    }

    fn with(dir: tempfile::TempDir, exe: PathBuf, shared_files: bool) -> Host {
        let host = Host {
            dir,
            exe,
            shared_files,
        };
        std::fs::create_dir_all(host.volume("shared")).expect("shared volume");
        std::fs::create_dir_all(host.volume("config")).expect("config volume");
        std::fs::write(host.volume("config").join("key"), "value\n").expect("config file");
        host
    }

    fn volume(&self, name: &str) -> PathBuf {
        self.dir.path().join("volumes").join(name)
    }

    fn volumes(&self) -> BTreeMap<String, VolumeDir> {
        [("shared", true), ("config", false)]
            .into_iter()
            .map(|(name, writable)| {
                (
                    name.to_owned(),
                    VolumeDir {
                        path: self.volume(name),
                        writable,
                    },
                )
            })
            .collect()
    }

    /// Starts `script` under `/bin/sh -c` in a container of this Pod; `None` (after saying
    /// why) when this machine cannot run containers.
    async fn start(&self, name: &str, script: &str) -> Option<(Running, ContainerDir)> {
        let container: Container = serde_json::from_value(json!({
            "name": name,
            "workingDir": "/work",
            "securityContext": {"readOnlyRootFilesystem": true},
            "volumeMounts": [
                {"name": "shared", "mountPath": "/mnt/shared"},
                {"name": "config", "mountPath": "/mnt/config"}
            ]
        }))
        .expect("a container");
        let dir = ContainerDir::create(self.dir.path().join("containers").join(name))
            .expect("the container's folder");
        if self.shared_files {
            for folder in [self.dir.path().join("containers"), dir.dir.clone()] {
                std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o755))
                    .expect("chmod");
            }
            std::fs::set_permissions(&dir.termination_log, std::fs::Permissions::from_mode(0o666))
                .expect("chmod");
        }
        let root = container_root(
            &container,
            &self.volumes(),
            &HostFiles {
                staging: &dir.staging,
                termination_log: &dir.termination_log,
            },
        )
        .expect("a view");
        let spec = ContainerSpec {
            root,
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        };
        let env = [("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
        match start(&self.exe, &spec, &env, &dir, name).await {
            Ok(running) => Some((running, dir)),
            Err(StartError(why)) => {
                skip(&why);
                None
            }
        }
    }
}

/// Waits until `binary` can be run: a thread that forked while it was being copied holds it
/// open for writing until its child runs a program, and running it meanwhile fails with
/// ETXTBSY ("Text file busy").
fn wait_until_runnable(binary: &Path) {
    for _ in 0..100 {
        match std::process::Command::new(binary)
            .arg("--help")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
        {
            Err(error) if error.raw_os_error() == Some(26) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => return,
        }
    }
}

/// Says why a test did not run, where the person running the tests sees it.
fn skip(reason: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "containers must start in CI, but {reason}"
    );
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED container runtime test: {reason} (CI=true makes this a failure)"
    );
}

/// The names in `/` a container sees: the host's system paths that exist, `/dev`, `/tmp`,
/// the working directory and the mount points' parents.
fn expected_root() -> BTreeSet<String> {
    let system = [
        "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc",
    ];
    system
        .into_iter()
        .filter(|name| Path::new("/").join(name).symlink_metadata().is_ok())
        .chain(["dev", "tmp", "work", "mnt"])
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_container_sees_only_its_root_and_its_volumes() {
    sees_only_its_root_and_its_volumes(&Host::new(), "0").await;
}

#[tokio::test]
async fn a_container_of_an_unprivileged_user_sees_the_same() {
    if let Some(host) = Host::unprivileged() {
        sees_only_its_root_and_its_volumes(&host, &NOBODY.to_string()).await;
    }
}

#[tokio::test]
async fn an_exec_runs_inside_the_running_container() {
    exec_runs_inside(&Host::new()).await;
}

#[tokio::test]
async fn an_exec_runs_inside_an_unprivileged_users_container() {
    if let Some(host) = Host::unprivileged() {
        exec_runs_inside(&host).await;
    }
}

/// Runs the view check in a container of `host`, whose processes run as user `uid` (the
/// user that started them).
async fn sees_only_its_root_and_its_volumes(host: &Host, uid: &str) {
    let outside = host.dir.path().display().to_string();
    let script = format!(
        r#"
        echo "root: $(ls -A / | tr '\n' ' ')"
        echo "pid: $$"
        echo "uid: $(id -u)"
        echo "cwd: $(pwd)"
        echo "config: $(cat /mnt/config/key)"
        echo written > /mnt/shared/out && echo "shared: writable"
        for path in /mnt/config/new /usr/new /new /etc/new; do
          if touch "$path" 2>/dev/null; then echo "WRITABLE $path"; fi
        done
        if [ -e "{outside}" ]; then echo "HOST VISIBLE"; fi
        echo "devices: $(ls /dev | tr '\n' ' ')"
        echo "null: $(echo gone > /dev/null && echo ok)"
        printf 'the end' > /dev/termination-log
        exit 3
        "#
    );
    let Some((mut running, dir)) = host.start("view", &script).await else {
        return;
    };
    let exit = running.wait().await;
    let output = std::fs::read_to_string(&dir.log).expect("the log");
    assert_eq!(
        exit,
        Exit {
            code: 3,
            signal: None
        },
        "{output}"
    );
    let line = |prefix: &str| {
        output
            .lines()
            .find_map(|line| line.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {output}"))
            .trim()
            .to_owned()
    };
    let root: BTreeSet<String> = line("root: ")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(root, expected_root(), "{output}");
    assert_eq!(
        line("pid: "),
        "1",
        "the command is PID 1 of its own namespace"
    );
    assert_eq!(line("uid: "), uid, "the same user inside as outside");
    assert_eq!(line("cwd: "), "/work", "the working directory was created");
    assert_eq!(line("config: "), "value");
    assert_eq!(line("shared: "), "writable");
    assert_eq!(line("null: "), "ok");
    assert!(
        !output.contains("WRITABLE") && !output.contains("HOST VISIBLE"),
        "{output}"
    );
    let devices: BTreeSet<&str> = output
        .lines()
        .find_map(|l| l.strip_prefix("devices: "))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    for device in ["null", "zero", "urandom", "shm", "fd", "termination-log"] {
        assert!(devices.contains(device), "{device} in {devices:?}");
    }
    assert_eq!(
        std::fs::read_to_string(host.volume("shared").join("out")).expect("written"),
        "written\n"
    );
    assert_eq!(
        std::fs::read_to_string(&dir.termination_log).expect("the message"),
        "the end"
    );
}

#[tokio::test]
async fn sigterm_reaches_pid_1_and_a_kill_ends_a_container_that_ignores_it() {
    let host = Host::new();
    // PID 1 gets only the signals it handles: this one traps SIGTERM.
    let Some((graceful, _)) = host
        .start(
            "graceful",
            "trap 'echo stopping; exit 143' TERM; echo up > /mnt/shared/graceful; \
             while true; do sleep 0.1; done",
        )
        .await
    else {
        return;
    };
    let Some((stubborn, _)) = host
        .start("stubborn", "while true; do sleep 0.1; done")
        .await
    else {
        return;
    };
    let (graceful_tx, graceful_rx) = mpsc::unbounded_channel();
    let (stubborn_tx, stubborn_rx) = mpsc::unbounded_channel();
    let graceful = tokio::spawn(graceful.serve(graceful_rx));
    let stubborn = tokio::spawn(stubborn.serve(stubborn_rx));
    for _ in 0..100 {
        if host.volume("shared").join("graceful").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    graceful_tx.send(Request::Terminate).expect("serving");
    stubborn_tx.send(Request::Terminate).expect("serving");
    let exit = tokio::time::timeout(Duration::from_secs(10), graceful)
        .await
        .expect("the graceful container stops on SIGTERM")
        .expect("joined");
    assert_eq!(exit.code, 143);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !stubborn.is_finished(),
        "SIGTERM to a PID 1 without a handler does nothing"
    );
    stubborn_tx.send(Request::Kill).expect("serving");
    let exit = tokio::time::timeout(Duration::from_secs(10), stubborn)
        .await
        .expect("killed")
        .expect("joined");
    assert_eq!(
        exit,
        Exit {
            code: 137,
            signal: Some(9)
        }
    );
}

async fn exec_runs_inside(host: &Host) {
    let Some((running, _)) = host
        .start(
            "target",
            "echo inside > /tmp/marker 2>/dev/null || echo inside > /dev/shm/marker; \
             while true; do sleep 0.1; done",
        )
        .await
    else {
        return;
    };
    let entry = running.pid();
    let (tx, rx) = mpsc::unbounded_channel();
    let served = tokio::spawn(running.serve(rx));
    let env = [("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
    let argv = |script: &str| vec!["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned()];
    let mut seen = None;
    for _ in 0..50 {
        let outcome = exec(
            &host.exe,
            entry,
            Path::new("/work"),
            &env,
            &argv("cat /dev/shm/marker && pwd && ls /mnt"),
            Duration::from_secs(5),
        )
        .await;
        if matches!(&outcome, ExecOutcome::Exited(0, _)) {
            seen = Some(outcome);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen,
        Some(ExecOutcome::Exited(
            0,
            "inside\n/work\nconfig\nshared\n".to_owned()
        ))
    );
    let failed = exec(
        &host.exe,
        entry,
        Path::new("/"),
        &env,
        &argv("exit 7"),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(failed, ExecOutcome::Exited(7, String::new()));
    let slow = exec(
        &host.exe,
        entry,
        Path::new("/"),
        &env,
        &argv("sleep 5"),
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(slow, ExecOutcome::TimedOut);
    drop(tx);
    let exit = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("a container nobody holds is killed")
        .expect("joined");
    assert_eq!(exit.signal, Some(9));
}
