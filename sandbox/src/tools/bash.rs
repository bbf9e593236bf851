//! `bash`: runs `bash -c COMMAND` in the workspace with a minimal environment, stdout and
//! stderr combined in order, middle-truncated at 20000 characters, killed (with its whole
//! process group) at the timeout.
//!
//! The environment is cleared and rebuilt from a short allowlist: whatever secrets the
//! process holding the sandbox has (locally, the user's shell) never reach the model's
//! commands.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use super::{ToolReply, invalid_args};
use crate::args::BashArgs;
use crate::host::SandboxHost;
use crate::paths::{Access, WORKSPACE};
use crate::truncation::truncate_middle;

/// DeerFlow's cap on `bash` output.
pub(crate) const MAX_CHARS: usize = 20_000;
/// Bytes kept from each end of the output while capturing: at 4 bytes a character, more than
/// the characters shown from each end.
const CAPTURE_BYTES: usize = 64 * 1024;
/// After bash exits, how long output from background processes still holding the pipe is
/// waited for.
const BACKGROUND_GRACE: Duration = Duration::from_millis(500);
/// Variables kept from the sandbox's own environment.
const KEPT_VARS: [&str; 6] = ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"];
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Runs a `bash` tool call.
pub(crate) async fn run(sandbox: &SandboxHost, arguments: serde_json::Value) -> ToolReply {
    match serde_json::from_value::<BashArgs>(arguments) {
        Ok(args) => execute(sandbox, &args.command).await,
        Err(error) => invalid_args(super::names::BASH, &error),
    }
}

async fn execute(sandbox: &SandboxHost, command: &str) -> ToolReply {
    if command.trim().is_empty() {
        return ToolReply::error("Error: the command is empty");
    }
    let workspace = match sandbox.paths().resolve(WORKSPACE, Access::Write) {
        Ok(resolved) => resolved.host,
        Err(refused) => return ToolReply::error(format!("Error: {refused}")),
    };
    if let Err(failure) = std::fs::create_dir_all(&workspace) {
        return ToolReply::error(format!("Error: cannot create {WORKSPACE}: {failure}"));
    }
    let (reader, writer) = match pipe() {
        Ok(pair) => pair,
        Err(failure) => return ToolReply::error(format!("Error: could not run bash: {failure}")),
    };
    let mut bash = tokio::process::Command::new("bash");
    bash.arg("-c")
        .arg(sandbox.paths().unmask_command(command))
        .current_dir(&workspace)
        .env_clear()
        .envs(environment(sandbox))
        .stdin(Stdio::null())
        .stdout(writer.0)
        .stderr(writer.1)
        .process_group(0)
        .kill_on_drop(true);
    let spawned = bash.spawn();
    // The command holds the pipe's write ends; drop them, or the read side never sees EOF.
    drop(bash);
    let mut child = match spawned {
        Ok(child) => child,
        Err(failure) => return ToolReply::error(format!("Error: could not run bash: {failure}")),
    };
    sandbox.process_groups().add(child.id());
    // Armed until the command ends by itself: a timeout, or this future being dropped (the
    // client went away), takes down everything the command started.
    let mut group = GroupKiller {
        leader: child.id(),
        armed: true,
    };
    let mut output = Capture::default();
    let outcome = collect(&mut child, reader, &mut output, sandbox.bash_timeout()).await;
    match outcome {
        // Background processes that outlive bash were started on purpose (servers); they
        // keep running.
        Outcome::Exited(_) | Outcome::Backgrounded(_) => group.armed = false,
        Outcome::TimedOut | Outcome::Failed(_) => {
            drop(group);
            let _ = child.kill().await;
        }
    }
    render(outcome, &output, sandbox)
}

/// Kills a process group when dropped while armed.
struct GroupKiller {
    leader: Option<u32>,
    armed: bool,
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if self.armed {
            kill_group(self.leader);
        }
    }
}

/// How the command ended.
enum Outcome {
    /// bash exited and every writer closed the pipe.
    Exited(ExitStatus),
    /// bash exited but background processes kept the pipe open.
    Backgrounded(ExitStatus),
    TimedOut,
    /// Waiting on the process failed.
    Failed(String),
}

async fn collect(
    child: &mut tokio::process::Child,
    mut reader: tokio::net::unix::pipe::Receiver,
    output: &mut Capture,
    timeout: Duration,
) -> Outcome {
    let deadline = Instant::now() + timeout;
    let mut chunk = vec![0u8; 16 * 1024];
    let mut status: Option<ExitStatus> = None;
    let mut grace_deadline = deadline;
    let mut eof = false;
    loop {
        if eof && let Some(status) = status {
            return Outcome::Exited(status);
        }
        tokio::select! {
            read = reader.read(&mut chunk), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => output.push(&chunk[..n]),
            },
            waited = child.wait(), if status.is_none() => match waited {
                Ok(exit) => {
                    status = Some(exit);
                    grace_deadline = (Instant::now() + BACKGROUND_GRACE).min(deadline);
                }
                Err(failure) => return Outcome::Failed(failure.to_string()),
            },
            () = tokio::time::sleep_until(grace_deadline), if status.is_some() => {
                if let Some(status) = status {
                    return Outcome::Backgrounded(status);
                }
            },
            () = tokio::time::sleep_until(deadline) => return Outcome::TimedOut,
        }
    }
}

