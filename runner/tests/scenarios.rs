//! Observable behaviours of the middleware chain, end to end through `herd-runner run` with
//! scripted models: a loop stopped, a long conversation summarized, todos nudged to
//! completion, memory written by one run and injected into the next.

// Test helpers outside #[test] functions: a failure to spawn must fail the test loudly.
#![allow(clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// An Agent on a scripted model; `spec` is extra YAML under `spec:`, `rules` the script's
/// rules (indented by six spaces inside the ConfigMap).
fn manifest(spec: &str, rules: &str) -> String {
    let rules: String = rules
        .lines()
        .map(|line| format!("      {line}\n"))
        .collect();
    format!(
        "apiVersion: herd.dev/v1alpha1
kind: Agent
metadata: {{name: scenario}}
spec:
  model:
    provider: scripted
    name: scenario
    scriptFrom: {{configMapKeyRef: {{name: scenario-script, key: script.yaml}}}}
{spec}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: scenario-script}}
data:
  script.yaml: |
    rules:
      - match: {{purpose: title}}
        respond: {{content: Scenario}}
{rules}"
    )
}

/// Runs the agent with `--json` and returns the final `result` event.
fn run(dir: &Path, name: &str, manifest: &str, task: &str) -> Value {
    run_events(dir, name, manifest, task)
        .pop()
        .expect("at least the result event")
}

/// Runs the agent with `--json` and returns every event, the `result` last.
fn run_events(dir: &Path, name: &str, manifest: &str, task: &str) -> Vec<Value> {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, manifest).expect("write manifest");
    let output = Command::new(env!("CARGO_BIN_EXE_herd-runner"))
        .args(["run", "--json", "-f"])
        .arg(&file)
        .arg("--workdir")
        .arg(dir.join(format!("work-{name}")))
        .arg("--memory-dir")
        .arg(dir.join("memory"))
        .arg(task)
        .output()
        .expect("herd-runner runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let events: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON event per line"))
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
    let mut events = run_events(
        dir.path(),
        "loop",
        &manifest("", rules),
        "List the workspace.",
    );
    let result = events.pop().unwrap();
    assert_eq!(result["stopReason"], "loopDetected", "{result}");
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
