//! A real Prometheus (Debian's `prometheus`) scraping an in-process operator's `/metrics`, with
//! the chart's alerts (`charts/herd/files/prometheus/rules.yaml`) loaded as its rule file: every
//! rule must evaluate without error, and every alert expression and every query of the chart's
//! Grafana dashboard (`charts/herd/dashboards/herd.json`) must run through the HTTP API without
//! error and read only metric names Prometheus has scraped, because a query over an unknown
//! metric is not an error to Prometheus, only an empty answer. The metrics that appear with
//! their first event (a finished Run, a run API request) are made to appear first.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use herd_crds::condition::ConditionStatus;
use herd_crds::run::Run;
use herd_e2e::external_tools::PROMETHEUS;
use herd_e2e::fixtures::{read_yaml, repo_root};
use herd_e2e::process::Server;
use herd_e2e::promql::metric_names;
use herd_e2e::wait::wait_for;
use herd_e2e::{TestEnv, operator_rbac::Rbac};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::run_fixtures::{create_agent, reaches, run_until, succeeded};
use super::support::{Clients, start_leader, test_config};

/// The test's name, for the message when `prometheus` is missing.
pub const TEST: &str = "operator::prometheus_evaluates_the_charts_alerts_and_dashboard";

/// How long Prometheus may take to start, scrape and evaluate every rule once (it scrapes and
/// evaluates every second here).
const SCRAPED: Duration = Duration::from_secs(60);

/// The alerts that must not fire against a healthy operator that leads, with a fresh
/// certificate: each expression's answer must be empty.
const QUIET: [&str; 3] = [
    "HerdOperatorDown",
    "HerdNoLeader",
    "HerdRunApiCertificateExpiry",
];

/// What the dashboard's Grafana variables stand for here: every namespace, and a rate window
/// several scrapes long.
const VARIABLES: [(&str, &str); 2] = [("$__rate_interval", "1m"), ("$namespace", ".*")];

pub async fn prometheus_evaluates_the_charts_alerts_and_dashboard(
    env: TestEnv,
) -> anyhow::Result<()> {
    let Some(prometheus) = PROMETHEUS.find(TEST)? else {
        return Ok(());
    };
    let Clients {
        operator,
        admin,
        namespace,
    } = Clients::new(&env, Rbac::Namespaced).await?;
    let config = test_config(&[&namespace], &namespace, "prometheus")?;
    let running = start_leader(config, operator).await?;
    finish_a_run(&admin, &namespace).await?;
    let status = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .build()?
        .get(format!(
            "https://{}/v1/runs/{namespace}/nobody/config",
            running.run_api_addr
        ))
        .send()
        .await?
        .status();
    ensure!(
        status == 401,
        "the run API answered a request without a token with {status}"
    );

    let rules_file = repo_root().join("charts/herd/files/prometheus/rules.yaml");
    let held = tempfile::tempdir()?;
    let dir = held.path().to_owned();
    // Kept until the failure report has read Prometheus' log from it.
    env.hold(held);
    let port = free_port()?;
    let config_file = dir.join("prometheus.yml");
    std::fs::write(
        &config_file,
        serde_json::to_string(&json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [rules_file],
            "scrape_configs": [{
                "job_name": "herd",
                "static_configs": [{
                    "targets": [running.http_addr.to_string()],
                    "labels": {"namespace": namespace},
                }],
            }],
        }))?,
    )?;
    let server = Server::start(
        "prometheus",
        &dir,
        &prometheus,
        &[
            format!("--config.file={}", config_file.display()),
            format!("--storage.tsdb.path={}", dir.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
        ],
    )?;
    env.attach_log(server.log());
    // Checked while waiting, so that a Prometheus that exits says why at once.
    let server = std::sync::Mutex::new(server);
    let api = PrometheusApi {
        http: reqwest::Client::new(),
        base: format!("http://127.0.0.1:{port}/api/v1"),
    };

    // Scraped once the Run's end and the request are in, and every rule evaluated once.
    let wanted = r#"herd_runs_finished_total{reason="Cancelled"} and on () herd_run_api_requests_total{code="401"}"#;
    let started = wait_for("Prometheus to scrape the operator", SCRAPED, || async {
        server
            .lock()
            .map_err(|_| anyhow::anyhow!("the Prometheus process lock is poisoned"))?
            .check_running()?;
        Ok(api.vector(wanted).await.ok().filter(|v| !v.is_empty()))
    })
    .await;
    started.with_context(|| match server.lock() {
        Ok(server) => format!("the end of its log:\n{}", server.log_tail(20)),
        Err(_) => String::new(),
    })?;
    let rules = wait_for("Prometheus to evaluate every rule", SCRAPED, || async {
        let groups = api.data("rules", &[]).await?;
        let rules: Vec<Value> = groups["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        let evaluated = !rules.is_empty()
            && rules.iter().all(|r| {
                r["health"] != "unknown"
                    && r["lastEvaluation"]
                        .as_str()
                        .is_some_and(|t| !t.starts_with("0001"))
            });
        Ok(evaluated.then_some(rules))
    })
    .await?;
    let mut problems = Vec::new();
    for rule in &rules {
        if rule["health"] != "ok" {
            problems.push(format!(
                "rule {}: health {}, {}",
                rule["name"], rule["health"], rule["lastError"]
            ));
        }
    }

    let seen: BTreeSet<String> =
        serde_json::from_value(api.data("label/__name__/values", &[]).await?)?;
    let mut queries = alert_queries(&rules_file)?;
    let alerts = queries.len();
    queries.extend(dashboard_queries(
        &repo_root().join("charts/herd/dashboards/herd.json"),
    )?);
    ensure!(
        alerts == 7 && queries.len() - alerts >= 20,
        "the chart has {alerts} alerts and {} dashboard queries: fewer than it should",
        queries.len() - alerts
    );
    for (what, query) in &queries {
        match api.vector(query).await {
            Ok(answer)
                if QUIET.contains(&what.trim_start_matches("alert ")) && !answer.is_empty() =>
            {
                problems.push(format!(
                    "{what} fires against a healthy operator: {answer:?}"
                ));
            }
            Ok(_) => {}
            Err(error) => problems.push(format!("{what}: {error:#}\n  {query}")),
        }
        let unknown: Vec<String> = metric_names(query).difference(&seen).cloned().collect();
        if !unknown.is_empty() {
            problems.push(format!("{what}: unknown metric {unknown:?}\n  {query}"));
        }
    }
    if !problems.is_empty() {
        bail!(
            "{} of {} queries are wrong:\n{}",
            problems.len(),
            queries.len(),
            problems.join("\n")
        );
    }
    Ok(())
}

/// A Run that ends (cancelled while it waits for an input), so the metrics of finished Runs
/// exist.
async fn finish_a_run(admin: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    create_agent(admin, namespace).await?;
    let runs: Api<Run> = Api::namespaced(admin.clone(), namespace);
    let run: Run = serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
        "metadata": {"name": "waits"},
        "spec": {"agentRef": {"name": "helper"}, "task": "Read it.",
                 "inputs": [{"configMapRef": {"name": "missing"}}]},
    }))?;
    runs.create(&PostParams::default(), &run).await?;
    run_until(&runs, "waits", "Queued on the missing input", |r| {
        succeeded(r, ConditionStatus::Unknown, "Queued")
    })
    .await?;
    let cancel = json!({"spec": {"cancel": true}});
    runs.patch("waits", &PatchParams::default(), &Patch::Merge(&cancel))
        .await?;
    reaches(&runs, "waits", ConditionStatus::False, "Cancelled").await?;
    Ok(())
}

