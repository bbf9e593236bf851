//! `herd-runner run` end to end on the example agent: the real binary, the real sandbox, the
//! scripted model.

// Test helpers outside #[test] functions: a failure to spawn must fail the test loudly.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/local/researcher.yaml")
}

fn herd_runner(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herd-runner"))
        .args(args)
        .env("HERD_HOME", home)
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("herd-runner runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_example_runs_to_an_answer_and_a_presented_file() {
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().join("work");
    let example = example();
    let output = herd_runner(
        &[
            "run",
            "-f",
            example.to_str().unwrap(),
            "--workdir",
            workdir.to_str().unwrap(),
        ],
        dir.path(),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(text(&output.stdout).contains("The brief is ready"));
    let brief = std::fs::read_to_string(workdir.join("user-data/outputs/brief.md")).unwrap();
    assert!(brief.starts_with("# Rust vs Go for Kubernetes operators"));
    assert!(stderr.contains("? Who is the brief for?"), "{stderr}");
    assert!(
        stderr.contains("answer: Engineers choosing a stack"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[general-purpose#call_2_1] ✓ bash: rust notes saved"),
        "{stderr}"
    );
    assert!(workdir.join("user-data/workspace/go-notes.txt").is_file());
}

#[test]
fn a_question_without_an_answer_suspends_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().join("work");
    let manifest = std::fs::read_to_string(example()).unwrap();
    let unanswered: String = manifest
        .lines()
        .filter(|line| !line.contains("responses:") && !line.contains("q-call_1_0"))
        .filter(|line| !line.trim_start().starts_with("answer: Engineers"))
        .map(|line| format!("{line}\n"))
        .collect();
    let file = dir.path().join("agent.yaml");
    std::fs::write(&file, unanswered).unwrap();

    let first = herd_runner(
        &[
            "run",
            "-f",
            file.to_str().unwrap(),
            "--workdir",
            workdir.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(first.status.code(), Some(3), "{}", text(&first.stderr));
    let question: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(question["question"], "Who is the brief for?");
    assert_eq!(question["id"], "q-call_1_0");
    assert!(text(&first.stderr).contains("--resume"));

    let second = herd_runner(
        &[
            "run",
            "--resume",
            workdir.to_str().unwrap(),
            "--answer",
            "Managers wanting a summary",
        ],
        dir.path(),
    );
    assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
    assert!(text(&second.stdout).contains("The brief is ready"));
    assert!(text(&second.stderr).contains("answer: Managers wanting a summary"));
}

#[test]
fn json_mode_streams_events_and_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let example = example();
    let output = herd_runner(
        &[
            "run",
            "--json",
            "-f",
            example.to_str().unwrap(),
            "--workdir",
            dir.path().join("w").to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(0));
    let lines: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "tool_started" && l["name"] == "task")
    );
    let result = lines.last().unwrap();
    assert_eq!(result["event"], "result");
    assert_eq!(result["stopReason"], "completed");
    assert_eq!(
        result["artifacts"][0]["path"],
        "/mnt/user-data/outputs/brief.md"
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = herd_runner(
        &["run", "-f", "/nonexistent/agent.yaml", "task"],
        dir.path(),
    );
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("/nonexistent/agent.yaml: cannot read"));

    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata: {name: a}\n\
         spec: {subagents: {enabled: true, maxConcurrent: 9}}\n",
    )
    .unwrap();
    let invalid = herd_runner(&["run", "-f", bad.to_str().unwrap(), "task"], dir.path());
    assert_eq!(invalid.status.code(), Some(2));
    let stderr = text(&invalid.stderr);
    assert!(
        stderr.contains("bad.yaml: document 1 (Agent/a)"),
        "{stderr}"
    );
    assert!(stderr.contains("spec.subagents.maxConcurrent"), "{stderr}");
}

#[test]
fn an_unreachable_endpoint_is_a_clear_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.yaml");
    std::fs::write(
        &agent,
        "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata: {name: a}\n\
         spec:\n  model: {provider: openai, name: m, baseURL: 'http://127.0.0.1:9/v1', maxRetries: 0}\n",
    )
    .unwrap();
    let output = herd_runner(
        &[
            "run",
            "-f",
            agent.to_str().unwrap(),
            "--workdir",
            dir.path().join("w").to_str().unwrap(),
            "hello",
        ],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("127.0.0.1:9"), "{stderr}");
    assert!(stderr.contains("ModelError"), "{stderr}");
}

#[test]
fn a_task_of_your_own_is_asked_its_question_and_the_manifests_answer_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().join("work");
    let example = example();
    let output = herd_runner(
        &[
            "run",
            "--non-interactive",
            "-f",
            example.to_str().unwrap(),
            "--workdir",
            workdir.to_str().unwrap(),
            "Compare Rust and Go for CLIs",
        ],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(3), "{}", text(&output.stderr));
    let question: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(question["question"], "Who is the brief for?");
}

