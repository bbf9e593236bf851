//! MCP tools through `herd-runner run`, against real servers from PyPI: the reference stdio
//! server `mcp-server-time`, and a streamable-HTTP server written with the official Python SDK
//! (`fixtures/mcp/http_server.py`) that requires a header, whose value the run takes from a
//! Secret manifest. A scripted model calls their tools.
//!
//! The servers live in a virtualenv that `scripts/test-all` (and so `.ci/run`) installs:
//! `$HERD_MCP_VENV`, else `${XDG_CACHE_HOME:-$HOME/.cache}/herd/mcp-venv`. Without it the tests
//! say so and skip; with `CI=true` they fail.
//!
//! Most runs use `--sandbox off`: the venv lives in the home folder, which the confined sandbox
//! hides. The confined test gives the sandbox a copy of the venv's packages in the workspace and
//! a Python of the same version from outside the home folders, as a user would install one.

// Test helpers outside #[test] functions: a failure to set up must fail the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod scripted;

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use scripted::{indented, scripted_agent};
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
/// following `rules`; the time server in the venv, in UTC.
fn manifests(venv: &Path, port: u16, key: &str, rules: &str) -> String {
    let time = venv.join("bin/mcp-server-time").display().to_string();
    let stdio = format!("[{time}, --local-timezone, UTC]");
    manifests_with(port, key, &[("time", &stdio, "[]")], rules)
}

