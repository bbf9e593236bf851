//! The soak (not in CI): `cargo bench -p herd-e2e --bench soak`, with `KUBEBUILDER_ASSETS` set
//! as for the end-to-end tests (it starts its own control plane).
//!
//! 5,000 Runs of a scripted Agent (a file written in the sandbox, then an answer) are created
//! at once and run through `local-kubelet` under a cap of 200 active Runs, while the operator,
//! in a process of its own as the chart's ServiceAccount ([`operator_process`]), is SIGKILLed
//! every 30 s and started again as a new replica (it waits out the Lease). Watches of the Runs
//! and Pods count what a crash must never cost: Runs lost (not `Succeeded` at the end), a Run
//! given a second Pod, and the most Runs running at once against the cap; the operator's
//! resident memory is read every second. One row per 1,000 Runs ended is printed, and the table
//! written to `target/bench/soak.json`. It exits non-zero when a Run is lost, a Pod duplicated
//! or the cap exceeded.
//!
//! `HERD_SOAK_RUNS`, `HERD_SOAK_CAP` and `HERD_SOAK_KILL_EVERY` (seconds) change the figures.

#[path = "support/operator_process.rs"]
mod operator_process;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use herd_crds::condition::find_condition;
use herd_crds::reason::condition_type;
use herd_crds::run::{Run, RunPhase};
use herd_e2e::cluster::{Cluster, Source};
use herd_e2e::local_kubelet::LocalKubelet;
use herd_e2e::namespace::{PodSecurity, create_namespace};
use herd_e2e::process::resident_memory;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use operator_process::{Operator, free_addr, ready_agent};

/// How many Runs, how many may run at once, and how often the operator is killed.
const RUNS: usize = 5_000;
const CAP: usize = 200;
const KILL_EVERY: Duration = Duration::from_secs(30);
const RUNS_ENV: &str = "HERD_SOAK_RUNS";
const CAP_ENV: &str = "HERD_SOAK_CAP";
const KILL_EVERY_ENV: &str = "HERD_SOAK_KILL_EVERY";
/// Runs created at once, as a client would.
const IN_FLIGHT: usize = 100;
/// A row of the table each time this many more Runs have ended.
const ROW_EVERY: usize = 1_000;
/// How long the whole soak may take before what has not ended counts as lost.
const DEADLINE: Duration = Duration::from_secs(3 * 3600);

/// Each Run writes a file in its sandbox, then answers; its title from a call of its own.
const SCRIPT: &str = r##"
rules:
  - match: {purpose: title}
    respond: {content: "Soak"}
  - match: {role: lead, call: 1}
    respond:
      toolCalls:
        - name: write_file
          arguments: {description: "Write a note", path: /mnt/user-data/outputs/note.md, content: "soak\n"}
  - match: {role: lead, call: 2}
    respond: {content: "Done."}
"##;

fn main() -> ExitCode {
    operator_process::main("soak", soak)
}

/// What the watches have seen so far.
#[derive(Debug, Default)]
struct Tally {
    /// Each Run's phase, as last seen.
    phases: HashMap<String, RunPhase>,
    /// Runs in `Running` or `InputRequired` now (holding a slot under the cap).
    running: usize,
    /// The most at once since the last row.
    most_running: usize,
    /// Runs `Succeeded`, and Runs ended otherwise.
    succeeded: usize,
    failed: usize,
    /// How the Runs that ended otherwise ended: their `Succeeded` condition's reason, counted.
    failure_reasons: BTreeMap<String, usize>,
    /// The UIDs of each Run's Pods, ever.
    pods: HashMap<String, HashSet<String>>,
}

impl Tally {
    fn run_seen(&mut self, name: String, phase: RunPhase, reason: &str) {
        let holds_slot = |p: RunPhase| matches!(p, RunPhase::Running | RunPhase::InputRequired);
        let before = self.phases.insert(name, phase);
        if before == Some(phase) {
            return;
        }
        if before.is_some_and(holds_slot) {
            self.running -= 1;
        }
        if holds_slot(phase) {
            self.running += 1;
            self.most_running = self.most_running.max(self.running);
        }
        match phase {
            RunPhase::Succeeded => self.succeeded += 1,
            RunPhase::Failed | RunPhase::Cancelled => {
                self.failed += 1;
                *self.failure_reasons.entry(reason.to_owned()).or_default() += 1;
            }
            _ => {}
        }
    }

    fn ended(&self) -> usize {
        self.succeeded + self.failed
    }

    /// Pods beyond the first of each Run.
    fn duplicate_pods(&self) -> usize {
        self.pods
            .values()
            .map(|uids| uids.len().saturating_sub(1))
            .sum()
    }
}

type Shared = Arc<Mutex<Tally>>;

