//! MCP tools through `herd-runner run`, against real servers from PyPI: the reference stdio
//! server `mcp-server-time`, and a streamable-HTTP server written with the official Python SDK
//! (`fixtures/mcp/http_server.py`) that requires a header, whose value the run takes from a
//! Secret manifest. A scripted model calls their tools.
//!
//! The servers live in a virtualenv that `scripts/test-all` (and so `.ci/run`) installs:
//! `$HERD_MCP_VENV`, else `${XDG_CACHE_HOME:-$HOME/.cache}/herd/mcp-venv`. Without it the tests
//! say so and skip; with `CI=true` they fail.

// Test helpers outside #[test] functions: a failure to set up must fail the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// The header value the HTTP server accepts.
const KEY: &str = "herd-mcp-test-key-9d2e";

fn venv() -> Option<PathBuf> {
    let dir = std::env::var_os("HERD_MCP_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
            Some(cache.join("herd/mcp-venv"))
        })?;
    let ready = dir.join("bin/python").exists() && dir.join("bin/mcp-server-time").exists();
    if ready {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the MCP test servers must be installed in CI, but {} has none (scripts/test-all \
         installs them)",
        dir.display()
    );
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED MCP test: no MCP servers in {} (scripts/test-all installs them; CI=true makes \
         this a failure)",
        dir.display()
    );
    None
}

/// The HTTP fixture server, stopped when dropped.
struct HttpServer {
    child: Child,
    port: u16,
}

