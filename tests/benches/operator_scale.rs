//! The operator at scale on the real API server: `cargo bench -p herd-e2e --bench
//! operator_scale`, with `KUBEBUILDER_ASSETS` set as for the end-to-end tests (it starts its
//! own control plane). The operator runs in a process of its own ([`operator_process`]) as the
//! ServiceAccount of `charts/herd/files/rbac/`.
//!
//! 1. Burst, against the API server's own speed, in alternating pairs (`HERD_BENCH_ROUNDS`,
//!    default 3): 1,000 bare Pods of a Run Pod's size created by a client at 100 in flight,
//!    then 1,000 Runs created the same way with `--max-active=0` and
//!    `--max-active-per-namespace=0` until their 1,000 Pods exist. The ratio of the medians'
//!    pairs is the figure (target ≤ 2.0), with the operator's writes and live reads per Run
//!    (target ≤ 3 and 0); written to `target/bench/operator_scale.json`.
//! 2. Memory: the operator's resident memory once its caches hold 10,000 realistic finished
//!    Runs (2 KiB task, 4 KiB result, 10 todos, status from both field managers), target
//!    ≤ 64 MiB; then again with each Run's snapshot ConfigMap; and with none, for reference.
//!
//! `HERD_BENCH_ONLY=burst` (or `memory`) runs one part; the operator process inherits the
//! environment, so `HERD_CONCURRENCY=64` tries another concurrency.
//!
//! Not part of CI: it takes minutes and needs a quiet machine and a release build.

#[path = "support/operator_process.rs"]
mod operator_process;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use herd_crds::run::Run;
use herd_e2e::cluster::{Cluster, Source};
use herd_e2e::namespace::{PodSecurity, create_namespace};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use herd_e2e::operator_requests::{WRITE_VERBS, per_unit, request_counts, table, total};
use herd_e2e::process::resident_memory;
use operator_process::{Operator, ready_agent};

const BURST: usize = 1_000;
const CACHED: usize = 10_000;
const IN_FLIGHT: usize = 100;
/// `burst` or `memory`: only that part.
const ONLY_ENV: &str = "HERD_BENCH_ONLY";

fn main() -> ExitCode {
    operator_process::main("operator_scale", bench)
}

async fn bench() -> anyhow::Result<()> {
    let source = Source::from_env().context("set KUBEBUILDER_ASSETS (or HERD_E2E_KUBECONFIG)")?;
    let cluster = Cluster::connect(&source).await?;
    herd_e2e::crds::apply_crds(&cluster.client()).await?;
    let only = std::env::var(ONLY_ENV).unwrap_or_default();
    if only.is_empty() || only == "burst" {
        burst(&cluster).await?;
    }
    if only.is_empty() || only == "memory" {
        memory(&cluster).await?;
    }
    Ok(())
}

/// What only this benchmark asks of its operator.
impl Operator {
    /// Waits until the Run controller has been idle for 3 s (every Run reconciled).
    async fn settle(&self) -> anyhow::Result<()> {
        let reconciles = |m: &str| {
            m.lines()
                .find(|l| l.starts_with(r#"herd_reconciles_total{controller="run"}"#))
                .map(str::to_owned)
        };
        let mut last = None;
        let mut quiet = 0;
        let deadline = Instant::now() + Duration::from_secs(600);
        while quiet < 3 {
            if Instant::now() > deadline {
                bail!("the operator never settled: {last:?}");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = reconciles(&self.metrics().await?);
            quiet = if now == last { quiet + 1 } else { 0 };
            last = now;
        }
        Ok(())
    }
}

fn run(name: &str, task: &str) -> anyhow::Result<Run> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Run", "metadata": {"name": name},
        "spec": {"agentRef": {"name": "helper"}, "task": task},
    }))?)
}

/// Alternating pairs (bare Pods, then Runs) measured; `HERD_BENCH_ROUNDS` sets another count.
const ROUNDS: usize = 3;
const ROUNDS_ENV: &str = "HERD_BENCH_ROUNDS";

/// One pair of the burst: 1,000 bare Pods, then 1,000 Runs to their Pods.
#[derive(Debug, serde::Serialize)]
struct Round {
    /// Seconds until 1,000 bare Pods exist.
    bare_pods_seconds: f64,
    /// Seconds until 1,000 Runs have their Pods.
    runs_seconds: f64,
    /// `runs_seconds / bare_pods_seconds`.
    ratio: f64,
    /// API writes per Run, from the operator's own count.
    writes_per_run: f64,
    /// Live reads (`get`) per Run.
    reads_per_run: f64,
}

