//! The life of one Pod on this node as the kubelet decides it, with no I/O: which container
//! starts, restarts, gets SIGTERM or SIGKILL next, and when the Pod is done. The worker
//! ([`super::worker`]) feeds it what happened (a container started, exited, passed a probe;
//! the Pod was deleted) and carries out the [`Action`]s [`PodState::step`] returns.
//!
//! The rules are the kubelet's: init containers run one at a time, in order; a native
//! sidecar (an init container with `restartPolicy: Always`) lets the next one start once it
//! has started (its startup probe passed, if it has one) and is restarted whenever it exits;
//! the regular containers start together once every init container is done; the Pod's
//! `restartPolicy` decides their restarts, with the kubelet's back-off (immediately, then
//! 10 s doubling to 5 min). When the regular containers are done, at `activeDeadlineSeconds`
//! or on deletion the Pod stops: SIGTERM to the regular containers, then to the sidecars in
//! reverse order once those have exited, SIGKILL to whatever still runs when the grace period
//! ends.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Container, Pod};

/// The longest restart back-off.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The first back-off after a restart.
const FIRST_BACKOFF: Duration = Duration::from_secs(10);
/// How soon a container whose configuration could not be made (a missing Secret) is tried
/// again.
pub const CONFIG_RETRY: Duration = Duration::from_secs(2);
/// The grace period when the Pod names none.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// What a container is to the Pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An init container that runs to completion before the next one starts.
    Init,
    /// A native sidecar: an init container with `restartPolicy: Always`.
    Sidecar,
    /// A regular container.
    Main,
}

/// The Pod's `restartPolicy`, for its regular containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    /// `Always` (the default).
    Always,
    /// `OnFailure`.
    OnFailure,
    /// `Never`.
    Never,
}

/// How a container run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The exit code (128 + the signal when a signal ended it).
    pub exit_code: i32,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// `Completed`, `Error` or `StartError`.
    pub reason: String,
    /// The termination message.
    pub message: Option<String>,
    /// When it started (`None` when it never did).
    pub started_at: Option<Timestamp>,
    /// When it ended.
    pub finished_at: Timestamp,
}

/// Where one container stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Run {
    /// Not running: never started, or waiting to restart.
    Waiting {
        /// `ContainerCreating`, `PodInitializing`, `CrashLoopBackOff`,
        /// `CreateContainerConfigError`...
        reason: String,
        /// Why, for a person.
        message: Option<String>,
    },
    /// Being started.
    Starting,
    /// Running.
    Running {
        /// When its command started.
        since: Timestamp,
        /// Its startup probe passed (or it has none).
        started: bool,
        /// Its readiness probe passes (or it has none).
        ready: bool,
        /// SIGTERM was sent.
        terminating: bool,
        /// SIGKILL was sent.
        killed: bool,
        /// A startup or liveness probe failed: it is to be killed (and maybe restarted).
        doomed: bool,
    },
    /// Ended and not to be restarted (or not yet decided).
    Ended(Ended),
}

/// One container of the Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// Its image, as the Pod names it (only reported back).
    pub image: String,
    /// Whether it has a startup probe (then it is not `started` until that passes).
    pub startup_probe: bool,
    /// Whether it has a readiness probe (then it is not `ready` until that passes).
    pub readiness_probe: bool,
    /// Where it stands now.
    pub run: Run,
    /// How its previous run ended.
    pub last: Option<Ended>,
    /// How many times it was restarted.
    pub restarts: i32,
    /// Not to be (re)started before this.
    pub not_before: Option<Timestamp>,
}

impl ContainerState {
    fn new(container: &Container, role: Role) -> ContainerState {
        ContainerState {
            name: container.name.clone(),
            role,
            image: container.image.clone().unwrap_or_default(),
            startup_probe: container.startup_probe.is_some(),
            readiness_probe: container.readiness_probe.is_some(),
            run: Run::Waiting {
                reason: "ContainerCreating".to_owned(),
                message: None,
            },
            last: None,
            restarts: 0,
            not_before: None,
        }
    }

