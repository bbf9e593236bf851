//! Observable behaviours of the middleware chain and the command line, end to end through
//! `herd-runner run` with scripted models: a loop stopped, a long conversation summarized,
//! todos nudged to completion, memory written by one run and injected into the next, runs cut
//! short by a limit (exit code 4), terminal escapes neutralized, warnings printed once.

// Test helpers outside #[test] functions: a failure to spawn must fail the test loudly.
#![allow(clippy::expect_used)]

mod scripted;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use scripted::{indented, scripted_agent};

/// An Agent on a scripted model; `spec` is extra YAML under `spec:`, `rules` the script's
/// rules after the one answering the title.
fn manifest(spec: &str, rules: &str) -> String {
    let script = format!(
        "rules:\n  - match: {{purpose: title}}\n    respond: {{content: Scenario}}\n{}",
        indented(rules, "  ")
    );
    scripted_agent("scenario", "scenario", spec, &script)
}

/// Runs the agent with `--json` and returns the final `result` event.
fn run(dir: &Path, name: &str, manifest: &str, task: &str) -> Value {
    run_events(dir, name, manifest, task)
        .pop()
        .expect("at least the result event")
}

/// Runs the agent (with `--json` when `json`) and returns what the process did.
fn run_binary(dir: &Path, name: &str, manifest: &str, task: &str, json: bool) -> Output {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, manifest).expect("write manifest");
    let mut command = Command::new(env!("CARGO_BIN_EXE_herd-runner"));
    command.arg("run");
    if json {
        command.arg("--json");
    }
    command
        .arg("-f")
        .arg(&file)
        .arg("--workdir")
        .arg(dir.join(format!("work-{name}")))
        .arg("--memory-dir")
        .arg(dir.join("memory"))
        .arg(task)
        .env_remove("NO_COLOR")
        .output()
        .expect("herd-runner runs")
}

/// Every JSON event of a `--json` run, the `result` last.
/// The `--json` events, each checked for its `time` and shown without it.
fn events_of(output: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let events: Vec<Value> = stdout
        .lines()
        .map(|line| {
            let mut event: Value = serde_json::from_str(line).expect("a JSON event per line");
            let time = event
                .as_object_mut()
                .and_then(|fields| fields.remove("time"))
                .unwrap_or_default();
            let time = time.as_str().unwrap_or_default();
            assert!(time.parse::<jiff::Timestamp>().is_ok(), "a time: {line}");
            event
        })
        .collect();
    let last = events.last().map(|e| e["event"].clone());
    assert_eq!(
        last,
        Some(Value::from("result")),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    events
}

/// Runs the agent with `--json` and returns every event, the `result` last.
fn run_events(dir: &Path, name: &str, manifest: &str, task: &str) -> Vec<Value> {
    events_of(&run_binary(dir, name, manifest, task, true))
}

#[test]
fn a_tool_loop_is_warned_then_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let rules = r#"- match: {role: lead, lastMessage: {contains: "[LOOP DETECTED]"}}
  respond:
    content: "Ignoring the warning."
    toolCalls: [{name: ls, arguments: {description: again, path: /mnt/user-data/workspace}}]
- match: {role: lead}
  respond:
    toolCalls: [{name: ls, arguments: {description: look, path: /mnt/user-data/workspace}}]
"#;
    let output = run_binary(
        dir.path(),
        "loop",
        &manifest("", rules),
        "List the workspace.",
        true,
    );
    assert_eq!(output.status.code(), Some(4), "stopped by a limit");
    let mut events = events_of(&output);
    let result = events.pop().unwrap();
    assert_eq!(result["stopReason"], "loopDetected", "{result}");
    assert!(
        events.contains(
            &serde_json::json!({"event": "stopped", "agent": "lead", "reason": "loopDetected"})
        ),
        "{events:?}"
    );
    // The model saw the warning (its rule answered) before the hard stop.
    let streamed: String = events
        .iter()
        .filter(|e| e["event"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert!(streamed.contains("Ignoring the warning."), "{streamed}");
    let answer = result["answer"].as_str().unwrap();
    assert!(answer.contains("[FORCED STOP]"), "{answer}");
    assert_eq!(result["usage"]["modelCalls"], 5);
}

#[test]
fn a_long_conversation_is_summarized_and_the_summary_reaches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "  summarization: {enabled: true, triggerTokens: 1000, keepMessages: 2}";
    let rules = r#"- match: {purpose: summary}
  respond: {content: "SUMMARY: the user asked for three long listings."}
- match: {role: lead, anyMessage: {contains: "SUMMARY: the user asked"}}
  respond: {content: "Done, working from the summary."}
- match: {role: lead}
  respond:
    toolCalls:
      - name: bash
        arguments: {description: "long output", command: "seq 1 1500"}
"#;
    let result = run(
        dir.path(),
        "summary",
        &manifest(spec, rules),
        "Print long listings.",
    );
    assert_eq!(result["stopReason"], "completed", "{result}");
    assert_eq!(result["answer"], "Done, working from the summary.");
}

#[test]
fn unfinished_todos_get_a_nudge_before_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "  runDefaults: {planMode: true}";
    let rules = r#"- match: {role: lead, call: 1}
  respond:
    toolCalls:
      - name: write_todos
        arguments: {todos: [{content: "Write the note", status: in_progress}]}
- match: {role: lead, call: 2}
  respond: {content: "Finished early."}
- match: {role: lead, lastMessage: {role: user, contains: "todo"}}
  respond:
    toolCalls:
      - name: write_todos
        arguments: {todos: [{content: "Write the note", status: completed}]}
- match: {role: lead, lastMessage: {role: tool}}
  respond: {content: "All todos done."}
"#;
    let result = run(dir.path(), "todo", &manifest(spec, rules), "Write a note.");
    assert_eq!(result["stopReason"], "completed", "{result}");
    assert_eq!(result["answer"], "All todos done.");
}

