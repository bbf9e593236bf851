//! One Pod on this node, from binding to deletion: the I/O around [`PodState`]. It binds the
//! Pod, makes its volumes ready, starts and signals containers as [`PodState::step`] says,
//! runs their probes, writes `pods/status` whenever it changes, and once the Pod is deleted
//! and nothing runs any more, deletes it with grace 0.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodStatus};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::api;
use super::container_view::{HostFiles, container_root};
use super::env::{self, Sources};
use super::lifecycle::{Action, PodState, ProbeResult, add};
use super::pod_volumes::PodVolumes;
use super::probe_plan::{ProbeKind, probe_plans};
use super::prober::{self, Target};
use super::runtime::container::{ContainerDir, Exit, Request, StartError, start};
use super::runtime::spec::ContainerSpec;
use super::service_env::ApiServer;
use super::status::{lost_status, pod_status};
use super::termination::termination_message;

/// How soon a failed API call (a bind, a status write, a volume) is tried again.
const RETRY: Duration = Duration::from_secs(2);

/// What every worker shares.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// This node's name.
    pub node: String,
    /// Where containers reach the API server.
    pub api: ApiServer,
    /// This binary, which runs the containers.
    pub exe: PathBuf,
    /// Where Pods' folders go (`<pods>/<uid>`).
    pub pods: PathBuf,
    /// Where claims' folders go (`<claims>/<namespace>/<claim>`).
    pub claims: PathBuf,
}

/// What happened to a container, told to its Pod's worker.
#[derive(Debug)]
enum Event {
    Started {
        i: usize,
        entry: u32,
        at: Timestamp,
    },
    StartFailed {
        i: usize,
        why: String,
    },
    Exited {
        i: usize,
        exit: Exit,
    },
    Probe {
        i: usize,
        run: i32,
        result: ProbeResult,
    },
}

/// A container that was started, as the worker holds it.
struct Handle {
    requests: mpsc::UnboundedSender<Request>,
    dir: ContainerDir,
    log_offset: u64,
    target: Target,
    probes: Vec<JoinHandle<()>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        for probe in &self.probes {
            probe.abort();
        }
    }
}

/// Runs the Pod until it is gone from the API. `updates` carries each new version of it,
/// `None` once it is deleted for good.
pub async fn run(ctx: Arc<Context>, pod: Pod, updates: watch::Receiver<Option<Pod>>) {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let dir = ctx.pods.join(&uid);
    let mut worker = Worker {
        ctx,
        pods,
        name,
        uid,
        dir,
        state: PodState::new(&pod, Timestamp::now()),
        volumes: None,
        pod,
        updates,
        handles: Vec::new(),
        events: mpsc::unbounded_channel(),
        written: None,
        deleted: false,
    };
    worker.run().await;
    worker.handles.clear();
    if let Err(error) = std::fs::remove_dir_all(&worker.dir)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("removing {}: {error}", worker.dir.display());
    }
}

struct Worker {
    ctx: Arc<Context>,
    pods: Api<Pod>,
    name: String,
    uid: String,
    dir: PathBuf,
    pod: Pod,
    state: PodState,
    volumes: Option<PodVolumes>,
    updates: watch::Receiver<Option<Pod>>,
    handles: Vec<Option<Handle>>,
    events: (mpsc::UnboundedSender<Event>, mpsc::UnboundedReceiver<Event>),
    written: Option<PodStatus>,
    deleted: bool,
}

impl Worker {
    fn label(&self) -> String {
        format!(
            "{}/{}",
            self.pod.metadata.namespace.as_deref().unwrap_or_default(),
            self.name
        )
    }