impl HttpServer {
    fn start(venv: &Path, many: bool) -> HttpServer {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/http_server.py");
        let mut command = Command::new(venv.join("bin/python"));
        command.arg(script).env("HERD_TEST_MCP_KEY", KEY);
        if many {
            command.arg("--many");
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the HTTP MCP server starts");
        let stdout = child.stdout.take().expect("its stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("its port");
        let port = line.trim().parse().expect("a port number");
        HttpServer { child, port }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An Agent with both servers, the header's Secret holding `key`, and a scripted model
/// following `rules`.
fn manifests(venv: &Path, port: u16, key: &str, rules: &str) -> String {
    let time = venv.join("bin/mcp-server-time");
    let indented: String = rules
        .lines()
        .map(|line| format!("      {line}\n"))
        .collect();
    format!(
        "apiVersion: herd.dev/v1alpha1
kind: Agent
metadata: {{name: mcp-test}}
spec:
  model:
    provider: scripted
    name: script
    scriptFrom: {{configMapKeyRef: {{name: script, key: script.yaml}}}}
  toolGroups: []
  mcp:
    servers:
      - name: catalog
        url: http://127.0.0.1:{port}/mcp
        headers:
          - name: X-Api-Key
            secretKeyRef: {{name: catalog-key, key: key}}
      - name: time
        command: [{time}, --local-timezone, UTC]
---
apiVersion: v1
kind: Secret
metadata:
  name: catalog-key
  labels: {{herd.dev/model-credentials: \"true\"}}
stringData: {{key: {key}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: script}}
data:
  script.yaml: |
    rules:
      - match: {{purpose: title}}
        respond: {{content: MCP test}}
{indented}",
        time = time.display(),
    )
}

/// Runs `herd-runner run --json` on `manifests` with `task`, the tools in-process (the venv
/// lives in the home folder, which the confined sandbox hides).
fn run(manifests: &str, task: &str) -> (Output, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.yaml");
    std::fs::write(&file, manifests).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herd-runner"))
        .args(["run", "--json", "--sandbox", "off", "-f"])
        .arg(&file)
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .arg(task)
        .env("HERD_HOME", dir.path())
        .output()
        .expect("herd-runner runs");
    let events = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    (output, events)
}

fn finished<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event"] == "tool_finished" && e["name"] == name)
        .collect()
}

fn answer(events: &[Value]) -> String {
    events
        .iter()
        .find(|e| e["event"] == "result")
        .and_then(|e| e["answer"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_models_calls_reach_both_servers_and_the_results_reach_the_model() {
    let Some(venv) = venv() else { return };
    let server = HttpServer::start(&venv, false);
    let rules = "- match: {call: 1}
  respond:
    toolCalls:
      - name: catalog__lookup_release
        arguments: {project: herd}
      - name: time__get_current_time
        arguments: {timezone: Asia/Tokyo}
      - name: catalog__fail_always
        arguments: {reason: the warehouse is closed}
- match: {call: 2, anyMessage: {role: tool, contains: \"herd 4.2.0\"}}
  respond: {content: \"the model saw the release\"}
- match: {call: 2}
  respond: {content: \"the results never reached the model\"}";
    let (output, events) = run(&manifests(&venv, server.port, KEY, rules), "Which release?");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(answer(&events), "the model saw the release", "{events:?}");
    let release = finished(&events, "catalog__lookup_release");
    assert_eq!(release[0]["ok"], true);
    assert!(
        release[0]["preview"]
            .as_str()
            .unwrap()
            .contains("herd 4.2.0")
    );
    let time = finished(&events, "time__get_current_time");
    assert_eq!(time[0]["ok"], true, "{events:?}");
    let failing = finished(&events, "catalog__fail_always");
    assert_eq!(failing[0]["ok"], false);
    assert!(
        failing[0]["preview"]
            .as_str()
            .unwrap()
            .contains("the warehouse is closed"),
        "{failing:?}"
    );
    assert!(!stderr.contains(KEY) && !String::from_utf8_lossy(&output.stdout).contains(KEY));
}

#[test]
fn a_wrong_header_is_a_clear_warning_and_the_servers_tools_are_absent() {
    let Some(venv) = venv() else { return };
    let server = HttpServer::start(&venv, false);
    let rules = "- match: {call: 1}
  respond:
    toolCalls:
      - name: catalog__lookup_release
        arguments: {project: herd}
- match: {call: 2}
  respond: {content: done}";
    let (output, events) = run(
        &manifests(&venv, server.port, "not-the-key", rules),
        "Which release?",
    );
    assert_eq!(output.status.code(), Some(0));
    let warning = events
        .iter()
        .find(|e| e["event"] == "warning")
        .and_then(|e| e["message"].as_str())
        .unwrap_or_default();
    assert!(
        warning.starts_with("MCP server catalog did not start, so its tools are absent:")
            && warning.contains("refused the credentials")
            && warning.contains("401"),
        "{warning}"
    );
    assert!(!warning.contains("not-the-key"), "{warning}");
    let call = finished(&events, "catalog__lookup_release");
    assert_eq!(call[0]["ok"], false);
    assert!(
        call[0]["preview"]
            .as_str()
            .unwrap()
            .contains("there is no tool named")
    );
}

#[test]
fn deferred_tools_are_names_until_tool_search_promotes_one() {
    let Some(venv) = venv() else { return };
    let server = HttpServer::start(&venv, true);
    let rules = "- match: {call: 1}
  respond:
    toolCalls:
      - name: catalog__inventory_03
        arguments: {sku: A1}
- match: {call: 2}
  respond:
    toolCalls:
      - name: tool_search
        arguments: {query: \"select:catalog__inventory_03\"}
- match: {call: 3}
  respond:
    toolCalls:
      - name: catalog__inventory_03
        arguments: {sku: A1}
- match: {call: 4, lastMessage: {role: tool, contains: \"warehouse 3: 7 units of A1\"}}
  respond: {content: \"seven units\"}";
    let (output, events) = run(&manifests(&venv, server.port, KEY, rules), "Check stock");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let calls = finished(&events, "catalog__inventory_03");
    assert_eq!(calls.len(), 2, "{events:?}");
    assert_eq!(calls[0]["ok"], false);
    assert!(
        calls[0]["preview"]
            .as_str()
            .unwrap()
            .contains("deferred tool"),
        "{calls:?}"
    );
    let search = finished(&events, "tool_search");
    assert_eq!(search[0]["ok"], true);
    assert_eq!(calls[1]["ok"], true);
    assert_eq!(answer(&events), "seven units");
}