fn lock(tally: &Shared) -> std::sync::MutexGuard<'_, Tally> {
    tally.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One row of the table: the state once `runs_ended` Runs have ended.
#[derive(Debug, serde::Serialize)]
struct Row {
    runs_ended: usize,
    minutes: f64,
    /// Operator kills so far.
    kills: usize,
    /// The most Runs running at once since the previous row.
    most_running: usize,
    /// Pods made so far, and those beyond a Run's first.
    pods: usize,
    duplicate_pods: usize,
    /// Runs ended other than `Succeeded` so far.
    failed: usize,
    /// The operator's most resident memory since the previous row, in MiB.
    operator_rss_mib: f64,
}

/// The settings read from the environment.
struct Settings {
    runs: usize,
    cap: usize,
    kill_every: Duration,
}

impl Settings {
    fn from_env() -> anyhow::Result<Self> {
        let number = |name: &str, default: usize| -> anyhow::Result<usize> {
            match std::env::var(name) {
                Ok(text) => text.parse().with_context(|| format!("{name}={text}")),
                Err(_) => Ok(default),
            }
        };
        let kill_every = number(KILL_EVERY_ENV, KILL_EVERY.as_secs() as usize)?;
        Ok(Settings {
            runs: number(RUNS_ENV, RUNS)?,
            cap: number(CAP_ENV, CAP)?,
            kill_every: Duration::from_secs(kill_every as u64),
        })
    }
}

async fn soak() -> anyhow::Result<()> {
    let settings = Settings::from_env()?;
    let source = Source::from_env().context("set KUBEBUILDER_ASSETS (or HERD_E2E_KUBECONFIG)")?;
    let cluster = Cluster::connect(&source).await?;
    let admin = cluster.client();
    herd_e2e::crds::apply_crds(&admin).await?;
    let namespace = create_namespace(&admin, "bench::soak", PodSecurity::Unset).await?;

    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    let kubelet_dir = out.join("soak-kubelet");
    let _ = std::fs::remove_dir_all(&kubelet_dir);
    std::fs::create_dir_all(&kubelet_dir)?;
    let mut kubelet = LocalKubelet::start_in(
        &kubelet_dir,
        &cluster,
        &namespace,
        Path::new(env!("CARGO_BIN_EXE_local-kubelet")),
    )
    .await?;
    println!("soak: local-kubelet's log: {}", kubelet.log().display());

    // One run API address for every operator: the Pods keep calling it across the kills.
    let run_api = free_addr()?;
    let port = run_api.rsplit_once(':').map(|(_, p)| p).unwrap_or_default();
    let run_api_url = format!("https://{run_api}");
    let cap = settings.cap.to_string();
    let operator_settings = [
        ("HERD_RUN_API_ADDR", run_api.as_str()),
        ("HERD_RUN_API_URL", run_api_url.as_str()),
        ("HERD_RUN_API_PORT", port),
        ("HERD_MAX_ACTIVE", cap.as_str()),
        ("HERD_MAX_ACTIVE_PER_NAMESPACE", cap.as_str()),
    ];
    let mut operator = Operator::start(&cluster, &namespace, &operator_settings).await?;
    script_config_map(&admin, &namespace).await?;
    ready_agent(
        &admin,
        &namespace,
        json!({"provider": "scripted", "name": "script",
            "scriptFrom": {"configMapKeyRef": {"name": "script", "key": "script.yaml"}}}),
    )
    .await?;

    let tally = Shared::default();
    watch_runs(Api::namespaced(admin.clone(), &namespace), tally.clone());
    watch_pods(Api::namespaced(admin.clone(), &namespace), tally.clone());
    let start = Instant::now();
    create_runs(&Api::namespaced(admin.clone(), &namespace), settings.runs).await?;
    println!(
        "soak: {} Runs created in {:.1} s; cap {}, the operator killed every {} s",
        settings.runs,
        start.elapsed().as_secs_f64(),
        settings.cap,
        settings.kill_every.as_secs()
    );

    let mut rows = Vec::new();
    let mut kills = 0;
    let mut rss_peak: f64 = 0.0;
    let mut started = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        kubelet.check_running()?;
        if let Ok((rss, _)) = resident_memory(operator.child.id()) {
            rss_peak = rss_peak.max(rss);
        }
        let ended = lock(&tally).ended();
        if ended >= (rows.len() + 1) * ROW_EVERY || ended == settings.runs {
            let mut seen = lock(&tally);
            let row = Row {
                runs_ended: ended,
                minutes: start.elapsed().as_secs_f64() / 60.0,
                kills,
                most_running: seen.most_running,
                pods: seen.pods.values().map(HashSet::len).sum(),
                duplicate_pods: seen.duplicate_pods(),
                failed: seen.failed,
                operator_rss_mib: rss_peak,
            };
            seen.most_running = seen.running;
            drop(seen);
            println!("soak: {row:?}");
            rows.push(row);
            rss_peak = 0.0;
        }
        if ended == settings.runs {
            break;
        }
        if start.elapsed() > DEADLINE {
            bail!(
                "{} of {} Runs had not ended after {} s",
                settings.runs - ended,
                settings.runs,
                DEADLINE.as_secs()
            );
        }
        if started.elapsed() >= settings.kill_every {
            // `Child::kill` is SIGKILL: no shutdown, the Lease kept until it expires.
            operator.child.kill()?;
            operator.child.wait()?;
            kills += 1;
            operator = Operator::start(&cluster, &namespace, &operator_settings).await?;
            started = Instant::now();
        }
    }
    drop(operator);

    print_table(&rows, &settings);
    let summary = json!({
        "bench": "soak",
        "runs": settings.runs,
        "cap": settings.cap,
        "kill_every_seconds": settings.kill_every.as_secs(),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "date": jiff::Timestamp::now().to_string(),
        "rows": rows,
    });
    std::fs::create_dir_all(&out)?;
    let file = out.join("soak.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&summary)?)?;
    println!("soak: written to {}", file.display());

    let seen = lock(&tally);
    let most_running = rows.iter().map(|r| r.most_running).max().unwrap_or(0);
    ensure!(
        seen.failed == 0,
        "{} Runs lost (ended other than Succeeded), by reason: {:?}",
        seen.failed,
        seen.failure_reasons
    );
    ensure!(
        seen.duplicate_pods() == 0,
        "{} duplicate Pods",
        seen.duplicate_pods()
    );
    ensure!(
        most_running <= settings.cap,
        "{most_running} Runs running at once, over the cap of {}",
        settings.cap
    );
    Ok(())
}

