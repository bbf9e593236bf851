//! A Run's pod without a cluster: the real `herd-runner sandbox` serving on a unix socket over
//! a `/mnt`-like root (an input ConfigMap mounted in the kubelet's layout), and the real
//! `herd-runner pod` with the environment the operator's Pod sets, against a real HTTPS run
//! API (`test_server`, certificates from the operator's code), driven by a scripted model.

// Test helpers outside #[test] functions: a failure to set up must fail the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "../src/control/run_api/test_server.rs"]
mod test_server;

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use test_server::{Canned, Recorded, Reply, TestRunApi, canned, serving};

const BIN: &str = env!("CARGO_BIN_EXE_herd-runner");
const TOKEN: &str = "projected-token-for-herd.dev";

/// The folders of one pod: what the kubelet would mount in each container.
struct PodDirs {
    _dir: tempfile::TempDir,
    /// `HERD_ROOT` of the sandbox (`user-data/`, `skills/`, `inputs/<i>`).
    root: PathBuf,
    socket: PathBuf,
    token: PathBuf,
    ca: PathBuf,
    termination_log: PathBuf,
    tmp: PathBuf,
}

impl PodDirs {
    fn new(ca_pem: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("mnt");
        for sub in ["user-data", "skills/public", "skills/custom"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        let secrets = base.join("herd.dev");
        std::fs::create_dir_all(&secrets).unwrap();
        std::fs::write(secrets.join("token"), TOKEN).unwrap();
        std::fs::write(secrets.join("ca.crt"), ca_pem).unwrap();
        let tmp = base.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        PodDirs {
            socket: base.join("run/herd/sandbox.sock"),
            token: secrets.join("token"),
            ca: secrets.join("ca.crt"),
            termination_log: base.join("termination-log"),
            root,
            tmp,
            _dir: dir,
        }
    }

    /// Input `index` as the kubelet mounts a ConfigMap: keys are links into `..data`.
    fn mount_input(&self, index: usize, files: &[(&str, &str)]) {
        let dir = self.root.join("inputs").join(index.to_string());
        let version = dir.join("..2026_05_01_10_00_00.000000001");
        std::fs::create_dir_all(&version).unwrap();
        for (name, text) in files {
            std::fs::write(version.join(name), text).unwrap();
            symlink(format!("..data/{name}"), dir.join(name)).unwrap();
        }
        symlink(version.file_name().unwrap(), dir.join("..data")).unwrap();
    }

    fn sandbox_command(&self) -> Command {
        let mut command = Command::new(BIN);
        command
            .arg("sandbox")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.tmp)
            .env("TMPDIR", &self.tmp)
            .env("HERD_ROOT", &self.root)
            .env("HERD_SANDBOX_SOCKET", &self.socket);
        command
    }

