//! Local runs confined like the pod: the model's commands, through `herd-runner run
//! --sandbox=strict` and a scripted model, meet the sandbox container's view of the machine.
//! Run as the current user and, when that is root, also as uid 65534 from a copy of the
//! binary. Where this machine cannot confine, the tests say so and skip; with `CI=true` they
//! fail instead.

// Test helpers outside #[test] functions: a failure to set up must fail the test loudly.
#![allow(clippy::expect_used)]

mod scripted;

use std::io::Write as _;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, PoisonError};

use scripted::scripted_agent;
use serde_json::{Value, json};

const NOBODY: u32 = 65534;
/// In the runner's environment only; a command that prints it read the runner's memory.
const SECRET: &str = "herd-test-secret-4f1c";

/// A thread that forks while another thread still holds the copied binary open for writing
/// gives the child that descriptor until it execs, and an exec of the copy meanwhile fails
/// with ETXTBSY ("Text file busy"): copies and spawns take turns.
static EXEC_TURN: Mutex<()> = Mutex::new(());

/// Runs `command` to its end, capturing its output, spawned in its turn.
fn output_of(command: &mut Command) -> Output {
    let child = {
        let _turn = EXEC_TURN.lock().unwrap_or_else(PoisonError::into_inner);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("herd-runner starts")
    };
    child.wait_with_output().expect("herd-runner finishes")
}

/// Says why a test did not run, where the person running the tests sees it.
fn skip(reason: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "confinement must work in CI, but {reason}"
    );
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED confinement test: {reason} (CI=true makes this a failure)"
    );
}

/// A fresh folder everyone may enter, outside `/tmp` (which the sandbox replaces with its
/// own) so the sandbox sees it, holding a copy of the binary any user can run.
struct Stage {
    dir: tempfile::TempDir,
}