/// An Agent with the HTTP server (its header's Secret holding `key`), the stdio servers
/// `(name, command, env)` (YAML flow sequences), and a scripted model following `rules`.
fn manifests_with(port: u16, key: &str, stdio: &[(&str, &str, &str)], rules: &str) -> String {
    let stdio: String = stdio
        .iter()
        .map(|(name, command, env)| {
            format!("      - name: {name}\n        command: {command}\n        env: {env}\n")
        })
        .collect();
    let spec = format!(
        "  toolGroups: []
  mcp:
    servers:
      - name: catalog
        url: http://127.0.0.1:{port}/mcp
        headers:
          - name: X-Api-Key
            secretKeyRef: {{name: catalog-key, key: key}}
{stdio}"
    );
    let script = format!(
        "rules:\n  - match: {{purpose: title}}\n    respond: {{content: MCP test}}\n{}",
        indented(rules, "  ")
    );
    format!(
        "{}---
apiVersion: v1
kind: Secret
metadata:
  name: catalog-key
  labels: {{herd.dev/model-credentials: \"true\"}}
stringData: {{key: {key}}}
",
        scripted_agent("mcp-test", "script", &spec, &script)
    )
}

/// Runs `herd-runner run --json` on `manifests` with `task`, the tools in-process (the venv
/// lives in the home folder, which the confined sandbox hides).
fn run(manifests: &str, task: &str) -> (Output, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    run_in(dir.path(), "off", manifests, task)
}

/// Runs `herd-runner run --json --sandbox <sandbox>` on `manifests` with `task`, its work
/// folder `dir/work`.
fn run_in(dir: &Path, sandbox: &str, manifests: &str, task: &str) -> (Output, Vec<Value>) {
    let file = dir.join("agent.yaml");
    std::fs::write(&file, manifests).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_herd-runner"))
        .args(["run", "--json", "--sandbox", sandbox, "-f"])
        .arg(&file)
        .arg("--workdir")
        .arg(dir.join("work"))
        .arg(task)
        .env("HERD_HOME", dir)
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

/// What the tool call's `tool_finished` event shows of its result.
fn preview(finished: &Value) -> &str {
    finished["preview"].as_str().unwrap_or_default()
}

fn warnings(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e["event"] == "warning")
        .filter_map(|e| e["message"].as_str())
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
    assert!(preview(release[0]).contains("herd 4.2.0"));
    let time = finished(&events, "time__get_current_time");
    assert_eq!(time[0]["ok"], true, "{events:?}");
    let failing = finished(&events, "catalog__fail_always");
    assert_eq!(failing[0]["ok"], false);
    assert!(
        preview(failing[0]).contains("the warehouse is closed"),
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
    assert!(preview(call[0]).contains("there is no tool named"));
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
    assert!(preview(calls[0]).contains("deferred tool"), "{calls:?}");
    let search = finished(&events, "tool_search");
    assert_eq!(search[0]["ok"], true);
    assert_eq!(calls[1]["ok"], true);
    assert_eq!(answer(&events), "seven units");
}

/// `mcp-server-time` refuses an unknown timezone at start, on its standard error: the run's
/// warning carries those words after the reason. The timezone given is the HTTP header's
/// secret, so the server repeats a secret, and the warning shows it redacted.
#[test]
fn a_stdio_server_that_fails_at_start_is_a_warning_with_its_last_words() {
    let Some(venv) = venv() else { return };
    let server = HttpServer::start(&venv, false);
    let time = venv.join("bin/mcp-server-time").display().to_string();
    let broken = format!("[{time}, --local-timezone, {KEY}]");
    let rules = "- match: {call: 1}
  respond: {content: done}";
    let (output, events) = run(
        &manifests_with(server.port, KEY, &[("time", &broken, "[]")], rules),
        "What time is it?",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let warnings = warnings(&events);
    let warning = warnings
        .iter()
        .find(|w| w.starts_with("MCP server time did not start, so its tools are absent:"))
        .unwrap_or_else(|| panic!("{warnings:?}"));
    assert!(
        warning.contains("its standard error ended with:\n")
            && warning.contains("invalid --local-timezone '[REDACTED]': not a known IANA timezone"),
        "{warning}"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains(KEY));
    assert!(!stderr.contains(KEY), "{stderr}");
}

/// What the confined sandbox needs to run the venv's servers: a Python of the venv's version
/// outside the home folders (which the sandbox hides), or why there is none.
fn python_outside_home(venv: &Path) -> Result<PathBuf, String> {
    let config = std::fs::read_to_string(venv.join("pyvenv.cfg")).map_err(|e| e.to_string())?;
    let setting = |key: &str| {
        config.lines().find_map(|line| {
            let (name, value) = line.split_once('=')?;
            (name.trim() == key).then(|| value.trim().to_owned())
        })
    };
    let version = setting("version").ok_or("pyvenv.cfg names no version")?;
    let minor: Vec<&str> = version.split('.').take(2).collect();
    let name = format!("python{}", minor.join("."));
    let homes: Vec<PathBuf> = ["/home", "/root"]
        .iter()
        .map(PathBuf::from)
        .chain(std::env::var_os("HOME").map(PathBuf::from))
        .collect();
    let visible = |path: &Path| {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        real.is_file() && !homes.iter().any(|home| real.starts_with(home))
    };
    let candidates: Vec<PathBuf> = setting("home")
        .map(|home| Path::new(&home).join(&name))
        .into_iter()
        .chain(
            ["/usr/local/bin", "/usr/bin"]
                .iter()
                .map(|dir| Path::new(dir).join(&name)),
        )
        .collect();
    candidates
        .iter()
        .find(|path| visible(path))
        .cloned()
        .ok_or_else(|| {
            format!(
                "the venv's Python {version} lives in a home folder, which the confined sandbox \
             hides, and there is no {name} outside one (looked at {candidates:?})"
            )
        })
}

/// `herd-runner run` confines the sandbox by default on Linux (here `--sandbox strict`, so it
/// cannot quietly fall back): `mcp-server-time` runs inside it and its tool answers, and a
/// second copy that fails at start is a warning with its standard error, which comes back
/// through the sandbox's socket.
// Over 80 lines: one confined run with a working and a failing server; both outcomes are
// read from the same output.
#[test]
fn the_time_server_runs_in_the_confined_sandbox() {
    let Some(venv) = venv() else { return };
    let python = match python_outside_home(&venv) {
        Ok(python) => python,
        Err(why) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "the confined MCP test must run in CI: {why}"
            );
            let _ = writeln!(std::io::stderr(), "SKIPPED confined MCP test: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("work/user-data/workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let packages = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("site-packages"))
        .find(|path| path.is_dir())
        .expect("the venv's site-packages");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(&packages)
        .arg(workspace.join("mcp-site"))
        .status()
        .unwrap();
    assert!(copied.success());
    let python = python.display();
    let time = format!("[{python}, -m, mcp_server_time, --local-timezone, UTC]");
    let broken = format!("[{python}, -m, mcp_server_time, --local-timezone, Not/AZone]");
    let env = "[{name: PYTHONPATH, value: /mnt/user-data/workspace/mcp-site}]";
    let rules = "- match: {call: 1}
  respond:
    toolCalls:
      - name: time__get_current_time
        arguments: {timezone: Asia/Tokyo}
- match: {call: 2, lastMessage: {role: tool, contains: \"Asia/Tokyo\"}}
  respond: {content: \"the confined server answered\"}
- match: {call: 2}
  respond: {content: \"no answer from the confined server\"}";
    // No HTTP server listens on port 9: that server's failure is beside the point here.
    let manifests = manifests_with(
        9,
        KEY,
        &[("time", &time, env), ("broken", &broken, env)],
        rules,
    );
    let (output, events) = run_in(
        dir.path(),
        "strict",
        &manifests,
        "What time is it in Tokyo?",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{stderr}\nevents: {events:?}"
    );
    let calls = finished(&events, "time__get_current_time");
    assert_eq!(
        calls.first().map(|c| &c["ok"]),
        Some(&Value::Bool(true)),
        "{events:?}"
    );
    assert_eq!(
        answer(&events),
        "the confined server answered",
        "{events:?}"
    );
    let warnings = warnings(&events);
    let broken = warnings
        .iter()
        .find(|w| w.starts_with("MCP server broken did not start"))
        .unwrap_or_else(|| panic!("{warnings:?}"));
    assert!(
        broken.contains("invalid --local-timezone 'Not/AZone': not a known IANA timezone"),
        "{broken}"
    );
}
