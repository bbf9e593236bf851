//! The llama.cpp server shared by every test of the `llama` test binary, and `herd-runner run`
//! against it.
//!
//! How a test module uses it (see `wire.rs`):
//! - expose `pub fn tests() -> Vec<Trial>` and add it to the list in `llama.rs`;
//! - each test body is `harness::with_server(|server| { ... })`: it holds the one server slot
//!   (a mutex: one generation at a time), starts the server on first use, and skips with a
//!   message on stderr when no server can be had outside CI (under `CI=true` it fails);
//! - `server.openai_base()` (`…/v1`) and `server.anthropic_base()` (no `/v1`) are the two
//!   providers' base URLs, `server.post(path, body)` calls the server's own routes
//!   (`/apply-template`, `/tokenize`), [`wire_agent`] + [`run_agent`] (or [`herd_runner`])
//!   run the real binary against it, and [`relay`] lets a mock server stand in front of it.
//!
//! The server comes from `HERD_LLAMA_BASE_URL` (used as it is, never stopped) or is started
//! with `<repo>/../shared/llama/start <temp dir>` (`HERD_SHARED_DIR` overrides `../shared`) and
//! stopped by [`stop`], which `main` calls after the last test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use libtest_mimic::Failed;
use serde_json::Value;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Respond, ResponseTemplate};

/// The server as the tests see it.
#[derive(Debug)]
pub struct Server {
    /// `http://host:port`, without `/v1`.
    root: String,
    /// The folder `start` was given, when this binary started the server.
    started_in: Option<tempfile::TempDir>,
}

impl Server {
    /// Base URL for `provider: openai` (Chat Completions): `<root>/v1`.
    pub fn openai_base(&self) -> String {
        format!("{}/v1", self.root)
    }

    /// Base URL for `provider: anthropic` (Messages API): the root, without `/v1`.
    pub fn anthropic_base(&self) -> String {
        self.root.clone()
    }

    /// POSTs `body` to `path` on the server (e.g. `/tokenize`) and returns its JSON answer.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, Failed> {
        let url = format!("{}{path}", self.root);
        block_on(async move {
            let response = http_client()?
                .post(&url)
                .json(body)
                .send()
                .await
                .map_err(|e| format!("POST {url}: {e}"))?;
            let status = response.status();
            let text = response
                .text()
                .await
                .map_err(|e| format!("POST {url}: {e}"))?;
            if !status.is_success() {
                return Err(format!("POST {url}: {status}: {text}").into());
            }
            serde_json::from_str(&text).map_err(|e| format!("POST {url}: {e}: {text}").into())
        })
    }
}

/// What holding the slot gives: the server, or a reason to skip.
enum Slot {
    Ready(Server),
    Unavailable(String),
}

/// The one server of this binary (started on first use) and the slot lock around it.
static SERVER: Mutex<Option<Slot>> = Mutex::new(None);

/// Runs `test` with the server, holding the slot for its whole duration.
///
/// Without a server: under `CI=true` the test fails, elsewhere it passes after saying on
/// stderr that it was skipped.
pub fn with_server(
    name: &str,
    test: impl FnOnce(&Server) -> Result<(), Failed>,
) -> Result<(), Failed> {
    let mut slot = lock();
    let slot = slot.get_or_insert_with(start);
    match slot {
        Slot::Ready(server) => test(server),
        Slot::Unavailable(reason) if in_ci() => {
            Err(format!("no llama.cpp server (CI=true, so this fails): {reason}").into())
        }
        Slot::Unavailable(reason) => {
            eprintln!("skipped {name}: no llama.cpp server: {reason}");
            Ok(())
        }
    }
}

/// Stops the server if this binary started it. Called once, after the last test.
pub fn stop() {
    let Some(Slot::Ready(server)) = lock().take() else {
        return;
    };
    let Some(dir) = server.started_in else {
        return;
    };
    let status = Command::new("bash")
        .arg(llama_dir().join("stop"))
        .arg(dir.path())
        .status();
    if !status.is_ok_and(|s| s.success()) {
        eprintln!(
            "warning: could not stop the llama.cpp server started in {}",
            dir.path().display()
        );
    }
}