impl Stage {
    fn new() -> Stage {
        let parent = Path::new("/var/tmp");
        let dir = if parent.is_dir() {
            tempfile::Builder::new()
                .prefix("herd-confine-")
                .tempdir_in(parent)
        } else {
            tempfile::Builder::new().prefix("herd-confine-").tempdir()
        }
        .expect("a stage folder");
        let stage = Stage { dir };
        std::fs::set_permissions(stage.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod the stage");
        {
            let _turn = EXEC_TURN.lock().unwrap_or_else(PoisonError::into_inner);
            std::fs::copy(env!("CARGO_BIN_EXE_herd-runner"), stage.binary())
                .expect("copy the binary");
        }
        std::fs::create_dir_all(stage.path().join("home")).expect("a home");
        std::fs::write(stage.path().join("home/secret.txt"), "home secret\n").expect("secret");
        std::fs::write(stage.path().join("visible.txt"), "visible\n").expect("visible file");
        std::fs::create_dir_all(stage.path().join("outside")).expect("outside folder");
        std::fs::write(stage.path().join("outside/keep.txt"), "keep\n").expect("keep file");
        for folder in ["", "home", "outside"] {
            std::fs::set_permissions(
                stage.path().join(folder),
                std::fs::Permissions::from_mode(0o755),
            )
            .expect("chmod");
        }
        stage
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn binary(&self) -> PathBuf {
        self.path().join("herd-runner")
    }

    fn workdir(&self) -> PathBuf {
        self.path().join("work")
    }
}

fn bash(call: u32, command: &str) -> Value {
    json!({
        "match": {"role": "lead", "call": call},
        "respond": {"toolCalls": [{"name": "bash", "arguments": {"description": "check", "command": command}}]}
    })
}

/// The model's script: one bash command per call, each printing one line to check.
fn script(stage: &Path) -> Value {
    let home = stage.join("home");
    let outside = stage.join("outside");
    // Run from a file: the audit refuses the command line itself.
    let wipe = format!(
        "if touch /usr/.herd-canary 2>/dev/null || touch {outside}/canary 2>/dev/null; then \
         echo UNCONFINED; exit 1; fi\n\
         /bin/rm -rf /mnt/user-data/../.. 2>/dev/null\n\
         /bin/rm -rf /mnt/user-data/../../mnt 2>/dev/null\n\
         /bin/rm -rf {outside} 2>/dev/null\n\
         echo wiped\n",
        outside = outside.display()
    );
    // Every ancestor's environment: the runner's holds the secret (and, for real, the
    // model key).
    let environ = format!(
        "found=SAFE; p=$$\n\
         while [ \"$p\" -gt 1 ]; do\n\
         if {{ tr '\\0' '\\n' < /proc/$p/environ; }} 2>/dev/null | grep -q {SECRET}; then found=LEAKED; fi\n\
         p=$(awk '{{print $4}}' /proc/$p/stat)\n\
         done\n\
         echo $found\n"
    );
    json!({"rules": [
        {"match": {"purpose": "title"}, "respond": {"content": "Confinement"}},
        bash(1, "cd ../.. && pwd"),
        bash(2, &format!("touch /mnt/user-data/workspace/ok /tmp/{} && echo WROTE", private_name(stage))),
        bash(3, &format!(
            "for p in /usr/.herd /etc/.herd /.herd /mnt/.herd /mnt/skills/.herd {}/.herd; do \
             touch $p 2>/dev/null && echo WROTE $p; done; echo done",
            stage.display()
        )),
        bash(4, &format!("cat {}/visible.txt", stage.display())),
        bash(5, &format!(
            "cat {}/secret.txt 2>/dev/null || echo HIDDEN",
            home.display()
        )),
        bash(6, "grep CapEff /proc/self/status"),
        {"match": {"role": "lead", "call": 7}, "respond": {"toolCalls": [
            {"name": "write_file", "arguments": {"description": "s", "path": "wipe.sh", "content": wipe}},
            {"name": "write_file", "arguments": {"description": "s", "path": "environ.sh", "content": environ}}
        ]}},
        bash(8, "bash environ.sh"),
        bash(9, "bash wipe.sh"),
        {"match": {"role": "lead"}, "respond": {"content": "Checked."}}
    ]})
}

fn manifest(stage: &Path) -> String {
    scripted_agent("confined", "confined", "", &script(stage).to_string())
}

/// What one confined run showed: the first line of each bash result, in order.
struct Outcome {
    bash: Vec<String>,
}

/// Runs the script in `stage` as `user` (`None`: the current user). `None` when this
/// machine cannot confine (the test is then skipped, or fails in CI).
fn run_confined(stage: &Stage, user: Option<u32>) -> Option<Outcome> {
    std::fs::write(stage.path().join("agent.yaml"), manifest(stage.path())).expect("manifest");
    std::fs::create_dir_all(stage.workdir()).expect("work folder");
    std::fs::create_dir_all(stage.path().join("memory")).expect("memory folder");
    let mut command = match user {
        None => Command::new(stage.binary()),
        Some(uid) => {
            for folder in [stage.workdir(), stage.path().join("memory")] {
                chown(&folder, Some(uid), Some(uid)).expect("chown to the test user");
            }
            let mut setpriv = Command::new("setpriv");
            setpriv
                .arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .arg("--clear-groups")
                .arg(stage.binary());
            setpriv
        }
    };
    let output = output_of(
        command
            .args(["run", "--json", "--sandbox=strict", "-f"])
            .arg(stage.path().join("agent.yaml"))
            .arg("--workdir")
            .arg(stage.workdir())
            .arg("--memory-dir")
            .arg(stage.path().join("memory"))
            .arg("Check the sandbox.")
            .current_dir(stage.path())
            .env("HOME", stage.path().join("home"))
            .env("HERD_TEST_SECRET", SECRET),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stdout.contains("the tools cannot be confined on this machine") {
        skip(&format!("this machine cannot confine: {stdout}"));
        return None;
    }
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let bash = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["event"] == "tool_finished" && event["name"] == "bash")
        .map(|event| event["preview"].as_str().unwrap_or_default().to_owned())
        .collect();
    Some(Outcome { bash })
}

fn check(stage: &Stage, outcome: &Outcome) {
    let stage_path = stage.path().display().to_string();
    assert_eq!(
        outcome.bash,
        vec![
            "/mnt".to_owned(),
            "WROTE".to_owned(),
            "done".to_owned(),
            "visible".to_owned(),
            "HIDDEN".to_owned(),
            "CapEff:\t0000000000000000".to_owned(),
            "SAFE".to_owned(),
            "wiped".to_owned(),
        ],
        "stage {stage_path}"
    );
    // Nothing outside the work folder's user-data went: not the folder next to it, not the
    // run's own state, not the skills.
    assert!(stage.path().join("outside/keep.txt").is_file());
    assert!(stage.path().join("visible.txt").is_file());
    assert!(stage.workdir().join(".herd/run.json").is_file());
    assert!(stage.workdir().join("skills/public").is_dir());
    assert!(stage.workdir().join("user-data").is_dir());
    // The sandbox's /tmp is its own.
    assert!(!Path::new("/tmp").join(private_name(stage.path())).exists());
}

/// A file name the sandbox writes into its /tmp.
fn private_name(stage: &Path) -> String {
    let name = stage.file_name().unwrap_or_default().to_string_lossy();
    format!("{name}-private")
}

#[test]
fn the_models_commands_meet_the_pods_view_as_the_current_user() {
    let stage = Stage::new();
    if let Some(outcome) = run_confined(&stage, None) {
        check(&stage, &outcome);
    }
}

#[test]
fn the_models_commands_meet_the_pods_view_as_an_unprivileged_user() {
    if !rustix::process::geteuid().is_root() {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED the uid {NOBODY} confinement test: it needs root to switch users"
        );
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        skip("setpriv (util-linux) is not installed");
        return;
    }
    let stage = Stage::new();
    if let Some(outcome) = run_confined(&stage, Some(NOBODY)) {
        check(&stage, &outcome);
    }
}

#[test]
fn a_confinement_that_cannot_be_set_up_stops_the_child_with_its_reason() {
    let spec = json!({
        "tmpfs": [{"path": "/tmp", "writable": true}],
        "binds": [{"source": "/nonexistent/folder", "target": "/tmp/x", "writable": true}],
        "hidden": [],
        "cwd": "/tmp",
    });
    let output = output_of(
        Command::new(env!("CARGO_BIN_EXE_herd-runner"))
            .args(["sandbox", "--socket", "/nonexistent/s.sock"])
            .env("HERD_CONFINE", spec.to_string()),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    // EX_OSERR, before the sandbox command ever runs.
    assert_eq!(output.status.code(), Some(71), "{stderr}");
    assert!(
        stderr.starts_with("error: cannot confine the sandbox: "),
        "{stderr}"
    );
}
