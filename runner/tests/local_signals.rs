//! Ctrl-C and SIGTERM on a real `herd-runner run`: real signals to the real binary while the
//! model streams and while a tool runs, against an OpenAI-compatible server on loopback that
//! streams slowly, then `--resume` to the answer.

// Test helpers outside #[test] functions: a failure to set up must fail the test loudly.
#![allow(clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

/// What the first main call of a run gets.
#[derive(Clone, Copy)]
enum First {
    /// A few words of the answer, then nothing more: the stream stays open.
    StallMidStream,
    /// A `bash` call that writes `started.txt`, then waits; on SIGTERM it writes `term.txt`.
    SlowTool,
    /// A `bash` call that writes `started.txt` and ignores SIGTERM.
    StubbornTool,
}

/// The text the stalled stream sends before it stalls.
const PARTIAL: &str = "Half of the answer is here";
/// The answer after resuming.
const FINAL: &str = "Resumed and finished the task.";

/// An OpenAI-compatible chat server: the first main call gets `first`; a call that says the
/// run was interrupted gets [`FINAL`]; side calls (no tools offered) get a short title.
struct FakeModel {
    address: String,
    bodies: Arc<Mutex<Vec<String>>>,
    streamed: Arc<AtomicBool>,
}

impl FakeModel {
    fn start(first: First) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let address = format!("http://{}/v1", listener.local_addr().expect("an address"));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let streamed = Arc::new(AtomicBool::new(false));
        let (seen, partial) = (bodies.clone(), streamed.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (seen, partial) = (seen.clone(), partial.clone());
                std::thread::spawn(move || serve(stream, first, &seen, &partial));
            }
        });
        FakeModel {
            address,
            bodies,
            streamed,
        }
    }

    fn bodies(&self) -> Vec<String> {
        self.bodies.lock().expect("the bodies").clone()
    }
}

/// The body of the HTTP request on `stream`, once its headers are read; `None` when the
/// client hangs up first.
fn request_body(stream: &TcpStream) -> Option<String> {
    let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(String::from_utf8_lossy(&body).into_owned())
}

fn serve(stream: TcpStream, first: First, seen: &Mutex<Vec<String>>, partial: &AtomicBool) {
    let Some(body) = request_body(&stream) else {
        return;
    };
    let is_main = body.contains("\"tools\"");
    let resumed = body.contains("The run was interrupted (SIG");
    let first_main = is_main && {
        let mut seen = seen.lock().expect("the bodies");
        let earlier = seen.iter().any(|b| b.contains("\"tools\""));
        seen.push(body.clone());
        !earlier
    };
    if !is_main {
        seen.lock().expect("the bodies").push(body.clone());
    }
    let mut out = stream;
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    if out.write_all(head.as_bytes()).is_err() {
        return;
    }
    let send = |out: &mut TcpStream, delta: serde_json::Value, finish: Option<&str>| {
        let chunk = serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        out.write_all(format!("data: {chunk}\n\n").as_bytes())
            .and_then(|()| out.flush())
            .is_ok()
    };
    let done = |out: &mut TcpStream| {
        let _ = out.write_all(b"data: [DONE]\n\n");
    };
    if !is_main {
        send(&mut out, serde_json::json!({"content": "Fake title"}), None);
        send(&mut out, serde_json::json!({}), Some("stop"));
        return done(&mut out);
    }
    if resumed || !first_main {
        send(&mut out, serde_json::json!({"content": FINAL}), None);
        send(&mut out, serde_json::json!({}), Some("stop"));
        return done(&mut out);
    }
    match first {
        First::StallMidStream => {
            for word in PARTIAL.split_inclusive(' ') {
                if !send(&mut out, serde_json::json!({"content": word}), None) {
                    return;
                }
            }
            partial.store(true, Ordering::SeqCst);
            // Never finishes: the runner is interrupted mid-stream and hangs up.
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(120) {
                std::thread::sleep(Duration::from_millis(200));
                if out.write_all(b": waiting\n\n").is_err() {
                    return;
                }
            }
        }
        First::SlowTool | First::StubbornTool => {
            let command = if matches!(first, First::SlowTool) {
                "trap 'echo got-term > term.txt; exit 0' TERM; echo started > started.txt; \
                 sleep 60 & wait"
            } else {
                "trap '' TERM; echo started > started.txt; sleep 60"
            };
            let arguments =
                serde_json::json!({"description": "wait", "command": command}).to_string();
            let call = serde_json::json!({"tool_calls": [{
                "index": 0, "id": "call_1", "type": "function",
                "function": {"name": "bash", "arguments": arguments},
            }]});
            send(&mut out, call, None);
            send(&mut out, serde_json::json!({}), Some("tool_calls"));
            done(&mut out);
        }
    }
}