fn render(outcome: Outcome, output: &Capture, sandbox: &SandboxHost) -> ToolReply {
    let text = output.render(|text| sandbox.paths().mask(text));
    let body = if text.is_empty() {
        "(no output)".to_owned()
    } else {
        text
    };
    match outcome {
        Outcome::Exited(status) => ToolReply::ok(with_status(body, status)),
        Outcome::Backgrounded(status) => ToolReply::ok(format!(
            "{}\n[background processes still held the output and were not waited for; \
             redirect their output to a file]",
            with_status(body, status)
        )),
        Outcome::TimedOut => ToolReply::error(format!(
            "Error: the command did not finish within {} and was stopped. Output so far:\n{body}",
            humantime::format_duration(sandbox.bash_timeout())
        )),
        Outcome::Failed(message) => {
            ToolReply::error(format!("Error: waiting for bash failed: {message}\n{body}"))
        }
    }
}

fn with_status(body: String, status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(0), _) => body,
        (Some(code), _) => format!("{body}\n[exit code: {code}]"),
        (None, Some(signal)) => format!("{body}\n[killed by signal {signal}]"),
        (None, None) => format!("{body}\n[exited abnormally]"),
    }
}

/// The environment of a command: the allowlist plus a writable `HOME` and settings that keep
/// tools from waiting on a terminal.
pub(crate) fn environment(sandbox: &SandboxHost) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = KEPT_VARS
        .iter()
        .filter_map(|name| {
            std::env::var(name)
                .ok()
                .map(|value| ((*name).to_owned(), value))
        })
        .collect();
    if !vars.iter().any(|(name, _)| name == "PATH") {
        vars.push(("PATH".to_owned(), DEFAULT_PATH.to_owned()));
    }
    vars.push((
        "HOME".to_owned(),
        sandbox.home().to_string_lossy().into_owned(),
    ));
    for (name, value) in [("TERM", "dumb"), ("PAGER", "cat"), ("GIT_PAGER", "cat")] {
        vars.push((name.to_owned(), value.to_owned()));
    }
    vars
}

/// One pipe whose write end serves as both stdout and stderr, so the output keeps the order
/// in which the command wrote it.
fn pipe() -> std::io::Result<(tokio::net::unix::pipe::Receiver, (Stdio, Stdio))> {
    let (reader, writer) = std::io::pipe()?;
    let stderr = writer.try_clone()?;
    let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;
    Ok((receiver, (Stdio::from(writer), Stdio::from(stderr))))
}

/// Kills the command's process group (it leads its own), so children it started die too.
pub(crate) fn kill_group(leader: Option<u32>) {
    let pid = leader
        .and_then(|id| i32::try_from(id).ok())
        .filter(|id| *id > 1)
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// The output, bounded: the first and last `CAPTURE_BYTES` and a count of what lies between.
#[derive(Default)]
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Characters (UTF-8 lead bytes) dropped between head and tail.
    dropped_chars: usize,
}