fn lock() -> MutexGuard<'static, Option<Slot>> {
    // A test that panicked while holding the slot leaves the server as usable as before.
    SERVER.lock().unwrap_or_else(PoisonError::into_inner)
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `llama/` of the shared test fixtures: `HERD_SHARED_DIR`, by default `<repo>/../shared` (a
/// git worktree elsewhere can point at the main checkout's).
fn llama_dir() -> PathBuf {
    std::env::var_os("HERD_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
        .join("llama")
}

fn start() -> Slot {
    if let Ok(url) = std::env::var("HERD_LLAMA_BASE_URL") {
        let root = url.trim_end_matches('/');
        let root = root.strip_suffix("/v1").unwrap_or(root).to_owned();
        return Slot::Ready(Server {
            root,
            started_in: None,
        });
    }
    let script = llama_dir().join("start");
    if !script.is_file() {
        return Slot::Unavailable(format!(
            "{} does not exist (set HERD_SHARED_DIR or HERD_LLAMA_BASE_URL)",
            script.display()
        ));
    }
    let dir = match tempfile::Builder::new().prefix("herd-llama-").tempdir() {
        Ok(dir) => dir,
        Err(e) => return Slot::Unavailable(format!("cannot make a temp dir: {e}")),
    };
    let output = match Command::new("bash").arg(&script).arg(dir.path()).output() {
        Ok(output) => output,
        Err(e) => return Slot::Unavailable(format!("cannot run {}: {e}", script.display())),
    };
    let url = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || url.is_empty() {
        // Whatever it managed to start must not outlive the tests.
        let _ = Command::new("bash")
            .arg(llama_dir().join("stop"))
            .arg(dir.path())
            .status();
        return Slot::Unavailable(format!(
            "{} failed ({}): {}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let root = url.strip_suffix("/v1").unwrap_or(&url).to_owned();
    Slot::Ready(Server {
        root,
        started_in: Some(dir),
    })
}

/// Runs a future on a small runtime of its own (tests run on plain threads).
pub fn block_on<T>(future: impl Future<Output = Result<T, Failed>>) -> Result<T, Failed> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?
        .block_on(future)
}

/// An HTTP client for talking to the server directly.
pub fn http_client() -> Result<reqwest::Client, Failed> {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // reqwest is built without a provider; losing a race to another installer is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}").into())
}

/// The two ways the runner talks to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
}

impl Provider {
    /// Both providers, for tests that cover each.
    pub const ALL: [Provider; 2] = [Provider::OpenAi, Provider::Anthropic];

    /// The Agent's `model.provider`.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }

    /// The base URL of this provider on `server`.
    pub fn base_url(self, server: &Server) -> String {
        match self {
            Provider::OpenAi => server.openai_base(),
            Provider::Anthropic => server.anthropic_base(),
        }
    }
}

/// A minimal Agent manifest for wire tests: no tool groups, skills or memory (a prompt of a
/// few hundred tokens), greedy sampling, at most `max_tokens` per answer, no retries.
pub fn wire_agent(provider: Provider, base_url: &str, max_tokens: u32) -> String {
    format!(
        "apiVersion: herd.dev/v1alpha1
kind: Agent
metadata:
  name: wire
spec:
  model:
    provider: {provider}
    name: smollm2
    baseURL: {base_url}
    temperature: 0
    maxTokens: {max_tokens}
    maxRetries: 0
    requestTimeout: 2m
  toolGroups: []
  skills: []
  memory:
    enabled: false
  runDefaults:
    maxModelCalls: 4
    timeout: 3m
",
        provider = provider.name()
    )
}

/// What `herd-runner` did.
#[derive(Debug)]
pub struct RunOutput {
    /// The exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl RunOutput {
    /// The JSON lines of `--json` output.
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The `result` event of `--json` output.
    pub fn result(&self) -> Result<Value, Failed> {
        self.json_lines()
            .into_iter()
            .find(|event| event["event"] == "result")
            .ok_or_else(|| format!("no result event in the output: {self:#?}").into())
    }
}

/// Runs the real `herd-runner` binary with `args` in `dir` (its home and working folder),
/// with no API key in its environment.
pub fn herd_runner(args: &[&str], dir: &Path) -> Result<RunOutput, Failed> {
    herd_runner_with_env(args, dir, &[])
}

/// [`herd_runner`] with the variables `env` set too.
pub fn herd_runner_with_env(
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
) -> Result<RunOutput, Failed> {
    let output = Command::new(env!("CARGO_BIN_EXE_herd-runner"))
        .args(args)
        .current_dir(dir)
        .env("HERD_HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("HERD_LOG")
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("cannot run herd-runner: {e}"))?;
    Ok(RunOutput {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// Writes `manifest` into `dir` and runs `herd-runner run --json -f <it> <extra args>`.
pub fn run_agent(manifest: &str, dir: &Path, extra: &[&str]) -> Result<RunOutput, Failed> {
    let file = dir.join("agent.yaml");
    std::fs::write(&file, manifest).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let workdir = dir.join("work");
    let mut args = vec![
        "run",
        "--json",
        "--non-interactive",
        "-f",
        path_str(&file)?,
        "--workdir",
        path_str(&workdir)?,
    ];
    args.extend_from_slice(extra);
    herd_runner(&args, dir)
}

fn path_str(path: &Path) -> Result<&str, Failed> {
    path.to_str()
        .ok_or_else(|| format!("{} is not UTF-8", path.display()).into())
}

/// A mock server standing in front of the server, answering every POST with `responder`
/// (which passes requests on with [`relay`] or [`forward`]), and `provider`'s base URL on it.
pub fn proxy(
    provider: Provider,
    responder: impl Respond + 'static,
) -> Result<(MockServer, String), Failed> {
    let proxy = block_on(async {
        let proxy = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(responder)
            .mount(&proxy)
            .await;
        Ok(proxy)
    })?;
    let base = match provider {
        Provider::OpenAi => format!("{}/v1", proxy.uri()),
        Provider::Anthropic => proxy.uri(),
    };
    Ok((proxy, base))
}

/// Sends `request` (as a mock server received it) on to the same path of `server`, and answers
/// with what the server answered.
pub fn relay(server_root: &str, request: &wiremock::Request) -> ResponseTemplate {
    match forward(server_root, request) {
        Ok((status, content_type, bytes)) => {
            ResponseTemplate::new(status).set_body_raw(bytes, &content_type)
        }
        Err(failed) => ResponseTemplate::new(502).set_body_string(failed),
    }
}

/// Sends `request` on to the same path of `server_root`: the answer's status, content type and
/// bytes, or why there is none.
pub fn forward(
    server_root: &str,
    request: &wiremock::Request,
) -> Result<(u16, String, Vec<u8>), String> {
    let url = format!("{server_root}{}", request.url.path());
    let body = request.body.clone();
    // The mock server calls responders on its own runtime's thread: the call gets a thread and
    // a runtime of its own.
    let answer = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                block_on(async {
                    let response = http_client()?
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await
                        .map_err(|e| format!("POST {url}: {e}"))?;
                    let status = response.status().as_u16();
                    let content_type = response
                        .headers()
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("application/json")
                        .to_owned();
                    let bytes = response
                        .bytes()
                        .await
                        .map_err(|e| format!("POST {url}: {e}"))?;
                    Ok((status, content_type, bytes.to_vec()))
                })
            })
            .join()
    });
    match answer {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(failed)) => Err(format!("{failed:?}")),
        Err(_) => Err("the relay panicked".to_owned()),
    }
}