fn agent(dir: &Path, model: &FakeModel) -> PathBuf {
    let path = dir.join("agent.yaml");
    let manifest = format!(
        "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata: {{name: patient}}\nspec:\n  \
         model: {{provider: openai, name: fake, baseURL: '{}'}}\n",
        model.address
    );
    std::fs::write(&path, manifest).expect("the manifest is written");
    path
}

fn herd_runner(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_herd-runner"));
    command
        .env("HOME", dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("OPENAI_API_KEY", "sk-test")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

fn start(dir: &Path, agent: &Path, workdir: &Path, sandbox: &str) -> Child {
    herd_runner(dir)
        .args(["run", "--sandbox", sandbox, "-f"])
        .arg(agent)
        .arg("--workdir")
        .arg(workdir)
        .arg("Answer slowly.")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herd-runner starts")
}

fn signal(child: &Child, signal: Signal) {
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid")).expect("a pid");
    kill_process(pid, signal).expect("the signal is sent");
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The child's output once it exits; killed if it does not within a minute.
fn finished(mut child: Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("waiting").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("herd-runner did not exit after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("the output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn resume(dir: &Path, workdir: &Path, json: bool) -> Output {
    let mut command = herd_runner(dir);
    command.args(["run", "--resume"]).arg(workdir);
    if json {
        command.arg("--json");
    }
    command.output().expect("herd-runner resumes")
}

fn checkpoint(workdir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(workdir.join(".herd/checkpoint.json"))
        .expect("a checkpoint is saved");
    serde_json::from_str(&text).expect("the checkpoint is JSON")
}

#[test]
fn ctrl_c_mid_stream_keeps_the_partial_answer_and_resumes_to_the_answer() {
    let dir = tempfile::tempdir().expect("a temp folder");
    let model = FakeModel::start(First::StallMidStream);
    let agent = agent(dir.path(), &model);
    let workdir = dir.path().join("work");
    let child = start(dir.path(), &agent, &workdir, "off");
    wait_until("the partial answer streamed", || {
        model.streamed.load(Ordering::SeqCst)
    });
    // The last chunk is written; give the runner a moment to read it.
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, Signal::INT);
    let stopped = finished(child);
    let stderr = text(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(130), "stderr:\n{stderr}");
    assert!(
        text(&stopped.stdout).contains(PARTIAL.trim()),
        "the partial answer is printed: {}",
        text(&stopped.stdout)
    );
    assert!(stderr.contains("Interrupted by SIGINT"), "{stderr}");
    assert!(
        stderr.contains(&format!("herd-runner run --resume {}", workdir.display())),
        "{stderr}"
    );
    assert!(stderr.contains("model calls"), "the usage line: {stderr}");
    assert_eq!(checkpoint(&workdir)["interrupted"]["signal"], "SIGINT");

    let resumed = resume(dir.path(), &workdir, false);
    let stderr = text(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(
        text(&resumed.stdout).contains(FINAL),
        "{}",
        text(&resumed.stdout)
    );
    let told = model
        .bodies()
        .into_iter()
        .filter(|body| body.contains("The run was interrupted (SIGINT"))
        .count();
    assert!(told >= 1, "the model is told the run was interrupted");
    assert!(!workdir.join(".herd/checkpoint.json").exists());

    let again = resume(dir.path(), &workdir, false);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("has finished (Completed at"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn sigterm_mid_tool_ends_the_tool_gracefully_and_resumes_to_the_answer() {
    sigterm_mid_tool("off");
}

/// The same with the tools in a confined `herd-runner sandbox` child where this machine
/// allows it (`auto` runs them in-process elsewhere, with a warning).
#[test]
fn sigterm_mid_tool_in_the_confined_sandbox_ends_the_tool_gracefully_too() {
    sigterm_mid_tool("auto");
}

fn sigterm_mid_tool(sandbox: &str) {
    let dir = tempfile::tempdir().expect("a temp folder");
    let model = FakeModel::start(First::SlowTool);
    let agent = agent(dir.path(), &model);
    let workdir = dir.path().join("work");
    let workspace = workdir.join("user-data/workspace");
    let child = start(dir.path(), &agent, &workdir, sandbox);
    wait_until("the tool started", || {
        workspace.join("started.txt").exists()
    });
    signal(&child, Signal::TERM);
    let stopped = finished(child);
    let stderr = text(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(143), "stderr:\n{stderr}");
    let term = std::fs::read_to_string(workspace.join("term.txt")).unwrap_or_default();
    assert_eq!(term.trim(), "got-term", "the tool got SIGTERM first");
    let saved = checkpoint(&workdir);
    assert_eq!(saved["interrupted"]["signal"], "SIGTERM");
    assert!(
        saved["state"].to_string().contains("call_1"),
        "the tool call is in the thread"
    );

    let resumed = resume(dir.path(), &workdir, true);
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "stderr:\n{}",
        text(&resumed.stderr)
    );
    let result: serde_json::Value = text(&resumed.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|event| event["event"] == "result")
        .expect("a result event");
    assert_eq!(result["answer"], FINAL);
    assert_eq!(result["stopReason"], "completed");
}

#[test]
fn an_interrupted_json_run_says_so_in_its_events() {
    let dir = tempfile::tempdir().expect("a temp folder");
    let model = FakeModel::start(First::StallMidStream);
    let agent = agent(dir.path(), &model);
    let child = herd_runner(dir.path())
        .args(["run", "--json", "--sandbox", "off", "-f"])
        .arg(&agent)
        .arg("Answer slowly.")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herd-runner starts");
    wait_until("the partial answer streamed", || {
        model.streamed.load(Ordering::SeqCst)
    });
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, Signal::INT);
    let stopped = finished(child);
    assert_eq!(stopped.status.code(), Some(130));
    let events: Vec<serde_json::Value> = text(&stopped.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "stopped" && e["reason"] == "interrupted"),
        "{events:?}"
    );
    let result = events
        .iter()
        .find(|e| e["event"] == "result")
        .expect("a result event");
    assert_eq!(result["interrupted"], "SIGINT");
    assert_eq!(result["stopReason"], "interrupted");
    // Without --workdir the run went to the runs folder, where `herd-runner runs` lists it.
    let workdir = result["workdir"].as_str().expect("the work folder");
    assert!(
        workdir.starts_with(&dir.path().join("data/herd/runs").display().to_string()),
        "{workdir}"
    );
    let listed = herd_runner(dir.path())
        .args(["runs"])
        .output()
        .expect("herd-runner runs");
    let table = text(&listed.stdout);
    assert!(table.starts_with("ID"), "{table}");
    assert!(table.contains("interrupted"), "{table}");
    assert!(table.contains("Answer slowly."), "{table}");
}

#[test]
fn a_second_signal_exits_at_once() {
    let dir = tempfile::tempdir().expect("a temp folder");
    let model = FakeModel::start(First::StubbornTool);
    let agent = agent(dir.path(), &model);
    let workdir = dir.path().join("work");
    let workspace = workdir.join("user-data/workspace");
    let child = start(dir.path(), &agent, &workdir, "off");
    wait_until("the tool started", || {
        workspace.join("started.txt").exists()
    });
    signal(&child, Signal::INT);
    // The tool ignores SIGTERM: the first signal's stop waits out the tool's grace (2 s)...
    std::thread::sleep(Duration::from_millis(300));
    // ...which the second one does not.
    signal(&child, Signal::INT);
    let stopped = finished(child);
    let stderr = text(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(130), "stderr:\n{stderr}");
    assert!(stderr.contains("again to quit at once"), "{stderr}");
    assert!(
        !workdir.join(".herd/checkpoint.json").exists(),
        "it quit before the checkpoint"
    );
}
