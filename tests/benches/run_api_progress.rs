//! The run API under load on the real API server: `cargo bench -p herd-e2e --bench
//! run_api_progress`, with `KUBEBUILDER_ASSETS` set as for the end-to-end tests (it starts its
//! own control plane). The operator runs in a process of its own ([`operator_process`]) as the
//! ServiceAccount of `charts/herd/files/rbac/`, so kube-apiserver's API Priority and Fairness
//! applies to its writes as in a cluster.
//!
//! 100 simulated runners, one per Run, each with a TokenRequest token bound to its Run's Pod
//! (audience `herd.dev`, as the kubelet would project it), post a progress report every 200 ms
//! for 30 s over HTTPS (`HERD_BENCH_RUNNERS` and `HERD_BENCH_SECONDS` change both). Reported:
//! the API server's writes of Runs' status per second (its own `apiserver_request_total`;
//! expect ≤ 100/s, a write a second per Run) and the report changes a watch on the Runs sees,
//! the 429s kube-apiserver answered in that time, p50/p99 latency of the progress requests, and
//! whether every Run ends up showing its runner's last report.
//!
//! Not part of CI: it needs a quiet machine and a release build.

#[path = "support/operator_process.rs"]
mod operator_process;

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use futures::{StreamExt, TryStreamExt};
use herd_crds::report::{Todo, TodoStatus, Usage};
use herd_crds::run::Run;
use herd_crds::wire::{ProgressReport, RunConfig};
use herd_e2e::cluster::{Cluster, Source};
use herd_e2e::namespace::{PodSecurity, create_namespace};
use herd_e2e::runner::{run_api_ca, runner_token};
use herd_e2e::wait::wait_for;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use operator_process::{Operator, free_addr, ready_agent};

const RUNNERS: usize = 100;
const SECONDS: u64 = 30;
const EVERY: Duration = Duration::from_millis(200);
const IN_FLIGHT: usize = 20;

fn main() -> ExitCode {
    operator_process::main("run_api_progress", bench)
}

/// A number from the environment, else `default`.
fn setting<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={value} is not a number")),
        Err(_) => Ok(default),
    }
}

