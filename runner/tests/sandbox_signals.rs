//! How `herd-runner sandbox` ends, as the kubelet sees it: the real binary on a temp socket,
//! started as the `sandbox` container of a Run's pod is (`herd-runner sandbox` with
//! `HERD_ROOT` and `HERD_SANDBOX_SOCKET`), stopped by a real SIGTERM.

// Test helpers outside #[test] functions: a failure to set up must fail the test loudly.
#![allow(clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

fn start(root: &Path, socket: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_herd-runner"))
        .arg("sandbox")
        .env("HERD_ROOT", root)
        .env("HERD_SANDBOX_SOCKET", socket)
        .env("HOME", root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herd-runner sandbox starts")
}

/// Connects once the sandbox accepts, and shakes hands.
fn connect(socket: &Path, child: &mut Child) -> UnixStream {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(stream) = UnixStream::connect(socket) {
            return stream;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the sandbox exited before accepting: {status}");
        }
        assert!(Instant::now() < deadline, "the sandbox never accepted");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn send(stream: &mut UnixStream, line: &serde_json::Value) {
    let mut bytes = serde_json::to_vec(line).expect("a request line");
    bytes.push(b'\n');
    stream.write_all(&bytes).expect("the request is sent");
}

fn wait_for(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("waiting for the sandbox") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the sandbox did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn terminate(child: &Child) {
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(Pid::from_raw)
        .expect("a pid");
    kill_process(pid, Signal::TERM).expect("SIGTERM is sent");
}

#[test]
fn sigterm_ends_the_sandbox_with_exit_code_0_and_stops_its_commands_gracefully() {
    let dir = tempfile::tempdir().expect("a temp folder");
    let root = dir.path().join("mnt");
    let socket = dir.path().join("run/sandbox.sock");
    let mut child = start(&root, &socket);
    let mut stream = connect(&socket, &mut child);
    let mut replies = BufReader::new(stream.try_clone().expect("a second handle"));
    send(
        &mut stream,
        &serde_json::json!({"id": 1, "request": {"op": "hello", "protocol": 0, "runner": "test"}}),
    );
    let mut hello = String::new();
    replies.read_line(&mut hello).expect("the hello answer");
    assert!(hello.contains("\"hello\""), "{hello}");
    // A command in flight, as when the agent's last tool call is still running: it must get
    // SIGTERM (and write its mark) before anything kills it.
    let command = "trap 'echo stopped > stopped; exit 0' TERM; echo started > started; \
                   sleep 60 & wait";
    send(
        &mut stream,
        &serde_json::json!({"id": 2, "request": {"op": "tool", "name": "bash",
            "arguments": {"description": "wait", "command": command}}}),
    );
    let workspace = root.join("user-data/workspace");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !workspace.join("started").exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopping = Instant::now();
    terminate(&child);
    let status = wait_for(&mut child, Duration::from_secs(20));
    assert_eq!(
        (status.code(), status.signal()),
        (Some(0), None),
        "a stopped sandbox must exit 0"
    );
    assert!(stopping.elapsed() < Duration::from_secs(10));
    assert!(
        workspace.join("stopped").exists(),
        "the running command was not sent SIGTERM"
    );
}

#[test]
fn an_idle_sandbox_stopped_by_sigterm_exits_0() {
    let dir = tempfile::tempdir().expect("a temp folder");
    let socket = dir.path().join("sandbox.sock");
    let mut child = start(&dir.path().join("mnt"), &socket);
    drop(connect(&socket, &mut child));
    terminate(&child);
    let status = wait_for(&mut child, Duration::from_secs(20));
    assert_eq!((status.code(), status.signal()), (Some(0), None));
}

#[test]
fn a_sandbox_that_cannot_bind_its_socket_exits_non_zero() {
    let dir = tempfile::tempdir().expect("a temp folder");
    // A regular file where the socket should be: the sandbox refuses to replace it.
    let socket = dir.path().join("sandbox.sock");
    std::fs::write(&socket, "not a socket").expect("a file in the way");
    let mut child = start(&dir.path().join("mnt"), &socket);
    let status = wait_for(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "{status}");
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    assert!(stderr.contains("is not a socket"), "{stderr}");
}
