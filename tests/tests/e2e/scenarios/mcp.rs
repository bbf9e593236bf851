//! A Run whose Agent uses an MCP server over streamable HTTP: the test server written with the
//! official Python SDK (`runner/tests/fixtures/mcp/http_server.py`), which refuses any request
//! without its key in a header. The key is a labelled Secret the Agent names; the operator puts
//! it into the `agent` container's environment through `secretKeyRef`, the kubelet resolves
//! it, and `herd-runner pod` sends it. The server listens where the Pods reach this machine (the
//! real node's address, or loopback under `local-kubelet`). The scripted model calls the server's tool and
//! answers only once the tool's result reached it.
//!
//! The server lives in the virtualenv `scripts/mcp-venv` makes (`$HERD_MCP_VENV`, else
//! `${XDG_CACHE_HOME:-$HOME/.cache}/herd/mcp-venv`). Without it the test says so and passes,
//! except under `CI=true`, where it fails.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use herd_e2e::TestEnv;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::cluster::Scenario;
use super::leaks::{MODEL_SECRET, SecretUse, assert_secrets_nowhere};
use super::script::{script_config_map, scripted_agent};
use crate::operator::run_fixtures::succeeded_report;

/// The header value the server accepts: a secret that must appear nowhere but in the Secret.
const MCP_KEY: &str = "mcp-e2e-header-secret-5f1c";

/// How long the Run may take: the Pod's two containers start, the runner connects to the MCP
/// server, calls its tool and answers.
const RUN_TIME: Duration = Duration::from_secs(120);

/// The lead calls the server's tool; it answers with the tool's words only when they reached it.
const SCRIPT: &str = r#"
rules:
  - match: {purpose: title}
    respond: {content: "Latest release"}
  - match: {role: lead, call: 1}
    respond:
      toolCalls:
        - name: catalog__lookup_release
          arguments: {project: herd}
  - match: {role: lead, call: 2, lastMessage: {role: tool, contains: "herd 4.2.0 (released 2026-11-03)"}}
    respond: {content: "The latest release is herd 4.2.0 (released 2026-11-03)."}
  - match: {role: lead, call: 2}
    respond: {content: "The tool's result never reached the model."}
"#;

/// The venv with the MCP test servers, `Ok(None)` (said on stderr) when it is missing outside
/// CI.
fn venv() -> anyhow::Result<Option<PathBuf>> {
    let dir = std::env::var_os("HERD_MCP_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
            Some(cache.join("herd/mcp-venv"))
        })
        .context("neither HERD_MCP_VENV nor HOME is set")?;
    if dir.join("bin/python").exists() {
        return Ok(Some(dir));
    }
    let missing = format!(
        "no MCP test servers in {} (scripts/mcp-venv installs them)",
        dir.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        bail!("{missing}; CI=true, so this fails");
    }
    eprintln!("skipped scenarios::a_run_calls_an_http_mcp_server_with_a_secret_header: {missing}");
    Ok(None)
}

/// The HTTP test server on a loopback port, stopped when dropped.
struct HttpServer {
    child: Child,
    port: u16,
}

impl HttpServer {
    /// Starts the server on `host`.
    fn start(venv: &Path, host: std::net::IpAddr) -> anyhow::Result<Self> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../runner/tests/fixtures/mcp/http_server.py");
        let mut child = Command::new(venv.join("bin/python"))
            .arg(&script)
            .arg("--bind")
            .arg(host.to_string())
            .env("HERD_TEST_MCP_KEY", MCP_KEY)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", script.display()))?;
        let mut line = String::new();
        let stdout = child.stdout.take().context("the server's stdout")?;
        // The server prints its port once it listens.
        let read = BufReader::new(stdout).read_line(&mut line);
        let mut server = HttpServer { child, port: 0 };
        read.context("reading the server's port")?;
        server.port = line
            .trim()
            .parse()
            .with_context(|| format!("the server printed {line:?}, not its port"))?;
        Ok(server)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Run succeeds with the tool's result in its answer: the header's value went from the
/// Secret through the Pod's environment to the server, which refuses requests without it. The
/// value is nowhere else: not in status, Events, ConfigMaps, the Pod, or any log.
pub async fn a_run_calls_an_http_mcp_server_with_a_secret_header(
    env: TestEnv,
) -> anyhow::Result<()> {
    let Some(venv) = venv()? else {
        return Ok(());
    };
    let mut scenario = Scenario::start_operator(&env, |_| Ok(())).await?;
    let host = scenario.host();
    let server = HttpServer::start(&venv, host)?;
    let admin = env.client();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "catalog-key", "labels": {"herd.dev/model-credentials": "true"}},
        "stringData": {"key": MCP_KEY},
    }))?;
    Api::<Secret>::namespaced(admin.clone(), env.namespace())
        .create(&PostParams::default(), &secret)
        .await?;
    let spec = scripted_agent(json!({
        "mcp": {"servers": [{
            "name": "catalog",
            "url": format!("http://{host}:{}/mcp", server.port),
            "headers": [{"name": "X-Api-Key", "secretKeyRef": {"name": "catalog-key", "key": "key"}}],
            "egressCIDRs": [format!("{host}/32")],
            "timeout": "30s",
        }]},
    }));
    scenario.create_helper(spec).await?;
    script_config_map(&scenario.admin, &scenario.namespace, SCRIPT).await?;
    scenario
        .create_run("release", "Which is the latest release of herd?")
        .await?;
    let run = scenario.finished("release", RUN_TIME).await?;
    let report = succeeded_report(&run)?;
    let answer = report.result.as_ref().map(|r| r.text.as_str());
    ensure!(
        answer.is_some_and(|a| a.contains("herd 4.2.0 (released 2026-11-03)")),
        "the tool's result reaches the model and the answer: {answer:?}"
    );
    ensure!(
        report.usage.tool_calls >= 1,
        "the tool call is counted: {:?}",
        report.usage
    );
    let header = SecretUse {
        value: MCP_KEY,
        env: &herd_crds::agent::header_env_var(0, 0),
        secret: "catalog-key",
    };
    assert_secrets_nowhere(&scenario, &run, &[MODEL_SECRET, header]).await?;
    Ok(())
}
