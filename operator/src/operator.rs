//! Starting and stopping one operator: HTTP endpoints, caches and controllers per scope, the run
//! API and leader election, all owned by one task so aborting it stops everything.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tracing::info;

use crate::config::Config;
use crate::controller::admission::Admission;
use crate::controller::lifecycle::{Lifecycle, stopped};
use crate::controller::run_api_tls::{RunApiTls, keep_renewed};
use crate::controller::run_context::RunSetup;
use crate::controller::skill::SkillWake;
use crate::controller::{agent, budget, run, schedule, skill};
use crate::controller_state::Shared;
use crate::decide::run_api_tls::leaf_names;
use crate::error::Error;
use crate::http::Readiness;
use crate::http::{HttpState, router};
use crate::leader;
use crate::metrics::Metrics;
use crate::metrics::kube_client::instrument;
use crate::run_api::{self, RunApi};
use crate::scope::{Scope, Synced};

/// The name the operator reports Events under.
pub const REPORTER: &str = "herd-operator";

/// A started operator.
pub struct Running {
    /// Where `/healthz`, `/readyz` and `/metrics` are served.
    pub http_addr: SocketAddr,
    /// Where the run API is served.
    pub run_api_addr: SocketAddr,
    /// Where `/metrics` is served over HTTPS, with `--metrics-secure`.
    pub metrics_addr: Option<SocketAddr>,
    /// True while this replica leads.
    pub leader: watch::Receiver<bool>,
    ready: Arc<Readiness>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<Result<(), Error>>,
}

impl Running {
    /// Whether every cache has synced and the run API serves.
    pub fn is_ready(&self) -> bool {
        self.ready.is_ready()
    }

    /// Waits until the operator ends: `Err` when it lost the Lease or failed.
    pub async fn wait(&mut self) -> Result<(), Error> {
        match (&mut self.task).await {
            Ok(result) => result,
            Err(join) => Err(Error::Lease(format!("the operator task ended: {join}"))),
        }
    }

    /// Stops gracefully: controllers finish their reconciles, the Lease is released.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        self.shutdown.send_replace(true);
        self.wait().await
    }

    /// Stops at once, as a crash would: the Lease is not released.
    pub fn abort(&self) {
        self.task.abort();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs the operator until `shutdown` resolves (graceful) or the Lease is lost (an error).
pub async fn run(
    config: Config,
    client: Client,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    let mut running = start(config, client).await?;
    tokio::select! {
        result = running.wait() => result,
        () = shutdown => running.shutdown().await,
    }
}

/// Binds one of the operator's listeners; a failure names the flag and the address (a port
/// taken by another container of the Pod says only "Address in use" otherwise).
async fn bind(flag: &str, addr: SocketAddr) -> Result<tokio::net::TcpListener, Error> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| Error::Config(format!("cannot listen on {addr} ({flag}): {error}")))
}