/// The burst against its yardstick: in alternating pairs, (a) 1,000 Pods of a Run Pod's size
/// created by a client at 100 in flight, the API server's own speed, and (b) 1,000 Runs
/// created the same way until the operator made their 1,000 Pods. Prints each pair, the
/// medians and the ratio b/a (target <= 2.0), and writes them to
/// `target/bench/operator_scale.json`.
async fn burst(cluster: &Cluster) -> anyhow::Result<()> {
    let rounds = match std::env::var(ROUNDS_ENV) {
        Ok(text) => text.parse().context(ROUNDS_ENV)?,
        Err(_) => ROUNDS,
    };
    let admin = cluster.client();
    let template = run_pod_template(cluster).await?;
    let mut measured = Vec::new();
    for round in 1..=rounds {
        let bare_pods_seconds = bare_pods(&admin, &template, round).await?;
        let (runs_seconds, writes_per_run, reads_per_run) = runs_to_pods(cluster, round).await?;
        let pair = Round {
            bare_pods_seconds,
            runs_seconds,
            ratio: runs_seconds / bare_pods_seconds,
            writes_per_run,
            reads_per_run,
        };
        println!(
            "burst round {round}: {BURST} bare Pods {:.2} s, {BURST} Runs -> Pods {:.2} s, ratio {:.2}, {:.2} writes and {:.2} live reads per Run",
            pair.bare_pods_seconds,
            pair.runs_seconds,
            pair.ratio,
            pair.writes_per_run,
            pair.reads_per_run
        );
        measured.push(pair);
    }
    let median_of = |value: fn(&Round) -> f64| median(measured.iter().map(value).collect());
    let summary = json!({
        "bench": "operator_scale burst",
        "runs": BURST,
        "in_flight": IN_FLIGHT,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "date": jiff::Timestamp::now().to_string(),
        "rounds": measured,
        "median": {
            "bare_pods_seconds": median_of(|r| r.bare_pods_seconds),
            "runs_seconds": median_of(|r| r.runs_seconds),
            "ratio": median_of(|r| r.ratio),
            "writes_per_run": median_of(|r| r.writes_per_run),
            "reads_per_run": median_of(|r| r.reads_per_run),
        },
    });
    let median = &summary["median"];
    println!(
        "burst: ratio {:.2} (median of {rounds} pairs; target <= 2.0): {BURST} Runs -> Pods {:.2} s against {BURST} bare Pods {:.2} s; {:.2} writes and {:.2} live reads per Run (target <= 3, 0)",
        median["ratio"].as_f64().unwrap_or_default(),
        median["runs_seconds"].as_f64().unwrap_or_default(),
        median["bare_pods_seconds"].as_f64().unwrap_or_default(),
        median["writes_per_run"].as_f64().unwrap_or_default(),
        median["reads_per_run"].as_f64().unwrap_or_default(),
    );
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&out)?;
    let file = out.join("operator_scale.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&summary)?)?;
    println!("burst: written to {}", file.display());
    Ok(())
}

/// The middle value (the mean of the two middle ones for an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// A Run Pod as the operator makes it, from one warm-up Run, without its name, owner and
/// status: the bare Pods are of the same size.
async fn run_pod_template(cluster: &Cluster) -> anyhow::Result<Value> {
    let admin = cluster.client();
    let namespace = create_namespace(&admin, "bench::warm-up", PodSecurity::Unset).await?;
    let operator = Operator::start(cluster, &namespace, &[]).await?;
    ready_agent(
        &admin,
        &namespace,
        json!({"provider": "openai", "name": "m"}),
    )
    .await?;
    let runs: Api<Run> = Api::namespaced(admin.clone(), &namespace);
    runs.create(&PostParams::default(), &run("warm-up", "Say hello.")?)
        .await?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &namespace);
    let deadline = Instant::now() + Duration::from_secs(60);
    let pod = loop {
        if let Some(pod) = pods.get_opt("warm-up-1").await? {
            break pod;
        }
        if Instant::now() > deadline {
            bail!("the warm-up Run has no Pod after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    drop(operator);
    let mut template = serde_json::to_value(&pod)?;
    template["metadata"] = json!({"labels": template["metadata"]["labels"].clone()});
    template
        .as_object_mut()
        .context("a Pod is an object")?
        .remove("status");
    Ok(template)
}

/// Seconds until `BURST` Pods like `template` exist in a new namespace, created at
/// `IN_FLIGHT`, seen by a watch as the Runs' Pods are.
async fn bare_pods(admin: &Client, template: &Value, round: usize) -> anyhow::Result<f64> {
    let namespace = create_namespace(
        admin,
        &format!("bench::bare-pods-{round}"),
        PodSecurity::Unset,
    )
    .await?;
    // The Pods run as the Run Pods' ServiceAccount, which admission wants to exist.
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(admin.clone(), &namespace);
    let account = template["spec"]["serviceAccountName"]
        .as_str()
        .context("a Run Pod names its ServiceAccount")?;
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": account}}))?,
        )
        .await?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &namespace);
    let seen = pods_seen(pods.clone());
    burst_until_pods(&pods, seen, |i| {
        let mut pod = template.clone();
        pod["metadata"]["name"] = json!(format!("bare-{i:04}-1"));
        Ok(serde_json::from_value(pod)?)
    })
    .await
}