async fn bench() -> anyhow::Result<()> {
    let runners: usize = setting("HERD_BENCH_RUNNERS", RUNNERS)?;
    let window = Duration::from_secs(setting("HERD_BENCH_SECONDS", SECONDS)?);
    let source = Source::from_env().context("set KUBEBUILDER_ASSETS (or HERD_E2E_KUBECONFIG)")?;
    let cluster = Cluster::connect(&source).await?;
    let admin = cluster.client();
    herd_e2e::crds::apply_crds(&admin).await?;
    let namespace = create_namespace(&admin, "bench::run_api", PodSecurity::Unset).await?;
    let run_api = free_addr()?;
    let url = format!("https://{run_api}");
    let _operator = Operator::start(
        &cluster,
        &namespace,
        &[
            ("HERD_RUN_API_ADDR", run_api.as_str()),
            ("HERD_RUN_API_URL", url.as_str()),
            ("HERD_MAX_ACTIVE", "0"),
            ("HERD_MAX_ACTIVE_PER_NAMESPACE", "0"),
        ],
    )
    .await?;
    ready_agent(
        &admin,
        &namespace,
        json!({"provider": "openai", "name": "m"}),
    )
    .await?;

    let names: Vec<String> = (0..runners).map(|i| format!("load-{i:03}")).collect();
    let tokens = runs_and_tokens(&admin, &namespace, &names).await?;
    let https = trusting_run_api_ca(&admin, &namespace).await?;
    let base = format!("{url}/v1/runs/{namespace}");
    // Every runner reads its config first, as `herd-runner pod` does (and its token is
    // reviewed once, before the measured window).
    futures::stream::iter(names.iter().zip(&tokens))
        .map(|(name, token)| {
            let request = https
                .get(format!("{base}/{name}/config"))
                .bearer_auth(token);
            async move {
                let response = request.send().await?;
                ensure!(response.status() == 200, "config: {}", response.status());
                response.json::<RunConfig>().await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;

    let watched = watch_reports(Api::namespaced(admin.clone(), &namespace)).await?;
    let before = api_server_counts(&admin).await?;
    let start = Instant::now() + Duration::from_millis(500);
    let end = start + window;
    let tasks: Vec<_> = names
        .iter()
        .zip(tokens)
        .enumerate()
        .map(|(i, (name, token))| {
            // Spread evenly over the interval, as runners that started apart would be.
            let offset = EVERY.mul_f64(i as f64 / runners as f64);
            let runner = Runner {
                https: https.clone(),
                url: format!("{base}/{name}/progress"),
                token,
            };
            tokio::spawn(runner.run(start + offset, end))
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await?);
    }
    let measured = start.elapsed().as_secs_f64();
    let after = api_server_counts(&admin).await?;
    let seen = watched.between(start, end);
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut latencies: Vec<Duration> = outcomes
        .iter()
        .flat_map(|o| o.latencies.iter().copied())
        .collect();
    latencies.sort_unstable();
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for outcome in &outcomes {
        for (status, count) in &outcome.statuses {
            *statuses.entry(status.clone()).or_default() += count;
        }
    }
    let last: HashMap<&str, u64> = names
        .iter()
        .map(String::as_str)
        .zip(outcomes.iter().map(|o| o.last_seq))
        .collect();
    let runs: Api<Run> = Api::namespaced(admin.clone(), &namespace);
    let current = runs
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|run| {
            let seq = run
                .status
                .as_ref()
                .and_then(|s| s.report.as_ref())
                .map(|r| r.seq);
            seq.is_some() && seq == last.get(run.name_any().as_str()).copied()
        })
        .count();

    let writes = after.status_writes.saturating_sub(before.status_writes);
    let throttled = after.too_many.saturating_sub(before.too_many);
    println!(
        "run_api: {runners} runners, progress every {} ms for {measured:.1} s: {} requests, by \
         answer {statuses:?}",
        EVERY.as_millis(),
        latencies.len()
    );
    println!(
        "run_api: progress latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        millis(percentile(&latencies, 50)),
        millis(percentile(&latencies, 99)),
        millis(latencies.last().copied().unwrap_or_default())
    );
    println!(
        "run_api: API-server writes of Runs' status: {writes} = {:.1}/s (expect <= {runners}/s); \
         report changes a watch saw: {seen} = {:.1}/s",
        writes as f64 / measured,
        seen as f64 / window.as_secs_f64()
    );
    println!("run_api: HTTP 429 from kube-apiserver meanwhile: {throttled}");
    println!("run_api: 2 s later, {current} of {runners} Runs show their runner's last report");
    Ok(())
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The `p`th percentile of sorted `values`.
fn percentile(values: &[Duration], p: usize) -> Duration {
    match values.len() {
        0 => Duration::ZERO,
        n => values[(n * p / 100).min(n - 1)],
    }
}

/// Creates the Runs, waits for their Pods and returns a runner token for each Pod.
async fn runs_and_tokens(
    admin: &Client,
    namespace: &str,
    names: &[String],
) -> anyhow::Result<Vec<String>> {
    let runs: Api<Run> = Api::namespaced(admin.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    futures::stream::iter(names)
        .map(|name| {
            let (runs, pods, admin) = (runs.clone(), pods.clone(), admin.clone());
            async move {
                let run: Run = serde_json::from_value(json!({
                    "apiVersion": "herd.dev/v1alpha1", "kind": "Run", "metadata": {"name": name},
                    "spec": {"agentRef": {"name": "helper"}, "task": "Report progress."},
                }))?;
                runs.create(&PostParams::default(), &run).await?;
                let pod_name = format!("{name}-1");
                let pod = wait_for(
                    &format!("the Pod {pod_name}"),
                    Duration::from_secs(60),
                    || async { Ok(pods.get_opt(&pod_name).await?) },
                )
                .await?;
                // What the kubelet projects into the `agent` container.
                runner_token(&admin, namespace, &pod, Some("herd.dev"), 3600).await
            }
        })
        .buffered(IN_FLIGHT)
        .try_collect()
        .await
}

/// An HTTPS client that trusts only the namespace's copy of the run API's CA, as a runner.
async fn trusting_run_api_ca(admin: &Client, namespace: &str) -> anyhow::Result<reqwest::Client> {
    let bundle = run_api_ca(admin, namespace).await?;
    Ok(reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(bundle.as_bytes())?)
        .build()?)
}

/// One simulated runner.
struct Runner {
    https: reqwest::Client,
    url: String,
    token: String,
}

/// What a runner saw.
struct Outcome {
    latencies: Vec<Duration>,
    statuses: BTreeMap<String, usize>,
    last_seq: u64,
}

impl Runner {
    /// Posts a report every [`EVERY`] from `start` until `end`.
    async fn run(self, start: Instant, end: Instant) -> Outcome {
        let mut ticks = tokio::time::interval_at(start.into(), EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut outcome = Outcome {
            latencies: Vec::new(),
            statuses: BTreeMap::new(),
            last_seq: 0,
        };
        let mut seq = 0;
        loop {
            ticks.tick().await;
            if Instant::now() >= end {
                return outcome;
            }
            seq += 1;
            let sent = Instant::now();
            let answer = self
                .https
                .post(&self.url)
                .bearer_auth(&self.token)
                .json(&progress(seq))
                .send()
                .await;
            let status = match answer {
                Ok(response) => {
                    let status = response.status().as_u16();
                    // The whole answer, so the connection is reused.
                    let _ = response.bytes().await;
                    if status == 202 {
                        outcome.last_seq = seq;
                    }
                    status.to_string()
                }
                Err(error) => format!("error: {error}"),
            };
            outcome.latencies.push(sent.elapsed());
            *outcome.statuses.entry(status).or_default() += 1;
        }
    }
}

/// A runner's report after `seq` steps: a title, a few todos, growing usage.
fn progress(seq: u64) -> ProgressReport {
    let step = u32::try_from(seq).unwrap_or(u32::MAX);
    ProgressReport {
        attempt: 1,
        seq,
        title: Some("Benchmark the run API".into()),
        todos: (0..5)
            .map(|i| Todo {
                content: format!("Step {i} of the task, with a sentence of detail"),
                status: if i < seq % 5 {
                    TodoStatus::Completed
                } else {
                    TodoStatus::InProgress
                },
            })
            .collect(),
        usage: Usage {
            input_tokens: u64::from(step) * 1_000,
            output_tokens: u64::from(step) * 100,
            model_calls: step,
            tool_calls: step,
            ..Usage::default()
        },
        ..ProgressReport::default()
    }
}

/// When a watch saw a Run's report change.
struct Watched(Arc<Mutex<Vec<Instant>>>);

impl Watched {
    /// How many changes were seen from `start` to `end`.
    fn between(&self, start: Instant, end: Instant) -> usize {
        self.0
            .lock()
            .map(|seen| seen.iter().filter(|t| **t >= start && **t < end).count())
            .unwrap_or(0)
    }
}

/// Watches the namespace's Runs, noting when each one's `status.report.seq` changes.
async fn watch_reports(runs: Api<Run>) -> anyhow::Result<Watched> {
    let seen: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let log = seen.clone();
    let (listed, mut listed_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let mut seqs: HashMap<String, Option<u64>> = HashMap::new();
        let mut events = watcher(runs, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::InitDone) => {
                    listed.send_replace(true);
                }
                Ok(watcher::Event::Apply(run) | watcher::Event::InitApply(run)) => {
                    let seq = run
                        .status
                        .as_ref()
                        .and_then(|s| s.report.as_ref())
                        .map(|r| r.seq);
                    let before = seqs.insert(run.name_any(), seq);
                    if before.is_some_and(|b| b != seq)
                        && let Ok(mut log) = log.lock()
                    {
                        log.push(Instant::now());
                    }
                }
                _ => {}
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(60), listed_rx.wait_for(|l| *l))
        .await
        .context("the watch of Runs did not list")??;
    Ok(Watched(seen))
}

/// Counts from kube-apiserver's `apiserver_request_total`.
struct Counts {
    /// Writes of `runs/status` (server-side apply, patch, update).
    status_writes: u64,
    /// Requests answered 429 (API Priority and Fairness rejections).
    too_many: u64,
}

/// Reads the API server's own request counters.
async fn api_server_counts(admin: &Client) -> anyhow::Result<Counts> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = admin.request_text(request).await?;
    let mut counts = Counts {
        status_writes: 0,
        too_many: 0,
    };
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        // Counters are printed as floats.
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let labels = labels_of(labels);
        let label = |name: &str| labels.get(name).copied().unwrap_or_default();
        let count = value as u64;
        if label("resource") == "runs"
            && label("subresource") == "status"
            && matches!(label("verb"), "APPLY" | "PATCH" | "PUT" | "UPDATE")
        {
            counts.status_writes += count;
        }
        if label("code") == "429" {
            counts.too_many += count;
        }
    }
    Ok(counts)
}

/// The labels of a Prometheus sample: `a="x",b="y"`.
fn labels_of(text: &str) -> HashMap<&str, &str> {
    text.split("\",")
        .filter_map(|pair| pair.split_once("=\""))
        .map(|(name, value)| (name, value.trim_end_matches('"')))
        .collect()
}