impl Capture {
    fn push(&mut self, mut data: &[u8]) {
        let room = CAPTURE_BYTES.saturating_sub(self.head.len());
        if room > 0 {
            let take = room.min(data.len());
            self.head.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        self.tail.extend(data);
        while self.tail.len() > CAPTURE_BYTES {
            if let Some(byte) = self.tail.pop_front()
                && !is_continuation(byte)
            {
                self.dropped_chars += 1;
            }
        }
    }

    /// The output as text (after `mask`), middle-truncated to `MAX_CHARS`.
    fn render(&self, mask: impl Fn(&str) -> String) -> String {
        let (front, back) = self.tail.as_slices();
        let mut tail = Vec::with_capacity(self.tail.len());
        tail.extend_from_slice(front);
        tail.extend_from_slice(back);
        if self.dropped_chars == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return truncate_middle(&mask(&String::from_utf8_lossy(&all)), 0, "", MAX_CHARS);
        }
        // The tail may start inside a character; drop its continuation bytes.
        let start = tail
            .iter()
            .position(|b| !is_continuation(*b))
            .unwrap_or(tail.len());
        truncate_middle(
            &mask(&String::from_utf8_lossy(&self.head)),
            self.dropped_chars,
            &mask(&String::from_utf8_lossy(&tail[start..])),
            MAX_CHARS,
        )
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::SandboxRoots;

    fn sandbox() -> std::io::Result<(tempfile::TempDir, SandboxHost)> {
        let dir = tempfile::tempdir()?;
        let base = dir.path().canonicalize()?;
        let home = base.join("home");
        std::fs::create_dir_all(&home)?;
        let sandbox = SandboxHost::new(&SandboxRoots::under(&base.join("root")))?.with_home(home);
        Ok((dir, sandbox))
    }

    async fn bash(sandbox: &SandboxHost, command: &str) -> ToolReply {
        run(
            sandbox,
            serde_json::json!({"description": "test", "command": command}),
        )
        .await
    }

    #[tokio::test]
    async fn runs_in_the_workspace_with_virtual_paths() -> std::io::Result<()> {
        let (_dir, sandbox) = sandbox()?;
        let reply = bash(&sandbox, "pwd; echo hi > /mnt/user-data/workspace/f; cat f").await;
        assert!(!reply.is_error);
        assert_eq!(reply.content, "/mnt/user-data/workspace\nhi\n");
        Ok(())
    }

    #[tokio::test]
    async fn combines_streams_in_order_and_shows_exit_codes() -> std::io::Result<()> {
        let (_dir, sandbox) = sandbox()?;
        let reply = bash(&sandbox, "echo out; echo err >&2; echo out2; exit 3").await;
        assert!(!reply.is_error);
        assert_eq!(reply.content, "out\nerr\nout2\n\n[exit code: 3]");
        assert_eq!(bash(&sandbox, "true").await.content, "(no output)");
        Ok(())
    }

    #[tokio::test]
    async fn the_environment_is_an_allowlist() -> std::io::Result<()> {
        let (_dir, sandbox) = sandbox()?;
        // The test process's environment stands for the runner's: nothing beyond the
        // allowlist may show.
        let reply = bash(&sandbox, "env | cut -d= -f1 | sort | tr '\\n' ' '").await;
        let names: Vec<&str> = reply.content.split_whitespace().collect();
        for name in &names {
            assert!(
                KEPT_VARS.contains(name)
                    || [
                        "HOME",
                        "TERM",
                        "PAGER",
                        "GIT_PAGER",
                        "PWD",
                        "SHLVL",
                        "_",
                        "OLDPWD"
                    ]
                    .contains(name),
                "unexpected variable {name}"
            );
        }
        assert!(names.contains(&"HOME"));
        let home = bash(&sandbox, "echo $HOME").await;
        assert!(home.content.ends_with("/home\n"), "{}", home.content);
        Ok(())
    }

    #[tokio::test]
    async fn long_output_is_middle_truncated() -> std::io::Result<()> {
        let (_dir, sandbox) = sandbox()?;
        let reply = bash(
            &sandbox,
            "head -c 300000 /dev/zero | tr '\\0' a; echo; echo END",
        )
        .await;
        assert!(reply.content.starts_with(&"a".repeat(10_000)));
        assert!(reply.content.ends_with("END\n"));
        assert!(
            reply.content.contains("[… 280005 characters omitted …]"),
            "{}",
            &reply.content[9990..10100]
        );
        Ok(())
    }

    #[tokio::test]
    async fn timeouts_kill_the_whole_group() -> std::io::Result<()> {
        let (dir, sandbox) = sandbox()?;
        let sandbox = sandbox.with_bash_timeout(Duration::from_millis(300));
        let marker = dir.path().join("survived");
        let command = format!(
            "echo started; (sleep 1; touch {}) & sleep 30",
            marker.display()
        );
        let reply = bash(&sandbox, &command).await;
        assert!(reply.is_error);
        assert!(
            reply.content.contains("did not finish within 300ms"),
            "{}",
            reply.content
        );
        assert!(reply.content.contains("started"));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            !marker.exists(),
            "a child of the timed-out command kept running"
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_cancelled_call_kills_the_whole_group() -> std::io::Result<()> {
        let (dir, sandbox) = sandbox()?;
        let marker = dir.path().join("survived");
        let command = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let call = bash(&sandbox, &command);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), call)
                .await
                .is_err()
        );
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            !marker.exists(),
            "a child of the cancelled command kept running"
        );
        Ok(())
    }

    #[tokio::test]
    async fn background_processes_holding_the_pipe_do_not_block() -> std::io::Result<()> {
        let (_dir, sandbox) = sandbox()?;
        let reply = bash(&sandbox, "echo first; sleep 5 &").await;
        assert!(!reply.is_error);
        assert!(reply.content.starts_with("first\n"));
        assert!(reply.content.contains("background processes"));
        Ok(())
    }

    #[tokio::test]
    async fn bad_arguments_are_error_results() -> std::io::Result<()> {
        let (_dir, sandbox) = sandbox()?;
        let reply = run(&sandbox, serde_json::json!({"command": 1})).await;
        assert!(reply.is_error);
        assert!(bash(&sandbox, "  ").await.is_error);
        Ok(())
    }
}