#[test]
fn a_run_refused_before_it_starts_leaves_no_folder() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herd-runner"))
        .args(["run", "-f", bad.to_str().unwrap(), "task"])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .output()
        .expect("herd-runner runs");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\"ConfigMap\", \"Secret\""), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("bad.yaml")],
        "nothing but the manifest"
    );

    let public = dir.path().join("public.yaml");
    std::fs::write(
        &public,
        "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata: {name: a}\nspec:\n  \
         model: {provider: openai, name: gpt-4o}\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herd-runner"))
        .args(["run", "-f", public.to_str().unwrap(), "task"])
        .env("HOME", dir.path())
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("herd-runner runs");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("set OPENAI_API_KEY"), "{stderr}");
    assert!(!dir.path().join("data").exists(), "no run folder");
}

/// An Agent that must be asked before any `bash` call, and a script that first wants to remove
/// `build/`, then, denied, prints a line, then answers with what it printed.
const CAREFUL: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: script
data:
  script.yaml: |
    rules:
      - match: {purpose: title}
        respond: {content: Cleanup}
      - match: {role: lead, lastMessage: {role: tool, contains: approved-command-ran}}
        respond: {content: "Done: approved-command-ran."}
      - match: {role: lead, lastMessage: {role: tool, contains: "denied by a person: keep the build"}}
        respond: {toolCalls: [{name: bash, arguments: {command: "echo approved-command-ran", description: "Print a line"}}]}
      - match: {role: lead}
        respond: {toolCalls: [{name: bash, arguments: {command: "rm -rf build/", description: "Remove build/"}}]}
---
apiVersion: herd.dev/v1alpha1
kind: Agent
metadata:
  name: careful
spec:
  model:
    provider: scripted
    name: script
    scriptFrom: {configMapKeyRef: {name: script, key: script.yaml}}
  approval:
    tools: [bash]
"#;

#[test]
fn an_approval_without_a_terminal_exits_3_and_resumes_denied_then_approved() {
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().join("work");
    let file = dir.path().join("careful.yaml");
    std::fs::write(&file, CAREFUL).unwrap();
    let work = workdir.to_str().unwrap();

    let first = herd_runner(
        &[
            "run",
            "-f",
            file.to_str().unwrap(),
            "--workdir",
            work,
            "--non-interactive",
            "Clean up",
        ],
        dir.path(),
    );
    assert_eq!(first.status.code(), Some(3), "{}", text(&first.stderr));
    let request: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(request["id"], "a-call_0_0");
    assert_eq!(request["tool"], "bash");
    assert!(
        request["arguments"]
            .as_str()
            .unwrap()
            .contains("rm -rf build/")
    );
    assert!(text(&first.stderr).contains("--approve ID"));

    let unknown = herd_runner(
        &["run", "--resume", work, "--approve", "a-nope"],
        dir.path(),
    );
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        text(&unknown.stderr).contains("no tool call of the run in")
            && text(&unknown.stderr).contains("a-call_0_0: bash: rm -rf build/"),
        "{}",
        text(&unknown.stderr)
    );

    let denied = herd_runner(
        &[
            "run",
            "--resume",
            work,
            "--deny",
            "a-call_0_0",
            "--reason",
            "keep the build",
            "--non-interactive",
        ],
        dir.path(),
    );
    assert_eq!(denied.status.code(), Some(3), "{}", text(&denied.stderr));
    let next: serde_json::Value = serde_json::from_slice(&denied.stdout).unwrap();
    assert_eq!(next["id"], "a-call_1_0");
    assert!(text(&denied.stderr).contains("denied (keep the build): bash: rm -rf build/"));

    let approved = herd_runner(
        &["run", "--resume", work, "--approve", "a-call_1_0"],
        dir.path(),
    );
    assert_eq!(
        approved.status.code(),
        Some(0),
        "{}",
        text(&approved.stderr)
    );
    assert!(text(&approved.stdout).contains("Done: approved-command-ran."));
    assert!(text(&approved.stderr).contains("approved: bash: echo approved-command-ran"));
}