/// The scripted model's script, in the ConfigMap the Agent's `scriptFrom` names.
async fn script_config_map(admin: &Client, namespace: &str) -> anyhow::Result<()> {
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "script"}, "data": {"script.yaml": SCRIPT},
    }))?;
    Api::<ConfigMap>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &config_map)
        .await?;
    Ok(())
}

/// Creates `count` Runs of the Agent `helper`, `IN_FLIGHT` at a time.
async fn create_runs(runs: &Api<Run>, count: usize) -> anyhow::Result<()> {
    futures::stream::iter(0..count)
        .map(|i| async move {
            let run: Run = serde_json::from_value(json!({
                "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
                "metadata": {"name": format!("soak-{i:05}")},
                // Queue time counts toward a Run's timeout: the last Runs wait most of the soak
                // for a slot, so the timeout is the soak's own deadline, not the 30 min default.
                "spec": {"agentRef": {"name": "helper"}, "task": "Write a note.", "timeout": "3h"},
            }))?;
            runs.create(&PostParams::default(), &run).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Calls `seen` with every object of `api` a watch applies, from its first list on.
fn watch_each<K>(api: Api<K>, mut seen: impl FnMut(K) + Send + 'static)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(event) = events.next().await {
            if let Ok(object) = event {
                seen(object);
            }
        }
    });
}

/// Follows every Run's phase (and, when it failed, why) into `tally`.
fn watch_runs(runs: Api<Run>, tally: Shared) {
    watch_each(runs, move |run: Run| {
        let Some(status) = run.status.as_ref() else {
            return;
        };
        if let Some(phase) = status.phase {
            let reason = find_condition(&status.conditions, condition_type::SUCCEEDED)
                .map_or("", |c| c.reason.as_str());
            lock(&tally).run_seen(run.name_any(), phase, reason);
        }
    });
}

/// Records every Run Pod's UID into `tally`.
fn watch_pods(pods: Api<Pod>, tally: Shared) {
    watch_each(pods, move |pod: Pod| {
        let run = pod.labels().get(herd_operator::labels::RUN).cloned();
        if let (Some(run), Some(uid)) = (run, pod.uid()) {
            lock(&tally).pods.entry(run).or_default().insert(uid);
        }
    });
}

/// The table, in Markdown (as the README shows it).
fn print_table(rows: &[Row], settings: &Settings) {
    println!(
        "\n{} Runs, cap {}, the operator SIGKILLed every {} s:\n",
        settings.runs,
        settings.cap,
        settings.kill_every.as_secs()
    );
    println!(
        "| Runs ended | minutes | operator kills | most running at once | Pods | duplicate Pods | lost | operator RSS (MiB) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {:.1} | {} | {} | {} | {} | {} | {:.1} |",
            row.runs_ended,
            row.minutes,
            row.kills,
            row.most_running,
            row.pods,
            row.duplicate_pods,
            row.failed,
            row.operator_rss_mib
        );
    }
}
