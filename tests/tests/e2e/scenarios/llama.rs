//! A Run whose Agent points at a real OpenAI-compatible server: llama.cpp's `llama-server` of
//! `../shared/llama` with its small model, so the model calls are real HTTP from the Pod's
//! `agent` process. Without the server the test is skipped with a message, except under
//! `CI=true`, where it fails. The server listens on loopback only: on the real node a relay on
//! the node's address forwards the Pod's calls to it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use herd_e2e::TestEnv;
use herd_e2e::relay::Relay;
use serde_json::json;

use super::cluster::Scenario;
use crate::operator::run_fixtures::message;

/// The small model evaluates the lead's whole system prompt on one thread: tens of seconds.
const RUN_TIME: Duration = Duration::from_secs(300);

/// A llama.cpp server started for this test, stopped when dropped.
struct LlamaServer {
    dir: tempfile::TempDir,
    base_url: String,
}

impl LlamaServer {
    fn script(name: &str) -> PathBuf {
        std::env::var_os("HERD_SHARED_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")))
            .join("llama")
            .join(name)
    }

    /// Starts the server, or says why it cannot.
    fn start() -> anyhow::Result<Self> {
        let script = Self::script("start");
        ensure!(script.is_file(), "{} does not exist", script.display());
        let dir = tempfile::Builder::new().prefix("herd-llama-").tempdir()?;
        let output = Command::new("bash")
            .arg(&script)
            .arg(dir.path())
            .env("CTX", "8192")
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        let server = LlamaServer {
            base_url: String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            dir,
        };
        if !output.status.success() || server.base_url.is_empty() {
            bail!(
                "{} failed ({}): {}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(server)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(Self::script("stop"))
            .arg(self.dir.path())
            .status();
    }
}

/// The Run's model calls go to the server: the Run ends with the server's own token counts in
/// its usage and the model's answer in status and in the result ConfigMap.
pub async fn a_run_calls_a_real_model_server(env: TestEnv) -> anyhow::Result<()> {
    let server = match LlamaServer::start() {
        Ok(server) => server,
        Err(error) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            return Err(error.context("no llama.cpp server (CI=true, so this fails)"));
        }
        Err(error) => {
            eprintln!("skipped scenarios::a_run_calls_a_real_model_server: {error:#}");
            return Ok(());
        }
    };
    let mut scenario = Scenario::start_operator(&env, |_| Ok(())).await?;
    let loopback: std::net::SocketAddr = server
        .base_url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .with_context(|| format!("the server's address in {}", server.base_url))?;
    let relay = Relay::start((scenario.host(), 0).into(), loopback).await?;
    let spec = json!({
        "model": {"provider": "openai", "name": "smollm2",
            "baseURL": format!("http://{}/v1", relay.address()),
            "maxTokens": 24, "maxRetries": 0,
            "egressCIDRs": [format!("{}/32", scenario.host())]},
        "runDefaults": {"maxModelCalls": 2},
        "summarization": {"enabled": false},
    });
    scenario.create_helper(spec).await?;
    scenario
        .create_run("ask", "Say hello in three words.")
        .await?;
    let run = scenario.finished("ask", RUN_TIME).await?;
    let report = run
        .status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .with_context(|| format!("no report: {}", message(&run)))?;
    ensure!(
        report.usage.model_calls >= 1 && report.usage.input_tokens > 0,
        "the server's token counts reach the Run: {:?} ({})",
        report.usage,
        message(&run)
    );
    ensure!(report.stop_reason.is_some(), "{report:?}");
    let results: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(scenario.admin.clone(), &scenario.namespace);
    let result = results.get("ask-result").await?;
    ensure!(
        result.data.is_some_and(|d| d.contains_key("answer.md")),
        "answer.md in the result ConfigMap"
    );
    Ok(())
}