/// Creates `BURST` objects `make` gives at `IN_FLIGHT`, timed from the first until `seen`
/// counts `BURST` Pods: the seconds.
async fn burst_until_pods<K>(
    api: &Api<K>,
    mut seen: tokio::sync::watch::Receiver<usize>,
    make: impl Fn(usize) -> anyhow::Result<K>,
) -> anyhow::Result<f64>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let start = Instant::now();
    futures::stream::iter(0..BURST)
        .map(|i| {
            let object = make(i);
            async move {
                api.create(&PostParams::default(), &object?).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    tokio::time::timeout(Duration::from_secs(300), seen.wait_for(|n| *n >= BURST))
        .await
        .context("1,000 Pods within 300 s")??;
    Ok(start.elapsed().as_secs_f64())
}

/// How many Pods of `pods` a watch has seen so far.
fn pods_seen(pods: Api<Pod>) -> tokio::sync::watch::Receiver<usize> {
    let (count_tx, count_rx) = tokio::sync::watch::channel(0usize);
    tokio::spawn(async move {
        let mut seen = std::collections::HashSet::new();
        let mut events = watcher(pods, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(Ok(pod)) = events.next().await {
            seen.insert(pod.name_any());
            count_tx.send_replace(seen.len());
            if count_tx.is_closed() {
                break;
            }
        }
    });
    count_rx
}

/// 1,000 Runs at once in a new namespace with a new operator and no cap: the seconds until
/// their 1,000 Pods exist, and the operator's writes and live reads per Run.
async fn runs_to_pods(cluster: &Cluster, round: usize) -> anyhow::Result<(f64, f64, f64)> {
    let admin = cluster.client();
    let namespace =
        create_namespace(&admin, &format!("bench::burst-{round}"), PodSecurity::Unset).await?;
    let operator = Operator::start(
        cluster,
        &namespace,
        &[
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
    let before = request_counts(&operator.metrics().await?);

    let seen = pods_seen(Api::namespaced(admin.clone(), &namespace));
    let runs: Api<Run> = Api::namespaced(admin.clone(), &namespace);
    let elapsed =
        burst_until_pods(&runs, seen, |i| run(&format!("burst-{i:04}"), "Say hello.")).await?;
    operator.settle().await?;
    let metrics = operator.metrics().await?;
    let per_run = per_unit(&before, &request_counts(&metrics), BURST);
    let errors = metrics
        .lines()
        .find(|l| l.starts_with(r#"herd_reconcile_errors_total{controller="run"}"#))
        .unwrap_or("no run errors");
    println!("burst round {round}: {errors}\n{}", table(&per_run));
    Ok((
        elapsed,
        total(&per_run, &WRITE_VERBS),
        total(&per_run, &["get"]),
    ))
}

/// A realistic finished Run's status, in its two parts: the run API's report and the
/// controller's.
fn statuses(name: &str) -> (Value, Value) {
    let todos: Vec<Value> = (0..10)
        .map(|i| json!({"content": format!("Step {i}: look into part {i} of the question and note what was found"), "status": "completed"}))
        .collect();
    let report = json!({"apiVersion": "herd.dev/v1alpha1", "kind": "Run", "status": {"report": {
        "attempt": 1, "seq": 42, "title": "A realistic title of a finished research run",
        "todos": todos,
        "usage": {"inputTokens": 123_456, "outputTokens": 7_890, "modelCalls": 31, "toolCalls": 57},
        "result": {"text": "r".repeat(4096), "artifacts": [{"path": "report.md", "size": 4096}]},
        "stopReason": "completed"}}});
    let at = "2026-06-01T12:00:00Z";
    let controller = json!({"apiVersion": "herd.dev/v1alpha1", "kind": "Run", "status": {
        "observedGeneration": 1, "phase": "Succeeded", "attempt": 1,
        "podName": format!("{name}-1"), "snapshot": format!("{name}-snapshot"),
        "startTime": at, "completionTime": at,
        "conditions": [
            {"type": "Succeeded", "status": "True", "reason": "Succeeded", "message": "",
             "lastTransitionTime": at, "observedGeneration": 1},
            {"type": "InputRequired", "status": "False", "reason": "NoQuestion", "message": "",
             "lastTransitionTime": at, "observedGeneration": 1}]}});
    (report, controller)
}

/// The operator's memory with no Run, with 10,000 finished Runs, and with their snapshots.
async fn memory(cluster: &Cluster) -> anyhow::Result<()> {
    let admin = cluster.client();
    let namespace = create_namespace(&admin, "bench::memory", PodSecurity::Unset).await?;
    let empty = {
        let operator = Operator::start(cluster, &namespace, &[]).await?;
        operator.settle().await?;
        resident_memory(operator.child.id())?
    };
    println!(
        "memory: no Run cached: RSS {:.1} MiB (peak {:.1})",
        empty.0, empty.1
    );

    let runs: Api<Run> = Api::namespaced(admin.clone(), &namespace);
    let task = "t".repeat(2048);
    let start = Instant::now();
    futures::stream::iter(0..CACHED)
        .map(|i| {
            let runs = runs.clone();
            let task = task.clone();
            async move {
                let name = format!("run-{i:05}");
                runs.create(&PostParams::default(), &run(&name, &task)?)
                    .await?;
                let (report, controller) = statuses(&name);
                runs.patch_status(
                    &name,
                    &PatchParams::apply("herd-runapi").force(),
                    &Patch::Apply(&report),
                )
                .await?;
                runs.patch_status(
                    &name,
                    &PatchParams::apply("herd-controller").force(),
                    &Patch::Apply(&controller),
                )
                .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    println!(
        "memory: {CACHED} Runs written in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let sample = runs.get("run-00000").await?;
    println!(
        "memory: one Run as stored: {} bytes of JSON",
        serde_json::to_vec(&sample)?.len()
    );
    let with_runs = {
        let operator = Operator::start(cluster, &namespace, &[]).await?;
        operator.settle().await?;
        resident_memory(operator.child.id())?
    };
    println!(
        "memory: {CACHED} Runs cached: RSS {:.1} MiB (peak {:.1}) (target <= 64 MiB)",
        with_runs.0, with_runs.1
    );

    snapshots(&admin, &namespace).await?;
    let with_snapshots = {
        let operator = Operator::start(cluster, &namespace, &[]).await?;
        operator.settle().await?;
        resident_memory(operator.child.id())?
    };
    println!(
        "memory: {CACHED} Runs and their snapshot ConfigMaps cached: RSS {:.1} MiB (peak {:.1})",
        with_snapshots.0, with_snapshots.1
    );
    Ok(())
}

/// A snapshot as the operator takes it of a plain Agent with a 2 KiB SOUL.
fn snapshot_text() -> anyhow::Result<String> {
    use herd_operator::decide::run_snapshot::{SnapshotSources, snapshot};
    let agent = serde_json::from_value(json!({
        "model": {"provider": "openai", "name": "qwen2.5-7b-instruct",
                  "baseURL": "http://llm.models.svc:8080/v1",
                  "apiKeySecretRef": {"name": "model-key", "key": "api-key"}},
        "soul": "s".repeat(2048), "toolGroups": ["web", "file:read", "file:write", "bash"],
        "subagents": {"enabled": true}}))?;
    let run = serde_json::from_value(json!({"agentRef": {"name": "helper"}, "task": "t"}))?;
    let skills = [herd_crds::agent::ResolvedSkill {
        name: "deep-research".into(),
        digest: "0".repeat(64),
    }];
    let taken = snapshot(
        &run,
        &agent,
        SnapshotSources {
            agent_name: "helper",
            skills: &skills,
            soul: None,
            script: None,
            default_model: None,
            runner_image: "ghcr.io/herd-dev/herd-runner:latest",
            sandbox_image: "ghcr.io/herd-dev/herd-sandbox:latest",
        },
    )?;
    Ok(serde_json::to_string(&taken)?)
}

/// A snapshot ConfigMap owned by each Run.
async fn snapshots(admin: &Client, namespace: &str) -> anyhow::Result<()> {
    let runs: Api<Run> = Api::namespaced(admin.clone(), namespace);
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), namespace);
    let all = runs.list(&Default::default()).await?;
    let snapshot = snapshot_text()?;
    println!("memory: one snapshot: {} bytes of JSON", snapshot.len());
    futures::stream::iter(all.items)
        .map(|run| {
            let cms = cms.clone();
            let snapshot = snapshot.clone();
            async move {
                let name = run.name_any();
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("{name}-snapshot"),
                        "labels": {"app.kubernetes.io/managed-by": "herd-operator",
                                   "herd.dev/run": name},
                        "ownerReferences": [{"apiVersion": "herd.dev/v1alpha1", "kind": "Run",
                            "name": name, "uid": run.uid().unwrap_or_default(),
                            "controller": true}]},
                    "data": {"snapshot.json": snapshot}, "immutable": true,
                }))?;
                cms.create(&PostParams::default(), &cm).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}