    /// `herd-runner sandbox`, once its startup probe passes.
    fn start_sandbox(&self) -> Running {
        assert!(!self.ready(), "no sandbox yet");
        let child = self
            .sandbox_command()
            .stdout(Stdio::null())
            .spawn()
            .expect("herd-runner sandbox starts");
        let running = Running(child);
        let until = Instant::now() + Duration::from_secs(30);
        while !self.ready() {
            assert!(Instant::now() < until, "the sandbox never became ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        running
    }

    /// `herd-runner sandbox --ready`, the Pod's startup probe.
    fn ready(&self) -> bool {
        let output = self
            .sandbox_command()
            .arg("--ready")
            .output()
            .expect("the probe runs");
        output.status.success()
    }

    /// `herd-runner pod` with the `agent` container's environment, serving `api_url`.
    fn start_pod(&self, api_url: &str) -> Running {
        self.start_pod_attempt(api_url, 1)
    }

    /// Starts the sandbox, then `herd-runner pod` of `attempt`, which must exit 0 within a
    /// minute.
    fn run_to_success(&self, api_url: &str, attempt: u32) {
        let _sandbox = self.start_sandbox();
        let (status, stderr) = self
            .start_pod_attempt(api_url, attempt)
            .exit_within(Duration::from_secs(60));
        assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
    }

    /// `herd-runner pod` of attempt `attempt`.
    fn start_pod_attempt(&self, api_url: &str, attempt: u32) -> Running {
        let child = Command::new(BIN)
            .arg("pod")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HERD_API_URL", api_url)
            .env("HERD_TOKEN_FILE", &self.token)
            .env("HERD_CA_FILE", &self.ca)
            .env("HERD_ROOT", "/mnt")
            .env("HERD_SANDBOX_SOCKET", &self.socket)
            .env("HERD_TERMINATION_LOG", &self.termination_log)
            .env("HERD_RUN_NAMESPACE", "team-a")
            .env("HERD_RUN_NAME", "market-map")
            .env("HERD_ATTEMPT", attempt.to_string())
            .env("HERD_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("herd-runner pod starts");
        Running(child)
    }

    fn termination_message(&self) -> String {
        std::fs::read_to_string(&self.termination_log).unwrap_or_default()
    }
}

/// A child process, killed when dropped.
struct Running(Child);

impl Running {
    /// Waits up to `limit` for the exit; the stderr read after it.
    fn exit_within(&mut self, limit: Duration) -> (ExitStatus, String) {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                let mut stderr = String::new();
                if let Some(mut pipe) = self.0.stderr.take() {
                    std::io::Read::read_to_string(&mut pipe, &mut stderr).unwrap();
                }
                return (status, stderr);
            }
            assert!(Instant::now() < until, "no exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The run API in a runtime of its own, so that a test can take it away.
struct Api {
    runtime: tokio::runtime::Runtime,
    server: TestRunApi,
}

impl Api {
    fn start(responder: test_server::Responder) -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let server = runtime.block_on(TestRunApi::start(responder));
        Api { runtime, server }
    }

    /// Stops answering at once: the port closes and open connections break.
    fn vanish(self) {
        drop(self.server);
        self.runtime.shutdown_background();
    }

    fn wait_for(&self, suffix: &str, limit: Duration) -> Vec<Recorded> {
        let until = Instant::now() + limit;
        loop {
            let seen = self.server.requests_to(suffix);
            if !seen.is_empty() {
                return seen;
            }
            assert!(
                Instant::now() < until,
                "no request to {suffix} in {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The `RunConfig` the run API gives for a Run of an Agent with the scripted model `script`
/// (subagents and memory off, as in this issue's scenarios).
fn run_config(script: &str, seconds_left: u64, inputs: Value) -> Value {
    json!({
        "attempt": 1,
        "agent": {
            "model": {"provider": "scripted", "name": "pod-script"},
            "subagents": {"enabled": false},
            "memory": {"enabled": false},
            "runDefaults": {"timeout": "30m", "maxModelCalls": 20}
        },
        "agentName": "analyst",
        "script": script,
        "run": {
            "agentRef": {"name": "analyst"},
            "task": "Summarize the quarterly numbers.",
            "inputs": inputs
        },
        "depth": 0,
        "secondsLeft": seconds_left,
        "maxModelCalls": 20
    })
}

const SUMMARY: &str = "# Q1\nNorth leads with 12.\n";

/// Reads the input, writes and presents a summary, answers.
fn summarizing_script() -> String {
    format!(
        r#"rules:
  - match: {{purpose: title}}
    respond: {{content: "Q1 numbers"}}
  - match: {{role: lead, call: 1}}
    respond:
      toolCalls:
        - name: bash
          arguments: {{description: "Read the input", command: "cat /mnt/user-data/uploads/reports/q1.csv"}}
  - match: {{role: lead, call: 2, lastMessage: {{role: tool, contains: "north,12"}}}}
    respond:
      toolCalls:
        - name: write_file
          arguments:
            description: "Write the summary"
            path: /mnt/user-data/outputs/summary.md
            content: {summary}
  - match: {{role: lead, call: 3}}
    respond:
      toolCalls:
        - name: present_files
          arguments: {{filepaths: [/mnt/user-data/outputs/summary.md]}}
  - match: {{role: lead, call: 4}}
    respond: {{content: "North leads Q1.", usage: {{inputTokens: 90, outputTokens: 4}}}}
"#,
        summary = serde_json::to_string(SUMMARY).unwrap()
    )
}

#[test]
fn the_pod_copies_the_inputs_runs_the_tools_in_the_sandbox_and_posts_the_result() {
    let inputs = json!([{"configMapRef": {"name": "q1"}, "path": "reports"}]);
    let api = Api::start(serving(run_config(&summarizing_script(), 300, inputs)));
    let pod = PodDirs::new(&api.server.ca_pem);
    pod.mount_input(0, &[("q1.csv", "region,units\nnorth,12\nsouth,7\n")]);
    pod.run_to_success(&api.server.url, 1);
    assert_eq!(
        std::fs::read_to_string(pod.root.join("user-data/uploads/reports/q1.csv")).unwrap(),
        "region,units\nnorth,12\nsouth,7\n",
        "the input is a file in uploads/<path>"
    );

    let requests = api.server.requests();
    assert_eq!(requests[0].path, "/v1/runs/team-a/market-map/config");
    for request in &requests {
        assert_eq!(
            request.authorization.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str()),
            "{}",
            request.path
        );
    }
    let results = api.server.requests_to("/result");
    assert_eq!(results.len(), 1);
    let result = results[0].json();
    assert_eq!(result["attempt"], 1);
    assert_eq!(result["stopReason"], "completed", "{result}");
    assert_eq!(result["text"], "North leads Q1.");
    assert_eq!(result["title"], "Q1 numbers");
    let usage = &result["usage"];
    assert!(usage["modelCalls"].as_u64().unwrap() >= 4, "{usage}");
    assert_eq!(usage["toolCalls"], 3, "{usage}");
    assert!(usage["outputTokens"].as_u64().unwrap() >= 4, "{usage}");
    let files = result["files"].as_array().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0]["path"], "/mnt/user-data/outputs/summary.md");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(files[0]["dataBase64"].as_str().unwrap())
        .unwrap();
    assert_eq!(bytes, SUMMARY.as_bytes());
    assert_eq!(pod.termination_message(), "", "nothing to tell the kubelet");
}

#[test]
fn a_result_that_cannot_be_posted_by_the_deadline_goes_to_the_termination_log() {
    let answer = format!("Long answer. {}", "ünïcode and \"quotes\" ".repeat(400));
    let script = format!(
        r#"rules:
  - match: {{purpose: title}}
    respond: {{content: "t"}}
  - match: {{role: lead, call: 1}}
    respond:
      toolCalls:
        - name: bash
          arguments: {{description: "Work a while", command: "sleep 2; echo worked"}}
  - match: {{role: lead, call: 2}}
    respond: {{content: {answer}}}
"#,
        answer = serde_json::to_string(&answer).unwrap()
    );
    let api = Api::start(serving(run_config(&script, 8, json!([]))));
    let pod = PodDirs::new(&api.server.ca_pem);
    let _sandbox = pod.start_sandbox();
    let mut runner = pod.start_pod(&api.server.url);
    api.wait_for("/config", Duration::from_secs(30));
    api.vanish();

    let (status, stderr) = runner.exit_within(Duration::from_secs(40));
    assert_eq!(status.code(), Some(75), "stderr:\n{stderr}");
    let message = pod.termination_message();
    assert!(message.len() <= 4000, "{} bytes", message.len());
    let report: Value = serde_json::from_str(&message).unwrap();
    assert_eq!(report["stopReason"], "completed");
    let text = report["text"].as_str().unwrap();
    assert!(text.len() > 3000 && answer.starts_with(text), "{text}");
    assert!(
        stderr.contains("the result could not be posted"),
        "{stderr}"
    );
}

/// Works long in its first tool call; resumed after an interruption, it answers.
const INTERRUPTIBLE_SCRIPT: &str = r#"rules:
  - match: {purpose: title}
    respond: {content: "t"}
  - match: {lastMessage: {role: user, contains: "The run was interrupted (SIGTERM"}}
    respond: {content: "Resumed: the long work is redone and done."}
  - match: {role: lead, call: 1}
    respond:
      toolCalls:
        - name: bash
          arguments: {description: "Work long", command: "touch /mnt/user-data/workspace/started; sleep 30"}
  - match: {role: lead, call: 2}
    respond: {content: "never"}
"#;

#[test]
fn sigterm_posts_the_checkpoint_and_no_result_and_the_next_attempt_resumes() {
    let script = INTERRUPTIBLE_SCRIPT;
    let api = Api::start(serving(run_config(script, 300, json!([]))));
    let pod = PodDirs::new(&api.server.ca_pem);
    let mut sandbox = pod.start_sandbox();
    let mut runner = pod.start_pod(&api.server.url);
    let started = pod.root.join("user-data/workspace/started");
    let until = Instant::now() + Duration::from_secs(30);
    while !started.exists() {
        assert!(Instant::now() < until, "the tool call never started");
        std::thread::sleep(Duration::from_millis(20));
    }

    let sent = Instant::now();
    runner.terminate();
    let (status, stderr) = runner.exit_within(Duration::from_secs(20));
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(143), "stderr:\n{stderr}");
    assert_eq!(
        pod.termination_message(),
        "stopped by SIGTERM; the checkpoint is posted"
    );
    assert!(
        api.server.requests_to("/result").is_empty(),
        "the operator decides how a deleted pod's Run ends"
    );
    let posted = api.server.requests_to("/checkpoint");
    assert_eq!(
        posted.len(),
        1,
        "the thread goes to the run API before the pod exits"
    );
    let checkpoint = posted[0].json();
    assert_eq!(checkpoint["attempt"], 1);

    // The sidecar gets SIGTERM too, its command still sleeping: it stops the command and
    // exits 0 within its short grace (as a container's PID 1 it would otherwise ignore the
    // signal until SIGKILL), a clean ending, not a container error.
    let sent = Instant::now();
    sandbox.terminate();
    let (status, stderr) = sandbox.exit_within(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{:?}",
        sent.elapsed()
    );

    // The next attempt (the Run's Pod was evicted) resumes from that checkpoint on a new
    // pod, told it was interrupted, and answers.
    let mut config = run_config(script, 250, json!([]));
    config["attempt"] = json!(2);
    config["checkpointGzipBase64"] = checkpoint["checkpointGzipBase64"].clone();
    let second = Api::start(serving(config));
    let next = PodDirs::new(&second.server.ca_pem);
    next.run_to_success(&second.server.url, 2);
    let result = second.server.requests_to("/result")[0].json();
    assert_eq!(result["attempt"], 2);
    assert_eq!(
        result["text"], "Resumed: the long work is redone and done.",
        "{result}"
    );
}

#[test]
fn a_bad_environment_or_an_unverified_run_api_fails_at_once_with_a_message() {
    let api = Api::start(std::sync::Arc::new(|_: &Recorded, _| {
        Reply::json(200, &json!({}))
    }));
    let other_ca = test_server::test_ca().cert;
    let pod = PodDirs::new(&other_ca);
    let (status, stderr) = pod
        .start_pod(&api.server.url)
        .exit_within(Duration::from_secs(30));
    assert_eq!(status.code(), Some(1), "stderr:\n{stderr}");
    let message = pod.termination_message();
    assert!(
        message.starts_with("cannot read the Run's config"),
        "{message}"
    );
    assert!(api.server.requests().is_empty(), "no request without TLS");

    let (status, _) = Running(
        Command::new(BIN)
            .arg("pod")
            .env_clear()
            .env("HERD_TERMINATION_LOG", &pod.termination_log)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
    .exit_within(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1));
    assert!(
        pod.termination_message()
            .contains("HERD_API_URL is unset; HERD_RUN_NAMESPACE is unset"),
        "{}",
        pod.termination_message()
    );
}

/// Asks which market, then answers from the answer it got.
const ASKING_SCRIPT: &str = r#"rules:
  - match: {purpose: title}
    respond: {content: "Heat pumps"}
  - match: {role: lead, call: 1}
    respond:
      toolCalls:
        - name: bash
          arguments: {description: "Take notes", command: "echo draft > /mnt/user-data/workspace/notes.txt"}
  - match: {role: lead, call: 2}
    respond:
      toolCalls:
        - name: ask_clarification
          arguments: {question: "Which market?", clarification_type: missing_info}
  - match: {role: lead, call: 3, anyMessage: {role: user, contains: "was not persistent"}}
    respond: {content: "Europe, from scratch: 3 vendors."}
  - match: {role: lead, call: 3, anyMessage: {role: user, contains: "Europe only"}}
    respond: {content: "Europe: 3 vendors."}
"#;

/// The question id of an answers poll (`.../answers/<id>`).
fn polled_id(request: &Recorded) -> String {
    request
        .path
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_question_waits_in_the_pod_until_a_later_poll_brings_the_answer() {
    let config = run_config(ASKING_SCRIPT, 300, json!([]));
    let answers = std::sync::Arc::new(|request: &Recorded, earlier: usize| {
        if request.path.contains("/answers/") {
            let reply = if earlier < 2 {
                json!({"secondsLeft": 280})
            } else {
                json!({"answer": {"id": polled_id(request), "answer": "Europe only"},
                    "secondsLeft": 270})
            };
            return Some(Reply::json(200, &reply).after(Duration::from_millis(300)));
        }
        None
    });
    let base = canned(Canned {
        config,
        ..Canned::default()
    });
    let api = Api::start(std::sync::Arc::new(move |request: &Recorded, earlier| {
        answers(request, earlier).unwrap_or_else(|| base(request, earlier))
    }));
    let pod = PodDirs::new(&api.server.ca_pem);
    pod.run_to_success(&api.server.url, 1);
    let asked = api.server.requests_to("/clarification");
    assert_eq!(asked.len(), 1);
    let question = asked[0].json();
    assert_eq!(question["attempt"], 1);
    assert_eq!(question["clarification"]["question"], "Which market?");
    assert_eq!(question["clarification"]["id"], "q-call_1_0");
    assert!(question["checkpointGzipBase64"].as_str().unwrap().len() > 100);
    let polls = api.server.requests_to("/answers/q-call_1_0");
    assert_eq!(polls.len(), 3, "polled until the answer came");
    assert!(
        polls
            .iter()
            .all(|poll| poll.query.as_deref() == Some("wait=55"))
    );
    let result = api.server.requests_to("/result")[0].json();
    assert_eq!(result["stopReason"], "completed", "{result}");
    assert_eq!(result["text"], "Europe: 3 vendors.");
    assert!(
        result["seq"].as_u64().unwrap() > question["seq"].as_u64().unwrap(),
        "the result comes after the question"
    );
}

#[test]
fn a_pod_lost_while_it_waits_is_resumed_from_the_checkpoint_by_the_next_attempt() {
    // Attempt 1 asks, and no answer comes before its pod is lost.
    let first = Api::start(canned(Canned {
        config: run_config(ASKING_SCRIPT, 300, json!([])),
        answer_polls: vec![
            Reply::json(200, &json!({"secondsLeft": 280})).after(Duration::from_millis(500)),
        ],
        ..Canned::default()
    }));
    let lost = PodDirs::new(&first.server.ca_pem);
    let sandbox = lost.start_sandbox();
    let runner = lost.start_pod(&first.server.url);
    let asked = first.wait_for("/clarification", Duration::from_secs(60));
    let question = asked[0].json();
    assert!(lost.root.join("user-data/workspace/notes.txt").exists());
    drop(runner);
    drop(sandbox);

    // Attempt 2 on a new pod: an emptyDir workspace, the answer in spec.responses.
    let mut config = run_config(ASKING_SCRIPT, 250, json!([]));
    config["attempt"] = json!(2);
    config["checkpointGzipBase64"] = question["checkpointGzipBase64"].clone();
    config["responses"] = json!([{"id": question["clarification"]["id"], "answer": "Europe only"}]);
    let second = Api::start(serving(config));
    let pod = PodDirs::new(&second.server.ca_pem);
    pod.run_to_success(&second.server.url, 2);
    assert!(
        second.server.requests_to("/clarification").is_empty()
            && second.server.requests_to("/answers/q-call_1_0").is_empty(),
        "answered already: nothing asked again"
    );
    let result = second.server.requests_to("/result")[0].json();
    assert_eq!(result["attempt"], 2);
    assert_eq!(
        result["text"], "Europe, from scratch: 3 vendors.",
        "the model was told its files are gone, then read the answer: {result}"
    );
    assert_eq!(result["usage"]["modelCalls"].as_u64(), Some(3), "{result}");
    assert!(!pod.root.join("user-data/workspace/notes.txt").exists());
}

#[test]
fn a_childs_files_land_in_the_sandboxs_outputs_under_the_childs_name() {
    let script = r#"rules:
  - match: {purpose: title}
    respond: {content: "Vendors"}
  - match: {role: lead, call: 1}
    respond:
      toolCalls:
        - name: task
          arguments: {description: "Survey vendors", prompt: "List the vendors.", subagent_type: general-purpose}
  - match: {role: lead, call: 2, lastMessage: {role: tool, contains: "/mnt/user-data/outputs/market-map-1a2b3c4d/lists/vendors.md (14 bytes)"}}
    respond: {content: "The vendors are in the child's folder."}
"#;
    let mut config = run_config(script, 300, json!([]));
    config["agent"]["subagents"] = json!({"enabled": true});
    let child = "market-map-1a2b3c4d";
    let api = Api::start(canned(Canned {
        config,
        child_polls: vec![
            Reply::json(200, &json!({"name": child})).after(Duration::from_millis(200)),
            Reply::json(
                200,
                &json!({"name": child, "status": "completed", "result": "3 vendors.",
                    "artifacts": [{"path": "/mnt/user-data/outputs/lists/vendors.md", "size": 14}]}),
            ),
        ],
        child_files: vec![Reply::file(
            "/mnt/user-data/outputs/lists/vendors.md",
            b"# Vendors\nA B\n",
        )],
        ..Canned::default()
    }));
    let pod = PodDirs::new(&api.server.ca_pem);
    pod.run_to_success(&api.server.url, 1);
    let started = api.server.requests_to("/children");
    assert_eq!(started.len(), 1);
    let request = started[0].json();
    assert_eq!(request["subagentType"], "general-purpose");
    assert_eq!(request["modelCallsLeft"], 19, "{request}");
    assert!(request["secondsLeft"].as_u64().unwrap() <= 300, "{request}");
    assert_eq!(
        std::fs::read_to_string(
            pod.root
                .join(format!("user-data/outputs/{child}/lists/vendors.md"))
        )
        .unwrap(),
        "# Vendors\nA B\n"
    );
    let result = api.server.requests_to("/result")[0].json();
    assert_eq!(
        result["text"], "The vendors are in the child's folder.",
        "{result}"
    );
}