    /// Running, its SIGKILL not sent yet.
    pub fn is_running(&self) -> bool {
        matches!(self.run, Run::Running { .. })
    }

    fn is_active(&self) -> bool {
        matches!(self.run, Run::Running { .. } | Run::Starting)
    }

    /// Running with its startup probe passed.
    pub fn is_started(&self) -> bool {
        matches!(self.run, Run::Running { started: true, .. })
    }

    /// Running, started and ready.
    pub fn is_ready(&self) -> bool {
        matches!(
            self.run,
            Run::Running {
                started: true,
                ready: true,
                terminating: false,
                ..
            }
        )
    }

    fn due(&self, now: Timestamp) -> bool {
        matches!(self.run, Run::Waiting { .. }) && self.not_before.is_none_or(|t| t <= now)
    }

    /// Exited successfully: an init container that is done.
    fn succeeded(&self) -> bool {
        matches!(&self.run, Run::Ended(ended) if ended.exit_code == 0)
    }
}

/// Why the Pod is stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopWhy {
    /// Its regular containers are done (or an init container failed for good).
    Completed,
    /// It ran past `activeDeadlineSeconds`.
    DeadlineExceeded,
    /// It is being deleted.
    Deleted,
}

/// A Pod on its way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopping {
    /// Why (the first reason stays: a deadline that passed is still the reason after a
    /// deletion).
    pub why: StopWhy,
    /// Whether the Pod is being deleted.
    pub deleted: bool,
    /// When SIGKILL goes to what still runs.
    pub kill_at: Timestamp,
}

/// What the worker is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start container `i` (its state is `Starting` now).
    Start(usize),
    /// SIGTERM to container `i`.
    Terminate(usize),
    /// SIGKILL to container `i`.
    Kill(usize),
    /// Nothing runs any more: write the final status (and delete the Pod if it is being
    /// deleted).
    Finish,
}

/// The kubelet's state of one Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    /// Init containers (sidecars among them) in order, then the regular ones.
    pub containers: Vec<ContainerState>,
    /// The restart policy of the regular containers.
    pub restart_policy: RestartPolicy,
    /// `terminationGracePeriodSeconds`.
    pub grace: Duration,
    /// `activeDeadlineSeconds`.
    pub active_deadline: Option<Duration>,
    /// When the kubelet took the Pod (`status.startTime`).
    pub start_time: Timestamp,
    /// The volumes are ready: containers may start.
    pub volumes_ready: bool,
    /// Every init container is done and every sidecar started, once: regular containers may
    /// start.
    pub initialized: bool,
    /// The Pod is stopping.
    pub stopping: Option<Stopping>,
    /// Nothing runs and the final status is due (or written).
    pub finished: bool,
}