#[test]
fn memory_written_by_one_run_is_injected_into_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "  memory: {enabled: true}";
    let rules = r#"- match: {purpose: memory}
  respond:
    content: '{"operations": [{"op": "add", "content": "Prefers answers as tables", "category": "preference", "confidence": 0.95}]}'
- match: {role: lead, anyMessage: {contains: "Prefers answers as tables"}}
  respond: {content: "I remember: you prefer tables."}
- match: {role: lead}
  respond: {content: "Noted."}
"#;
    let agent = manifest(spec, rules);
    let first = run(dir.path(), "first", &agent, "I prefer answers as tables.");
    assert_eq!(first["answer"], "Noted.");
    let stored = std::fs::read_to_string(dir.path().join("memory/scenario.json")).unwrap();
    assert!(stored.contains("Prefers answers as tables"), "{stored}");

    let second = run(dir.path(), "second", &agent, "What do you know about me?");
    assert_eq!(second["answer"], "I remember: you prefer tables.");
}

/// A lead that keeps working past `maxModelCalls: 2`, saying what it has so far.
fn call_limited_agent() -> String {
    let spec = "  runDefaults: {maxModelCalls: 2}";
    let rules = r#"- match: {role: lead, call: 1}
  respond:
    content: "Looking around."
    toolCalls: [{name: ls, arguments: {description: look, path: /mnt/user-data/workspace}}]
- match: {role: lead, call: 2}
  respond:
    content: "Partial findings: the workspace is empty."
    toolCalls: [{name: ls, arguments: {description: look, path: /mnt/user-data/uploads}}]
"#;
    manifest(spec, rules)
}

#[test]
fn a_run_stopped_by_a_limit_exits_4_with_the_partial_answer() {
    let dir = tempfile::tempdir().unwrap();
    let output = run_binary(dir.path(), "limit", &call_limited_agent(), "Look.", false);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "stderr:\n{stderr}");
    assert_eq!(stdout, "Partial findings: the workspace is empty.\n");
    assert!(
        stderr.contains("stopped: ModelCallLimit (the run used its maxModelCalls)"),
        "{stderr}"
    );
}

