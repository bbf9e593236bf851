//! The operator at scale on the real API server: `cargo bench -p herd-e2e --bench
//! operator_scale`, with `KUBEBUILDER_ASSETS` set as for the end-to-end tests (it starts its
//! own control plane). The operator runs in a process of its own ([`operator_process`]) as the
//! ServiceAccount of `charts/herd/files/rbac/`.
//!
//! 1. Burst: 1,000 Runs created at once (100 requests in flight) with `--max-active=0` and
//!    `--max-active-per-namespace=0`: the time until 1,000 Pods exist. Target ≤ 10 s.
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

    /// Resident and peak resident memory, in MiB.
    fn memory(&self) -> anyhow::Result<(f64, f64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let field = |name: &str| -> anyhow::Result<f64> {
            let line = status
                .lines()
                .find(|l| l.starts_with(name))
                .with_context(|| format!("no {name} in /proc status"))?;
            let kib: f64 = line
                .split_whitespace()
                .nth(1)
                .context("no value")?
                .parse()?;
            Ok(kib / 1024.0)
        };
        Ok((field("VmRSS:")?, field("VmHWM:")?))
    }
}

fn run(name: &str, task: &str) -> anyhow::Result<Run> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Run", "metadata": {"name": name},
        "spec": {"agentRef": {"name": "helper"}, "task": task},
    }))?)
}

/// 1,000 Runs at once; the time until their 1,000 Pods exist.
async fn burst(cluster: &Cluster) -> anyhow::Result<()> {
    let admin = cluster.client();
    let namespace = create_namespace(&admin, "bench::burst", PodSecurity::Unset).await?;
    let operator = Operator::start(
        cluster,
        &namespace,
        &[
            ("HERD_MAX_ACTIVE", "0"),
            ("HERD_MAX_ACTIVE_PER_NAMESPACE", "0"),
        ],
    )
    .await?;
    ready_agent(&admin, &namespace).await?;

    let pods: Api<Pod> = Api::namespaced(admin.clone(), &namespace);
    let (count_tx, mut count_rx) = tokio::sync::watch::channel(0usize);
    let watch = tokio::spawn(async move {
        let mut seen = std::collections::HashSet::new();
        let mut events = watcher(pods, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(Ok(pod)) = events.next().await {
            seen.insert(pod.name_any());
            count_tx.send_replace(seen.len());
        }
    });

    let runs: Api<Run> = Api::namespaced(admin.clone(), &namespace);
    let start = Instant::now();
    futures::stream::iter(0..BURST)
        .map(|i| {
            let runs = runs.clone();
            async move {
                let run = run(&format!("burst-{i:04}"), "Say hello.")?;
                runs.create(&PostParams::default(), &run).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    let created = start.elapsed();
    tokio::time::timeout(Duration::from_secs(300), count_rx.wait_for(|n| *n >= BURST))
        .await
        .context("1,000 Pods within 300 s")??;
    let all = start.elapsed();
    watch.abort();
    let metrics = operator.metrics().await?;
    let errors = metrics
        .lines()
        .find(|l| l.starts_with(r#"herd_reconcile_errors_total{controller="run"}"#))
        .unwrap_or("no run errors");
    println!(
        "burst: {BURST} Runs created in {:.2} s; {BURST} Pods after {:.2} s (target <= 10 s); {errors}",
        created.as_secs_f64(),
        all.as_secs_f64()
    );
    Ok(())
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
        operator.memory()?
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
        operator.memory()?
    };
    println!(
        "memory: {CACHED} Runs cached: RSS {:.1} MiB (peak {:.1}) (target <= 64 MiB)",
        with_runs.0, with_runs.1
    );

    snapshots(&admin, &namespace).await?;
    let with_snapshots = {
        let operator = Operator::start(cluster, &namespace, &[]).await?;
        operator.settle().await?;
        operator.memory()?
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
            default_model: &Default::default(),
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