    async fn run(&mut self) {
        let terminal = matches!(
            self.pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        if terminal {
            return self.linger().await;
        }
        if let Some(status) = lost_status(&self.pod, Timestamp::now()) {
            tracing::warn!(
                "{}: its containers ran under an earlier local-kubelet and are gone: failed",
                self.label()
            );
            while let Err(error) = api::write_status(&self.pods, &self.name, &status).await {
                tracing::warn!("{}: writing the status: {error}", self.label());
                if !self.pause(RETRY).await {
                    return;
                }
            }
            return self.linger().await;
        }
        if !self.bind().await {
            return;
        }
        if let Some(start) = self.pod.status.as_ref().and_then(|s| s.start_time.as_ref()) {
            // A Pod taken over from an earlier kubelet keeps its deadline.
            self.state.start_time = start.0;
        }
        self.volumes = Some(PodVolumes::new(
            &self.pod,
            self.dir.join("volumes"),
            self.ctx.claims.clone(),
        ));
        self.handles = (0..self.state.containers.len()).map(|_| None).collect();
        tracing::info!("{}: running it", self.label());
        if !self.live().await {
            return;
        }
        if self.deleted {
            self.delete().await;
            return;
        }
        self.linger().await;
    }

    /// Binds the Pod unless it is bound already; `false` when it went away or another node
    /// has it.
    async fn bind(&mut self) -> bool {
        loop {
            let bound = self
                .pod
                .spec
                .as_ref()
                .and_then(|spec| spec.node_name.clone());
            if let Some(node) = bound {
                return node == self.ctx.node;
            }
            match api::bind(&self.pods, &self.name, &self.uid, &self.ctx.node).await {
                Ok(()) => {
                    tracing::info!("{}: bound to {}", self.label(), self.ctx.node);
                    return true;
                }
                Err(kube::Error::Api(status)) if status.is_not_found() => return false,
                Err(error) => {
                    tracing::warn!("{}: binding: {error}", self.label());
                    if !self.pause(RETRY).await {
                        return false;
                    }
                }
            }
        }
    }

    /// Waits `pause` while taking in updates of the Pod; `false` once it is gone.
    async fn pause(&mut self, pause: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + pause;
        loop {
            tokio::select! {
                changed = self.updates.changed() => {
                    if !self.take_update(changed.is_ok()) {
                        return false;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return true,
            }
        }
    }

    /// Takes the latest version of the Pod; `false` once it is gone.
    fn take_update(&mut self, open: bool) -> bool {
        let latest = if open {
            self.updates.borrow_and_update().clone()
        } else {
            None
        };
        match latest {
            Some(pod) => {
                // The one field of a running Pod's spec that may change here (shortened).
                if let Some(seconds) = pod.spec.as_ref().and_then(|s| s.active_deadline_seconds) {
                    self.state.active_deadline =
                        Some(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)));
                }
                self.pod = pod;
                true
            }
            None => false,
        }
    }

    /// The Pod's life until nothing runs any more; `false` when it vanished from the API
    /// (its containers are then killed).
    async fn live(&mut self) -> bool {
        let mut next_volume_sync = Timestamp::now();
        loop {
            let now = Timestamp::now();
            self.notice_deletion(now);
            if self.state.stopping.is_none() && now >= next_volume_sync {
                next_volume_sync = self.sync_volumes(now).await;
            }
            for action in self.state.step(now) {
                self.perform(action).await;
            }
            let retry_status = if self.write_status().await {
                None
            } else {
                Some(add(Timestamp::now(), RETRY))
            };
            if self.state.finished && retry_status.is_none() {
                return true;
            }
            let wake = [
                self.state.next_wake(),
                (self.state.stopping.is_none()).then_some(next_volume_sync),
                retry_status,
            ]
            .into_iter()
            .flatten()
            .min();
            let sleep = wake.map_or(Duration::from_secs(3600), |at| {
                Duration::try_from(at.duration_since(Timestamp::now())).unwrap_or(Duration::ZERO)
            });
            tokio::select! {
                Some(event) = self.events.1.recv() => self.apply(event),
                changed = self.updates.changed() => {
                    if !self.take_update(changed.is_ok()) {
                        tracing::info!("{}: gone from the API: its containers are killed", self.label());
                        return false;
                    }
                }
                _ = tokio::time::sleep(sleep) => {}
            }
        }
    }

    /// Starts stopping the Pod once the API marks it deleted.
    fn notice_deletion(&mut self, now: Timestamp) {
        if self.deleted || self.pod.metadata.deletion_timestamp.is_none() {
            return;
        }
        self.deleted = true;
        let grace = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0)))
            .unwrap_or(self.state.grace);
        tracing::info!("{}: deleted: stopping it within {grace:?}", self.label());
        self.state.deleted(grace, now);
    }

    async fn sync_volumes(&mut self, now: Timestamp) -> Timestamp {
        let label = self.label();
        let Some(volumes) = self.volumes.as_mut() else {
            return add(now, RETRY);
        };
        match volumes
            .sync(&self.ctx.client, &self.pod, &self.ctx.node, now)
            .await
        {
            Ok(()) => {
                if !self.state.volumes_ready {
                    tracing::info!("{label}: volumes ready");
                }
                self.state.volumes_ready = true;
                volumes.next_sync(now)
            }
            Err(why) => {
                tracing::warn!("{label}: volumes: {why}");
                add(now, RETRY)
            }
        }
    }

    fn container(&self, i: usize) -> Option<Container> {
        let spec = self.pod.spec.as_ref()?;
        let inits = spec.init_containers.iter().flatten();
        inits.chain(spec.containers.iter()).nth(i).cloned()
    }

    async fn perform(&mut self, action: Action) {
        match action {
            Action::Start(i) => self.start(i).await,
            Action::Terminate(i) => self.request(i, Request::Terminate),
            Action::Kill(i) => self.request(i, Request::Kill),
            Action::Finish => {}
        }
    }

    fn request(&self, i: usize, request: Request) {
        if let Some(handle) = self.handles.get(i).and_then(Option::as_ref) {
            let _ = handle.requests.send(request);
        }
    }

    async fn start(&mut self, i: usize) {
        let now = Timestamp::now();
        let Some(container) = self.container(i) else {
            return;
        };
        let sources = match self.env_sources(&container).await {
            Ok(sources) => sources,
            Err(why) => return self.state.config_error(i, why, now),
        };
        let vars = match env::container_env(
            &self.pod,
            &self.ctx.node,
            &self.ctx.api,
            &container,
            &sources,
        ) {
            Ok(vars) => vars,
            Err(why) => return self.state.config_error(i, why, now),
        };
        match self.spawn(i, &container, vars) {
            Ok(handle) => {
                if let Some(slot) = self.handles.get_mut(i) {
                    *slot = Some(handle);
                }
            }
            Err(why) => self.state.start_failed(i, why, now),
        }
    }

    async fn env_sources(&self, container: &Container) -> Result<Sources, String> {
        let namespace = self.pod.metadata.namespace.as_deref().unwrap_or("default");
        let (secrets, config_maps) = env::referenced(container);
        let mut sources = Sources::default();
        for name in secrets {
            let data = api::secret(&self.ctx.client, namespace, &name)
                .await
                .map_err(|e| format!("reading secret {name}: {e}"))?;
            sources.secrets.insert(name, data);
        }
        for name in config_maps {
            let data = api::config_map(&self.ctx.client, namespace, &name)
                .await
                .map_err(|e| format!("reading configmap {name}: {e}"))?;
            sources.config_maps.insert(name, data);
        }
        Ok(sources)
    }

    /// Starts container `i` in the background; the events tell how it went.
    fn spawn(
        &self,
        i: usize,
        container: &Container,
        vars: Vec<(String, String)>,
    ) -> Result<Handle, String> {
        let argv = env::argv(container, &vars)?;
        let dir = ContainerDir::create(self.dir.join("containers").join(&container.name))
            .map_err(|e| format!("creating the container's folder: {e:#}"))?;
        let volumes = self
            .volumes
            .as_ref()
            .map(PodVolumes::dirs)
            .cloned()
            .unwrap_or_default();
        let root = container_root(
            container,
            &volumes,
            &HostFiles {
                staging: &dir.staging,
                termination_log: &dir.termination_log,
            },
        )?;
        let target = Target {
            exe: self.ctx.exe.clone(),
            entry: 0,
            cwd: root.cwd.clone(),
            env: vars.clone(),
        };
        let spec = ContainerSpec { root, argv };
        let log_offset = std::fs::metadata(&dir.log).map_or(0, |m| m.len());
        let (requests, serve) = mpsc::unbounded_channel();
        let events = self.events.0.clone();
        let exe = self.ctx.exe.clone();
        let label = format!("{}/{}", self.label(), container.name);
        let start_dir = dir.clone();
        tokio::spawn(async move {
            match start(&exe, &spec, &vars, &start_dir, &label).await {
                Ok(running) => {
                    let _ = events.send(Event::Started {
                        i,
                        entry: running.pid(),
                        at: running.started_at,
                    });
                    let exit = running.serve(serve).await;
                    let _ = events.send(Event::Exited { i, exit });
                }
                Err(StartError(why)) => {
                    let _ = events.send(Event::StartFailed { i, why });
                }
            }
        });
        Ok(Handle {
            requests,
            dir,
            log_offset,
            target,
            probes: Vec::new(),
        })
    }

    fn apply(&mut self, event: Event) {
        let now = Timestamp::now();
        match event {
            Event::Started { i, entry, at } => {
                tracing::info!("{}: started {}", self.label(), self.container_name(i));
                self.state.started(i, at);
                if let Some(handle) = self.handles.get_mut(i).and_then(Option::as_mut) {
                    handle.target.entry = entry;
                }
                let first = if self.has_startup_probe(i) {
                    [ProbeKind::Startup].as_slice()
                } else {
                    [ProbeKind::Readiness, ProbeKind::Liveness].as_slice()
                };
                self.spawn_probes(i, first);
            }
            Event::StartFailed { i, why } => {
                tracing::warn!(
                    "{}: {} did not start: {why}",
                    self.label(),
                    self.container_name(i)
                );
                if let Some(slot) = self.handles.get_mut(i) {
                    *slot = None;
                }
                self.state.start_failed(i, why, now);
            }
            Event::Exited { i, exit } => {
                let message = self.message(i, exit.code);
                tracing::info!(
                    "{}: {} exited with {}",
                    self.label(),
                    self.container_name(i),
                    exit.code
                );
                if let Some(slot) = self.handles.get_mut(i) {
                    *slot = None;
                }
                self.state.exited(i, exit.code, exit.signal, message, now);
            }
            Event::Probe { i, run, result } => {
                let current = self.state.containers.get(i).map(|c| c.restarts);
                if current != Some(run) {
                    return;
                }
                tracing::info!(
                    "{}: {} probe: {result:?}",
                    self.label(),
                    self.container_name(i)
                );
                self.state.probed(i, result);
                if result == ProbeResult::Started {
                    self.spawn_probes(i, &[ProbeKind::Readiness, ProbeKind::Liveness]);
                }
            }
        }
    }

    fn container_name(&self, i: usize) -> String {
        self.state
            .containers
            .get(i)
            .map(|c| c.name.clone())
            .unwrap_or_default()
    }

    fn has_startup_probe(&self, i: usize) -> bool {
        self.state
            .containers
            .get(i)
            .is_some_and(|c| c.startup_probe)
    }

    fn spawn_probes(&mut self, i: usize, kinds: &[ProbeKind]) {
        let Some(container) = self.container(i) else {
            return;
        };
        let run = self.state.containers.get(i).map_or(0, |c| c.restarts);
        let label = format!("{}/{}", self.label(), container.name);
        let Some(handle) = self.handles.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        for plan in probe_plans(&container)
            .into_iter()
            .filter(|plan| kinds.contains(&plan.kind))
        {
            let events = self.events.0.clone();
            let target = handle.target.clone();
            let report = move |result| {
                let _ = events.send(Event::Probe { i, run, result });
            };
            let probe = prober::run(plan, target, label.clone(), report);
            handle.probes.push(tokio::spawn(probe));
        }
    }

    /// The termination message of container `i`, which exited with `code`.
    fn message(&self, i: usize, code: i32) -> Option<String> {
        let handle = self.handles.get(i).and_then(Option::as_ref)?;
        let fallback = self.container(i).is_some_and(|c| {
            c.termination_message_policy.as_deref() == Some("FallbackToLogsOnError")
        });
        let file = std::fs::read(&handle.dir.termination_log).unwrap_or_default();
        let log = if fallback && file.is_empty() && code != 0 {
            let all = std::fs::read(&handle.dir.log).unwrap_or_default();
            let from = usize::try_from(handle.log_offset)
                .unwrap_or(0)
                .min(all.len());
            all[from..].to_vec()
        } else {
            Vec::new()
        };
        termination_message(&file, fallback, code, &log)
    }

    /// Writes the status when it changed; `false` when the write failed.
    async fn write_status(&mut self) -> bool {
        let previous: Vec<PodCondition> = self
            .written
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let status = pod_status(&self.state, &self.uid, &previous, Timestamp::now());
        if self.written.as_ref() == Some(&status) {
            return true;
        }
        match api::write_status(&self.pods, &self.name, &status).await {
            Ok(()) => {
                self.written = Some(status);
                true
            }
            Err(kube::Error::Api(e)) if e.is_not_found() => true,
            Err(error) => {
                tracing::warn!("{}: writing the status: {error}", self.label());
                false
            }
        }
    }

    /// Waits, with nothing running, until the Pod is deleted (then deletes it for good) or
    /// gone.
    async fn linger(&mut self) {
        loop {
            if self.pod.metadata.deletion_timestamp.is_some() {
                return self.delete().await;
            }
            let changed = self.updates.changed().await;
            if !self.take_update(changed.is_ok()) {
                return;
            }
        }
    }

    async fn delete(&mut self) {
        loop {
            match api::delete_now(&self.pods, &self.name, &self.uid).await {
                Ok(()) => {
                    tracing::info!("{}: deleted", self.label());
                    return;
                }
                Err(kube::Error::Api(status)) if status.code == 409 => return,
                Err(error) => {
                    tracing::warn!("{}: deleting: {error}", self.label());
                    if !self.pause(RETRY).await {
                        return;
                    }
                }
            }
        }
    }
}