#[test]
fn a_run_stopped_by_a_limit_reports_it_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let output = run_binary(dir.path(), "limit", &call_limited_agent(), "Look.", true);
    assert_eq!(output.status.code(), Some(4));
    let mut events = events_of(&output);
    let result = events.pop().unwrap();
    assert_eq!(result["stopReason"], "modelCallLimit", "{result}");
    assert_eq!(
        result["answer"],
        "Partial findings: the workspace is empty."
    );
    let stopped: Vec<&Value> = events.iter().filter(|e| e["event"] == "stopped").collect();
    assert_eq!(
        stopped,
        [&serde_json::json!({"event": "stopped", "agent": "lead", "reason": "modelCallLimit"})]
    );
}

#[test]
fn fifty_task_calls_in_one_answer_run_max_concurrent_subagents() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "  subagents: {enabled: true, maxConcurrent: 3, maxTotal: 6}";
    let calls: String = (0..55)
        .map(|i| {
            format!(
                "      - {{name: task, arguments: {{description: \"topic {i}\", prompt: \"Research topic {i}.\", subagent_type: general-purpose}}}}\n"
            )
        })
        .collect();
    let rules = format!(
        "- match: {{role: lead, call: 1}}
  respond:
    toolCalls:
{calls}- match: {{role: subagent}}
  respond: {{content: \"Topic researched.\"}}
- match: {{role: lead, call: 2}}
  respond: {{content: \"Three topics done.\"}}
"
    );
    let mut events = run_events(dir.path(), "fanout", &manifest(spec, &rules), "Research.");
    let result = events.pop().unwrap();
    assert_eq!(result["stopReason"], "completed", "{result}");
    assert_eq!(result["answer"], "Three topics done.");
    let subagents = events
        .iter()
        .filter(|e| e["event"] == "tool_finished" && e["name"] == "task" && e["ok"] == true)
        .count();
    assert_eq!(subagents, 3, "{events:?}");
}

#[test]
fn terminal_escapes_from_tools_and_the_model_are_neutralized() {
    let dir = tempfile::tempdir().unwrap();
    let rules = r#"- match: {role: lead, call: 1}
  respond:
    toolCalls:
      - name: bash
        arguments: {description: title, command: "printf '\\033]0;pwned\\007\\033[2Jcleared'"}
- match: {role: lead, call: 2}
  respond: {content: "Done \u001b[31mred\u009b1m \u202egnp.exe"}
"#;
    let agent = manifest("", rules);
    let output = run_binary(dir.path(), "escapes", &agent, "Set the title.", false);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
            assert!(!text.contains(bad), "{name} carries {bad:?}: {text:?}");
        }
    }
    assert_eq!(stdout, "Done \\u{1b}[31mred\\u{9b}1m \\u{202e}gnp.exe\n");
    assert!(
        stderr.contains("✓ bash: \\u{1b}]0;pwned\\u{7}\\u{1b}[2Jcleared"),
        "{stderr}"
    );

    let output = run_binary(dir.path(), "escapes-json", &agent, "Set the title.", true);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !stdout.contains('\u{9b}') && !stdout.contains('\u{202e}'),
        "{stdout:?}"
    );
    assert!(
        stdout.contains(r"Done \u001b[31mred\u009b1m \u202egnp.exe"),
        "{stdout}"
    );
    let result = events_of(&output).pop().unwrap();
    assert_eq!(
        result["answer"],
        "Done \u{1b}[31mred\u{9b}1m \u{202e}gnp.exe"
    );
}

#[test]
fn a_warning_is_printed_once_without_colour_when_stderr_is_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let rules = r#"- match: {role: lead, call: 1}
  times: 1
  respond:
    error: {kind: server, status: 503, message: "overloaded"}
- match: {role: lead}
  respond: {content: "Answered after a retry."}
"#;
    let output = run_binary(dir.path(), "retry", &manifest("", rules), "Hi.", false);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Answered after a retry.\n"
    );
    assert_eq!(stderr.matches("overloaded").count(), 1, "{stderr}");
    assert!(stderr.contains("[lead] warning: "), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a file: {stderr:?}"
    );
}