/// Binds the HTTP listener and starts everything in one task. Long because it is the
/// operator's wiring, read top to bottom: each listener, cache, controller and server is
/// started in the order the next one needs it.
pub async fn start(config: Config, client: Client) -> Result<Running, Error> {
    config.lease.seconds().map_err(Error::Config)?;
    let listener = bind("--http-addr", config.http_addr).await?;
    let http_addr = listener.local_addr()?;
    let run_api_listener = bind("--run-api-addr", config.run_api_addr).await?;
    let run_api_addr = run_api_listener.local_addr()?;
    let metrics_listener = match config.metrics_secure {
        true => Some(bind("--metrics-addr", config.metrics_addr).await?),
        false => None,
    };
    let metrics_addr = metrics_listener
        .as_ref()
        .map(tokio::net::TcpListener::local_addr)
        .transpose()?;
    let metrics = Arc::new(Metrics::default());
    let client = instrument(client, metrics.clone());
    let ready = Arc::new(Readiness::default());
    let (leader_tx, leader_rx) = watch::channel(false);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let reporter = Reporter {
        controller: REPORTER.to_owned(),
        instance: Some(config.lease.identity()),
    };
    let shared = Arc::new(Shared::new(
        client.clone(),
        Recorder::new(client.clone(), reporter),
        metrics.clone(),
        leader_rx.clone(),
        config.default_model.model(),
    ));

    let mut tasks = JoinSet::new();
    let app = router(HttpState {
        ready: ready.clone(),
        metrics: metrics.clone(),
        plain_metrics: metrics_listener.is_none(),
    });
    let http_shutdown = stopped(shutdown_rx.clone());
    tasks.spawn(async move {
        // The listener only ends with the operator; an accept error is retried by axum.
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(http_shutdown)
            .await;
    });

    let checker = shared.clone();
    tasks.spawn(async move { crate::crd_version::check(&checker).await });

    let tls = Arc::new(RunApiTls::new(
        client.clone(),
        config.lease.namespace.clone(),
        leaf_names(&config.runs.run_api_dns_names, &config.runs.run_api_url),
        config.run_api_tls,
    ));
    let admission = Arc::new(Admission::new(config.admission.caps(), metrics.clone()));
    let run_setup = RunSetup {
        runs: config.runs.clone(),
        operator_namespace: config.lease.namespace.clone(),
        tls: tls.clone(),
        admission: admission.clone(),
    };
    let mut ca_copies = Vec::new();
    let mut run_api_scopes = Vec::new();
    let mut readiness = Vec::new();
    let mut controllers = JoinSet::new();
    let lifecycle = Lifecycle {
        concurrency: config.concurrency,
        leader: leader_rx.clone(),
        shutdown: shutdown_rx.clone(),
    };
    for scope in Scope::from_list(&config.watch_namespaces) {
        info!(%scope, "watching");
        let (agents, agent_caches) =
            agent::controller(scope.clone(), shared.clone(), lifecycle.clone());
        let (skill_wake, skill_woken) = SkillWake::channel();
        let (runs, run_synced, run_caches) = run::controller(
            scope.clone(),
            shared.clone(),
            run_setup.clone(),
            skill_wake,
            lifecycle.clone(),
        );
        let (skills, skill_caches) = skill::controller(
            scope.clone(),
            shared.clone(),
            run_caches.clone(),
            skill_woken,
            lifecycle.clone(),
        );
        let (schedules, schedule_caches) =
            schedule::controller(scope.clone(), shared.clone(), lifecycle.clone());
        let (budgets, budget_caches, budget_store) = budget::controller(
            scope.clone(),
            shared.clone(),
            run_caches.runs.clone(),
            run_synced.clone(),
            lifecycle.clone(),
        );
        admission.register_budgets(budget_store);
        readiness.extend(budget_caches);
        controllers.spawn(drain(budgets));
        readiness.extend(agent_caches);
        readiness.extend(skill_caches);
        readiness.extend(schedule_caches);
        readiness.extend(run_synced);
        ca_copies.push(run_caches.config_maps.clone());
        run_api_scopes.push((scope.clone(), run_caches));
        controllers.spawn(drain(agents));
        controllers.spawn(drain(skills));
        controllers.spawn(drain(runs));
        controllers.spawn(drain(schedules));
    }
    let run_api_serving = Synced::default();
    readiness.push(run_api_serving.clone());
    ready.set(readiness);
    tasks.spawn(run_api::serve(
        run_api_listener,
        RunApi::new(client.clone(), run_api_scopes, metrics.clone()),
        config.lease.namespace.clone(),
        run_api_serving,
        stopped(shutdown_rx.clone()),
    ));
    if let Some(listener) = metrics_listener {
        tasks.spawn(crate::secure_metrics::serve(
            listener,
            client.clone(),
            config.lease.namespace.clone(),
            metrics.clone(),
            stopped(shutdown_rx.clone()),
        ));
    }
    tasks.spawn(keep_renewed(tls, ca_copies, leader_rx.clone()));
    tasks.spawn(admission.run(leader_rx.clone()));
    let leader_metrics = metrics.clone();
    let mut leader_watch = leader_rx.clone();
    tasks.spawn(async move {
        while leader_watch.changed().await.is_ok() {
            leader_metrics.set_leader(*leader_watch.borrow());
        }
    });

    let lease = config.lease.clone();
    let task = tokio::spawn(async move {
        let result = leader::elect(client, &lease, leader_tx, shutdown_rx.clone()).await;
        if result.is_ok() {
            // Graceful: let the controllers finish their running reconciles.
            while controllers.join_next().await.is_some() {}
        }
        tasks.abort_all();
        result
    });
    Ok(Running {
        http_addr,
        run_api_addr,
        metrics_addr,
        leader: leader_rx,
        ready,
        shutdown: shutdown_tx,
        task,
    })
}

async fn drain(stream: impl Stream<Item = ()> + Send + 'static) {
    stream.for_each(|()| async {}).await;
}