impl PodState {
    /// A Pod the kubelet has just taken.
    pub fn new(pod: &Pod, now: Timestamp) -> PodState {
        let spec = pod.spec.clone().unwrap_or_default();
        let mut containers: Vec<ContainerState> = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| {
                let role = if c.restart_policy.as_deref() == Some("Always") {
                    Role::Sidecar
                } else {
                    Role::Init
                };
                ContainerState::new(c, role)
            })
            .collect();
        // With init containers to run first, the regular ones wait for them.
        let waiting_for_init = !containers.is_empty();
        containers.extend(spec.containers.iter().map(|c| {
            let mut state = ContainerState::new(c, Role::Main);
            if waiting_for_init {
                state.run = Run::Waiting {
                    reason: "PodInitializing".to_owned(),
                    message: None,
                };
            }
            state
        }));
        let restart_policy = match spec.restart_policy.as_deref() {
            Some("Never") => RestartPolicy::Never,
            Some("OnFailure") => RestartPolicy::OnFailure,
            _ => RestartPolicy::Always,
        };
        PodState {
            containers,
            restart_policy,
            grace: seconds(spec.termination_grace_period_seconds).unwrap_or(DEFAULT_GRACE),
            active_deadline: seconds(spec.active_deadline_seconds),
            start_time: now,
            volumes_ready: false,
            initialized: false,
            stopping: None,
            finished: false,
        }
    }

    /// The index of the container called `name`.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.containers.iter().position(|c| c.name == name)
    }

    /// Container `i` runs; `started_at` is when its command started.
    pub fn started(&mut self, i: usize, started_at: Timestamp) {
        let Some(c) = self.containers.get_mut(i) else {
            return;
        };
        c.run = Run::Running {
            since: started_at,
            started: !c.startup_probe,
            ready: !c.readiness_probe,
            terminating: false,
            killed: false,
            doomed: false,
        };
    }

    /// Container `i` could not start (containerd's `StartError`, exit code 128).
    pub fn start_failed(&mut self, i: usize, why: String, now: Timestamp) {
        self.ended(
            i,
            Ended {
                exit_code: 128,
                signal: None,
                reason: "StartError".to_owned(),
                message: Some(why),
                started_at: None,
                finished_at: now,
            },
        );
    }

    /// Container `i` could not be configured (a Secret or key the Pod names is missing): it
    /// waits and is tried again soon.
    pub fn config_error(&mut self, i: usize, why: String, now: Timestamp) {
        let Some(c) = self.containers.get_mut(i) else {
            return;
        };
        c.run = Run::Waiting {
            reason: "CreateContainerConfigError".to_owned(),
            message: Some(why),
        };
        c.not_before = Some(add(now, CONFIG_RETRY));
    }

    /// Container `i` exited.
    pub fn exited(
        &mut self,
        i: usize,
        exit_code: i32,
        signal: Option<i32>,
        message: Option<String>,
        now: Timestamp,
    ) {
        let started_at = match self.containers.get(i).map(|c| &c.run) {
            Some(Run::Running { since, .. }) => Some(*since),
            _ => None,
        };
        let reason = if exit_code == 0 { "Completed" } else { "Error" };
        self.ended(
            i,
            Ended {
                exit_code,
                signal,
                reason: reason.to_owned(),
                message,
                started_at,
                finished_at: now,
            },
        );
    }

    fn ended(&mut self, i: usize, ended: Ended) {
        if let Some(c) = self.containers.get_mut(i) {
            c.run = Run::Ended(ended);
        }
    }

    /// A probe of container `i` changed its mind.
    pub fn probed(&mut self, i: usize, probe: ProbeResult) {
        let Some(Run::Running {
            started,
            ready,
            doomed,
            ..
        }) = self.containers.get_mut(i).map(|c| &mut c.run)
        else {
            return;
        };
        match probe {
            ProbeResult::Started => *started = true,
            ProbeResult::Ready(now) => *ready = now,
            ProbeResult::Failed => *doomed = true,
        }
    }

    /// The Pod is being deleted with `grace` left.
    pub fn deleted(&mut self, grace: Duration, now: Timestamp) {
        let kill_at = add(now, grace);
        self.stopping = Some(match self.stopping {
            Some(stopping) => Stopping {
                why: stopping.why,
                deleted: true,
                kill_at: stopping.kill_at.min(kill_at),
            },
            None => Stopping {
                why: StopWhy::Deleted,
                deleted: true,
                kill_at,
            },
        });
    }

    /// Decides what happens next at `now`, updating the state as if it had happened (a
    /// container to start is `Starting`, a signal is marked sent), so each action is
    /// returned once.
    pub fn step(&mut self, now: Timestamp) -> Vec<Action> {
        if self.finished {
            return Vec::new();
        }
        if self.stopping.is_none()
            && let Some(deadline) = self.active_deadline
            && now >= add(self.start_time, deadline)
        {
            self.stopping = Some(Stopping {
                why: StopWhy::DeadlineExceeded,
                deleted: false,
                kill_at: add(now, self.grace),
            });
        }
        let mut actions = Vec::new();
        if self.stopping.is_none() {
            self.kill_doomed(&mut actions);
            self.schedule_restarts(now);
            self.start_due(now, &mut actions);
            if self.done() {
                self.stopping = Some(Stopping {
                    why: StopWhy::Completed,
                    deleted: false,
                    kill_at: add(now, self.grace),
                });
            }
        }
        if let Some(stopping) = self.stopping {
            self.stop(stopping, now, &mut actions);
            if !self.containers.iter().any(ContainerState::is_active) {
                self.finished = true;
                actions.push(Action::Finish);
            }
        }
        actions
    }

    /// The next time [`PodState::step`] has something to do without news: a back-off that
    /// ends, the deadline, a grace period that runs out.
    pub fn next_wake(&self) -> Option<Timestamp> {
        if self.finished {
            return None;
        }
        let backoffs = self
            .containers
            .iter()
            .filter(|c| matches!(c.run, Run::Waiting { .. }))
            .filter_map(|c| c.not_before);
        let deadline = match self.stopping {
            Some(stopping) => Some(stopping.kill_at),
            None => self.active_deadline.map(|d| add(self.start_time, d)),
        };
        backoffs.chain(deadline).min()
    }

    fn kill_doomed(&mut self, actions: &mut Vec<Action>) {
        for (i, c) in self.containers.iter_mut().enumerate() {
            if let Run::Running {
                doomed: true,
                killed,
                ..
            } = &mut c.run
                && !*killed
            {
                *killed = true;
                actions.push(Action::Kill(i));
            }
        }
    }

    /// Ended containers that are to run again wait out their back-off.
    fn schedule_restarts(&mut self, now: Timestamp) {
        let policy = self.restart_policy;
        for c in &mut self.containers {
            let Run::Ended(ended) = &c.run else {
                continue;
            };
            let restart = match (c.role, policy) {
                (Role::Sidecar, _) | (_, RestartPolicy::Always) => true,
                (_, RestartPolicy::OnFailure) => ended.exit_code != 0,
                (_, RestartPolicy::Never) => false,
            };
            if !restart {
                continue;
            }
            let wait = backoff(c.restarts);
            c.not_before = Some(add(ended.finished_at, wait).max(now));
            c.last = Some(ended.clone());
            c.run = Run::Waiting {
                reason: if wait.is_zero() {
                    "ContainerCreating".to_owned()
                } else {
                    "CrashLoopBackOff".to_owned()
                },
                message: (!wait.is_zero()).then(|| {
                    format!(
                        "back-off {}s restarting failed container={}",
                        wait.as_secs(),
                        c.name
                    )
                }),
            };
            c.restarts += 1;
        }
    }

    fn start_due(&mut self, now: Timestamp, actions: &mut Vec<Action>) {
        if !self.volumes_ready {
            return;
        }
        let mut open = true;
        for i in 0..self.containers.len() {
            let c = &self.containers[i];
            match c.role {
                Role::Main => {}
                // After initialisation a sidecar that exited restarts on its own.
                Role::Sidecar if self.initialized => {
                    if c.due(now) {
                        actions.push(self.start(i));
                    }
                    continue;
                }
                Role::Init if self.initialized => continue,
                Role::Init | Role::Sidecar => {
                    if !open {
                        continue;
                    }
                    let passed = match c.role {
                        Role::Init => c.succeeded(),
                        _ => c.is_started(),
                    };
                    if !passed {
                        open = false;
                        if c.due(now) {
                            actions.push(self.start(i));
                        }
                    }
                    continue;
                }
            }
            if !open {
                break;
            }
            self.initialized = true;
            if self.containers[i].due(now) {
                actions.push(self.start(i));
            }
        }
        if open {
            self.initialized = true;
        }
    }

    fn start(&mut self, i: usize) -> Action {
        self.containers[i].run = Run::Starting;
        Action::Start(i)
    }

    /// Every regular container has ended and none is to restart; or an init container
    /// failed and is not to be retried.
    fn done(&self) -> bool {
        let init_failed = self
            .containers
            .iter()
            .any(|c| c.role == Role::Init && matches!(&c.run, Run::Ended(e) if e.exit_code != 0));
        let mains_done = self
            .containers
            .iter()
            .filter(|c| c.role == Role::Main)
            .all(|c| matches!(c.run, Run::Ended(_)));
        init_failed || (self.initialized && mains_done)
    }

    fn stop(&mut self, stopping: Stopping, now: Timestamp, actions: &mut Vec<Action>) {
        let kill = now >= stopping.kill_at;
        let mains_active = self
            .containers
            .iter()
            .any(|c| c.role != Role::Sidecar && c.is_active());
        for i in 0..self.containers.len() {
            let role = self.containers[i].role;
            let later_sidecars_active = self.containers[i + 1..]
                .iter()
                .any(|c| c.role == Role::Sidecar && c.is_active());
            let signal_now = role != Role::Sidecar || !(mains_active || later_sidecars_active);
            let c = &mut self.containers[i];
            // What never started will not now.
            if let Run::Waiting { .. } = c.run {
                c.not_before = None;
            }
            let Run::Running {
                terminating,
                killed,
                ..
            } = &mut c.run
            else {
                continue;
            };
            if kill && !*killed {
                *killed = true;
                actions.push(Action::Kill(i));
            } else if signal_now && !*terminating && !*killed {
                *terminating = true;
                actions.push(Action::Terminate(i));
            }
        }
    }
}