/// Every alert's expression, as `("alert <name>", expr)`.
fn alert_queries(rules_file: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let rules = read_yaml(rules_file)?;
    let mut queries = Vec::new();
    for rule in rules["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
    {
        let name = rule["alert"].as_str().or(rule["record"].as_str());
        let expr = rule["expr"].as_str();
        match (name, expr) {
            (Some(name), Some(expr)) => queries.push((format!("alert {name}"), expr.to_owned())),
            _ => bail!("a rule without a name or an expr: {rule}"),
        }
    }
    Ok(queries)
}

/// Every panel query of the dashboard, as `("panel <title>", expr)`, with its Grafana variables
/// replaced by [`VARIABLES`].
fn dashboard_queries(dashboard_file: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(dashboard_file)
        .with_context(|| format!("reading {}", dashboard_file.display()))?;
    let dashboard: Value = serde_json::from_str(&text)?;
    let mut panels: Vec<Value> = dashboard["panels"].as_array().cloned().unwrap_or_default();
    // Panels of collapsed rows are nested in them.
    let nested: Vec<Value> = panels
        .iter()
        .flat_map(|p| p["panels"].as_array().cloned().unwrap_or_default())
        .collect();
    panels.extend(nested);
    let mut queries = Vec::new();
    for panel in &panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("untitled");
            let Some(expr) = target["expr"].as_str() else {
                bail!("panel {title} has a query without an expr: {target}");
            };
            let expr = VARIABLES
                .iter()
                .fold(expr.to_owned(), |e, (variable, value)| {
                    e.replace(variable, value)
                });
            ensure!(
                !expr.contains('$'),
                "panel {title} uses a variable this test does not know: {expr}"
            );
            queries.push((format!("panel {title}"), expr));
        }
    }
    Ok(queries)
}

/// Prometheus' HTTP API.
struct PrometheusApi {
    http: reqwest::Client,
    base: String,
}

impl PrometheusApi {
    /// The `data` of a successful answer of `GET <base>/<path>`; an error with Prometheus'
    /// own message otherwise.
    async fn data(&self, path: &str, query: &[(&str, &str)]) -> anyhow::Result<Value> {
        let url = reqwest::Url::parse_with_params(&format!("{}/{path}", self.base), query)?;
        let response = self.http.get(url).send().await?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .with_context(|| format!("{path}: {status}"))?;
        if body["status"] != "success" {
            bail!("{status} {}: {}", body["errorType"], body["error"]);
        }
        Ok(body["data"].clone())
    }

    /// The instant vector `query` evaluates to now (a scalar counts as one sample).
    async fn vector(&self, query: &str) -> anyhow::Result<Vec<Value>> {
        let data = self.data("query", &[("query", query)]).await?;
        Ok(match data["resultType"].as_str() {
            Some("vector" | "matrix") => data["result"].as_array().cloned().unwrap_or_default(),
            _ => vec![data["result"].clone()],
        })
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