/// What a probe found, once its thresholds are met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    /// The startup probe passed.
    Started,
    /// The readiness probe now passes (`true`) or fails (`false`).
    Ready(bool),
    /// The startup or liveness probe failed for good: the container is killed.
    Failed,
}

/// The back-off before restart number `restarts + 1`: none for the first, then 10 s doubling
/// up to 5 min.
pub fn backoff(restarts: i32) -> Duration {
    match restarts {
        i32::MIN..=0 => Duration::ZERO,
        n => {
            let doublings = u32::try_from(n - 1).unwrap_or(u32::MAX).min(16);
            FIRST_BACKOFF
                .saturating_mul(2u32.saturating_pow(doublings))
                .min(MAX_BACKOFF)
        }
    }
}

fn seconds(value: Option<i64>) -> Option<Duration> {
    value.map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0)))
}

/// `at + duration`, saturating far in the future.
pub fn add(at: Timestamp, duration: Duration) -> Timestamp {
    SignedDuration::try_from(duration)
        .ok()
        .and_then(|d| at.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::test_support::{herd_pod, merged, ready, running, t};
    use serde_json::json;

    /// A Pod of one regular container `c`, with `extra` set over its spec.
    fn one_container(extra: serde_json::Value) -> Pod {
        let spec = merged(json!({"containers": [{"name": "c"}]}), extra);
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    /// [`herd_pod`] with an init container `setup` first and `extra`, `setup` run from 0 s
    /// to its exit with 1 at 1 s.
    fn setup_failed(extra: serde_json::Value) -> PodState {
        let pod = herd_pod(merged(
            json!({"initContainers": [{"name": "setup"}]}),
            extra,
        ));
        let mut state = ready(&pod);
        state.step(t(0));
        state.started(0, t(0));
        state.exited(0, 1, None, None, t(1));
        state
    }

    #[test]
    fn nothing_starts_before_the_volumes_are_ready() {
        let mut state = PodState::new(&herd_pod(json!({})), t(0));
        assert_eq!(state.step(t(0)), []);
        state.volumes_ready = true;
        assert_eq!(state.step(t(1)), [Action::Start(0)]);
    }

    #[test]
    fn the_sidecar_starts_first_and_the_agent_after_its_startup_probe() {
        let mut state = ready(&herd_pod(json!({})));
        assert_eq!(state.step(t(0)), [Action::Start(0)]);
        assert_eq!(state.step(t(0)), [], "each action once");
        state.started(0, t(1));
        assert_eq!(state.step(t(1)), [], "the startup probe has not passed");
        assert!(!state.initialized);
        state.probed(0, ProbeResult::Started);
        assert_eq!(state.step(t(2)), [Action::Start(1)]);
        assert!(state.initialized);
        state.started(1, t(3));
        assert_eq!(state.step(t(3)), []);
        // The agent exits: the sidecar is stopped, then the Pod is finished.
        state.exited(1, 0, None, Some("done".into()), t(10));
        assert_eq!(state.step(t(10)), [Action::Terminate(0)]);
        assert_eq!(state.stopping.map(|s| s.why), Some(StopWhy::Completed));
        state.exited(0, 143, None, None, t(11));
        assert_eq!(state.step(t(11)), [Action::Finish]);
        assert!(state.finished);
        assert_eq!(state.step(t(12)), []);
        assert_eq!(state.next_wake(), None);
    }

    #[test]
    fn a_sidecar_without_a_startup_probe_lets_the_next_start_once_running() {
        let pod = herd_pod(json!({"initContainers": [
            {"name": "setup"},
            {"name": "side", "restartPolicy": "Always"}
        ]}));
        let mut state = ready(&pod);
        assert_eq!(state.step(t(0)), [Action::Start(0)]);
        state.started(0, t(0));
        assert_eq!(
            state.step(t(1)),
            [],
            "a regular init container runs to its end"
        );
        state.exited(0, 0, None, None, t(2));
        assert_eq!(state.step(t(2)), [Action::Start(1)]);
        state.started(1, t(3));
        assert_eq!(state.step(t(3)), [Action::Start(2)]);
    }

    #[test]
    fn a_failed_init_container_fails_a_never_pod_and_is_retried_otherwise() {
        assert_eq!(setup_failed(json!({})).step(t(1)), [Action::Finish]);
        let mut state = setup_failed(json!({"restartPolicy": "OnFailure"}));
        assert_eq!(
            state.step(t(1)),
            [Action::Start(0)],
            "the first restart is at once"
        );
        assert_eq!(state.containers[0].restarts, 1);
        state.started(0, t(2));
        state.exited(0, 1, None, None, t(3));
        assert_eq!(state.step(t(3)), []);
        assert_eq!(state.next_wake(), Some(t(13)), "then 10 s of back-off");
        assert!(matches!(&state.containers[0].run,
            Run::Waiting { reason, .. } if reason == "CrashLoopBackOff"));
        assert_eq!(state.step(t(13)), [Action::Start(0)]);
    }

    #[test]
    fn a_sidecar_that_exits_is_restarted_while_the_agent_runs() {
        let mut state = running(json!({}));
        state.exited(0, 2, None, None, t(5));
        assert_eq!(state.step(t(5)), [Action::Start(0)]);
        assert_eq!(
            state.containers[0].last.as_ref().map(|e| e.exit_code),
            Some(2)
        );
    }

    #[test]
    fn deletion_terminates_the_agent_then_the_sidecar_and_kills_at_the_end_of_grace() {
        let mut state = running(json!({}));
        state.deleted(Duration::from_secs(30), t(10));
        assert_eq!(state.step(t(10)), [Action::Terminate(1)], "the agent first");
        assert_eq!(state.step(t(11)), []);
        assert_eq!(state.next_wake(), Some(t(40)));
        state.exited(1, 143, None, None, t(12));
        assert_eq!(
            state.step(t(12)),
            [Action::Terminate(0)],
            "then the sidecar"
        );
        assert_eq!(state.step(t(40)), [Action::Kill(0)]);
        state.exited(0, 137, Some(9), None, t(40));
        assert_eq!(state.step(t(40)), [Action::Finish]);
        assert_eq!(
            state.stopping,
            Some(Stopping {
                why: StopWhy::Deleted,
                deleted: true,
                kill_at: t(40)
            })
        );
    }

    #[test]
    fn sidecars_stop_in_reverse_order() {
        let pod = herd_pod(json!({"initContainers": [
            {"name": "a", "restartPolicy": "Always"},
            {"name": "b", "restartPolicy": "Always"}
        ]}));
        let mut state = ready(&pod);
        for i in 0..3 {
            assert_eq!(state.step(t(0)), [Action::Start(i)]);
            state.started(i, t(0));
        }
        state.exited(2, 0, None, None, t(1));
        assert_eq!(state.step(t(1)), [Action::Terminate(1)]);
        state.exited(1, 0, None, None, t(2));
        assert_eq!(state.step(t(2)), [Action::Terminate(0)]);
    }

    #[test]
    fn the_active_deadline_stops_the_pod() {
        let mut state = running(json!({"activeDeadlineSeconds": 60}));
        assert_eq!(state.next_wake(), Some(t(60)));
        assert_eq!(state.step(t(59)), []);
        assert_eq!(state.step(t(60)), [Action::Terminate(1)]);
        assert_eq!(
            state.stopping.map(|s| (s.why, s.kill_at)),
            Some((StopWhy::DeadlineExceeded, t(90)))
        );
        // A deletion later keeps the reason and the earlier kill.
        state.deleted(Duration::from_secs(300), t(61));
        assert_eq!(
            state.stopping.map(|s| (s.why, s.deleted, s.kill_at)),
            Some((StopWhy::DeadlineExceeded, true, t(90)))
        );
    }

    #[test]
    fn a_pod_deleted_before_anything_ran_finishes_at_once() {
        let mut state = PodState::new(&herd_pod(json!({})), t(0));
        state.deleted(Duration::from_secs(30), t(1));
        assert_eq!(state.step(t(1)), [Action::Finish]);
    }

    #[test]
    fn a_failed_startup_probe_kills_and_restarts_the_sidecar() {
        let mut state = ready(&herd_pod(json!({})));
        state.step(t(0));
        state.started(0, t(0));
        state.probed(0, ProbeResult::Failed);
        assert_eq!(state.step(t(60)), [Action::Kill(0)]);
        assert_eq!(state.step(t(60)), []);
        state.exited(0, 137, Some(9), None, t(61));
        assert_eq!(state.step(t(61)), [Action::Start(0)]);
    }

    #[test]
    fn regular_containers_restart_by_the_pod_policy() {
        for (policy, code, restarts) in [
            ("Never", 1, false),
            ("OnFailure", 0, false),
            ("OnFailure", 1, true),
            ("Always", 0, true),
        ] {
            let mut state = ready(&one_container(json!({"restartPolicy": policy})));
            assert_eq!(state.step(t(0)), [Action::Start(0)]);
            state.started(0, t(0));
            state.exited(0, code, None, None, t(1));
            let actions = state.step(t(1));
            if restarts {
                assert_eq!(actions, [Action::Start(0)], "{policy} {code}");
            } else {
                assert_eq!(actions, [Action::Finish], "{policy} {code}");
            }
        }
    }

    #[test]
    fn config_errors_are_retried_soon() {
        let mut state = ready(&one_container(json!({})));
        state.step(t(0));
        state.config_error(0, "secret \"s\" not found".into(), t(0));
        assert_eq!(state.step(t(1)), []);
        assert_eq!(state.next_wake(), Some(add(t(0), CONFIG_RETRY)));
        assert_eq!(state.step(t(2)), [Action::Start(0)]);
        assert_eq!(state.containers[0].restarts, 0, "it never ran");
    }

    #[test]
    fn backoff_doubles_from_ten_seconds_to_five_minutes() {
        let secs: Vec<u64> = (0..8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [0, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(backoff(i32::MAX), MAX_BACKOFF);
    }
}
