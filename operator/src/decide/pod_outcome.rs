//! What a Run's Pod says about the attempt: read from the `agent` container's terminated state
//! first, and from the Pod's own phase, reason and conditions for what the kubelet or the
//! cluster did to it; before `agent` runs, from the containers' waiting reasons and the
//! scheduler's `PodScheduled` condition, for a Pod that will not start by itself.

use herd_crds::reason::run as reason;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

/// The name of the container whose exit ends the Pod.
pub const AGENT_CONTAINER: &str = "agent";

/// Exit codes of a process ended by SIGTERM (the runner's own 143) or SIGKILL.
const STOPPED_BY_SIGNAL: [i32; 2] = [143, 137];

/// The kubelet's waiting reasons of a container that is not going to start without a change
/// (an image, a Secret, the node): pulls and restarts are retried by the kubelet with backoff,
/// so one may still clear, which `--pod-start-timeout` waits for. `ContainerCreating` and
/// `PodInitializing` are progress, not failures, and are not here.
pub const WAITING_FAILURES: [&str; 11] = [
    reason::IMAGE_PULL_BACK_OFF,
    reason::ERR_IMAGE_PULL,
    reason::INVALID_IMAGE_NAME,
    reason::ERR_IMAGE_NEVER_PULL,
    reason::IMAGE_INSPECT_ERROR,
    reason::CREATE_CONTAINER_CONFIG_ERROR,
    reason::CREATE_CONTAINER_ERROR,
    reason::RUN_CONTAINER_ERROR,
    reason::CRASH_LOOP_BACK_OFF,
    reason::PRE_CREATE_HOOK_ERROR,
    reason::PRE_START_HOOK_ERROR,
];

/// Every reason a Pod that does not start gives a Run: [`WAITING_FAILURES`] and the
/// scheduler's `Unschedulable`.
pub fn is_start_failure(why: &str) -> bool {
    why == reason::UNSCHEDULABLE || WAITING_FAILURES.contains(&why)
}

/// Where an attempt's Pod stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodOutcome {
    /// Created, `agent` not started yet (scheduling, image pulls, the sandbox's startup probe).
    Pending,
    /// Created, `agent` not started, and a container or the scheduler says why it will not
    /// start by itself.
    NotStarting(StartFailure),
    /// `agent` is running.
    Running,
    /// `agent` terminated.
    AgentExited(AgentExit),
    /// The kubelet stopped the Pod at `activeDeadlineSeconds` (the backstop).
    DeadlineExceeded,
    /// The kubelet or the eviction API evicted the Pod.
    Evicted(String),
    /// Something outside the agent ended the Pod: a disruption (`DisruptionTarget=True`) or a
    /// kubelet admission rejection. Retried.
    Infrastructure(String),
    /// The Pod is being deleted by anyone but the operator, and `agent` was stopped by it (or
    /// is stopping). Retried, unless the Run or its namespace is going away.
    Deleted,
}

/// Why a Pod does not start: the waiting reason (or `Unschedulable`) and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartFailure {
    /// One of [`WAITING_FAILURES`] or `Unschedulable`: the Run's condition reason.
    pub reason: &'static str,
    /// The kubelet's or the scheduler's message, with the container it is about.
    pub message: String,
}

/// The `agent` container's terminated state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentExit {
    /// The process's exit code.
    pub exit_code: i32,
    /// Whether the kernel killed it for memory.
    pub oom_killed: bool,
    /// The termination message (the runner's termination log, or the log tail on error).
    pub message: String,
}

/// Reads the outcome of one Pod.
pub fn pod_outcome(pod: &Pod) -> PodOutcome {
    let status = pod.status.clone().unwrap_or_default();
    let reason = status.reason.as_deref().unwrap_or_default();
    let message = status.message.clone().unwrap_or_default();
    let described = |what: &str| {
        if message.is_empty() {
            what.to_owned()
        } else {
            format!("{what}: {message}")
        }
    };
    if reason == "Evicted" {
        return PodOutcome::Evicted(described("the pod was evicted"));
    }
    let disrupted = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True");
    if let Some(condition) = disrupted {
        let why = condition
            .message
            .clone()
            .or_else(|| condition.reason.clone())
            .unwrap_or_default();
        return PodOutcome::Infrastructure(format!("the pod was disrupted: {why}"));
    }
    if reason == "DeadlineExceeded" {
        return PodOutcome::DeadlineExceeded;
    }
    let agent = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == AGENT_CONTAINER);
    let exit = agent.and_then(agent_exit);
    // A Pod being deleted stops its containers: SIGTERM, then SIGKILL after the grace period.
    // An agent that ended so (or is still stopping) was ended by the deletion, not by its own
    // failure. The operator's own deletions (cancel, deadline) have decided the Run before.
    if pod.metadata.deletion_timestamp.is_some()
        && exit
            .as_ref()
            .is_none_or(|exit| STOPPED_BY_SIGNAL.contains(&exit.exit_code))
    {
        return PodOutcome::Deleted;
    }
    if let Some(exit) = exit {
        return PodOutcome::AgentExited(exit);
    }
    match status.phase.as_deref() {
        // Failed before `agent` ever ran: the kubelet refused the Pod at admission
        // (OutOfcpu, NodeAffinity, UnexpectedAdmissionError...).
        Some("Failed") => PodOutcome::Infrastructure(described(&format!(
            "the kubelet rejected the pod ({})",
            if reason.is_empty() {
                "no reason"
            } else {
                reason
            }
        ))),
        Some("Running")
            if agent.is_some_and(|c| c.state.as_ref().is_some_and(|s| s.running.is_some())) =>
        {
            PodOutcome::Running
        }
        _ => start_failure(&status).map_or(PodOutcome::Pending, PodOutcome::NotStarting),
    }
}

/// Why a Pod whose `agent` has not started will not start by itself, if it says so: a
/// container (init containers, the `sandbox` sidecar among them, first: they start first)
/// waiting with one of [`WAITING_FAILURES`], else the scheduler's `Unschedulable`.
fn start_failure(status: &PodStatus) -> Option<StartFailure> {
    let containers = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    for container in containers {
        let Some(waiting) = container.state.as_ref().and_then(|s| s.waiting.as_ref()) else {
            continue;
        };
        let Some(&known) = waiting
            .reason
            .as_deref()
            .and_then(|why| WAITING_FAILURES.iter().find(|known| **known == why))
        else {
            continue;
        };
        let said = waiting.message.as_deref().unwrap_or_default().trim();
        let mut message = format!(
            "container {}: {}",
            container.name,
            if said.is_empty() { known } else { said }
        );
        // A crash loop's message only says it backs off; the last exit says why.
        if let Some(last) = container
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
        {
            let why = last
                .message
                .as_deref()
                .or(last.reason.as_deref())
                .unwrap_or_default()
                .trim();
            message.push_str(&format!(" (last exit code {}", last.exit_code));
            if !why.is_empty() {
                message.push_str(&format!(": {why}"));
            }
            message.push(')');
        }
        return Some(StartFailure {
            reason: known,
            message,
        });
    }
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some(reason::UNSCHEDULABLE)
        })
        .map(|c| StartFailure {
            reason: reason::UNSCHEDULABLE,
            message: c
                .message
                .clone()
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| "no node fits the pod".to_owned()),
        })
}

fn agent_exit(container: &ContainerStatus) -> Option<AgentExit> {
    let terminated = container.state.as_ref()?.terminated.as_ref()?;
    Some(AgentExit {
        exit_code: terminated.exit_code,
        oom_killed: terminated.reason.as_deref() == Some("OOMKilled"),
        message: terminated.message.clone().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "r-1"}, "status": status})).unwrap()
    }

    fn agent_state(state: serde_json::Value) -> serde_json::Value {
        json!([{"name": "agent", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": state}])
    }

    #[test]
    fn a_new_pod_is_pending() {
        assert_eq!(pod_outcome(&pod(json!({}))), PodOutcome::Pending);
        assert_eq!(pod_outcome(&Pod::default()), PodOutcome::Pending);
        let waiting = pod(json!({"phase": "Pending",
            "containerStatuses": agent_state(json!({"waiting": {"reason": "ContainerCreating"}}))}));
        assert_eq!(pod_outcome(&waiting), PodOutcome::Pending);
    }

    fn waiting(name: &str, why: &str, message: &str) -> serde_json::Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0,
               "state": {"waiting": {"reason": why, "message": message}}})
    }

    fn not_starting(why: &'static str, message: &str) -> PodOutcome {
        PodOutcome::NotStarting(StartFailure {
            reason: why,
            message: message.to_owned(),
        })
    }

    #[test]
    fn every_waiting_failure_of_agent_or_sandbox_is_a_start_failure_with_the_kubelets_message() {
        for why in WAITING_FAILURES {
            let agent = pod(json!({"phase": "Pending",
                "containerStatuses": [waiting("agent", why, "it says why")]}));
            assert_eq!(
                pod_outcome(&agent),
                not_starting(why, "container agent: it says why"),
                "{why}"
            );
            let sandbox = pod(json!({"phase": "Pending",
                "initContainerStatuses": [waiting("sandbox", why, "")],
                "containerStatuses": [waiting("agent", "PodInitializing", "")]}));
            assert_eq!(
                pod_outcome(&sandbox),
                not_starting(why, &format!("container sandbox: {why}")),
                "{why}: no message, the reason"
            );
            assert!(is_start_failure(why));
        }
        assert!(is_start_failure("Unschedulable"));
        assert!(!is_start_failure("ContainerCreating"));
    }

    #[test]
    fn an_image_pull_back_off_carries_the_kubelets_words() {
        let pulling = pod(json!({"phase": "Pending",
            "initContainerStatuses": [waiting("sandbox", "ImagePullBackOff",
                "Back-off pulling image \"ghcr.io/acme/nope:1\"")]}));
        assert_eq!(
            pod_outcome(&pulling),
            not_starting(
                "ImagePullBackOff",
                "container sandbox: Back-off pulling image \"ghcr.io/acme/nope:1\""
            )
        );
    }

    #[test]
    fn a_crash_looping_sandbox_says_how_it_last_exited() {
        let looping = pod(json!({"phase": "Pending", "initContainerStatuses": [{
            "name": "sandbox", "image": "i", "imageID": "", "ready": false, "restartCount": 4,
            "state": {"waiting": {"reason": "CrashLoopBackOff",
                                  "message": "back-off 40s restarting failed container=sandbox"}},
            "lastState": {"terminated": {"exitCode": 127, "reason": "Error",
                                         "message": "herd-runner: not found"}}}]}));
        assert_eq!(
            pod_outcome(&looping),
            not_starting(
                "CrashLoopBackOff",
                "container sandbox: back-off 40s restarting failed container=sandbox \
                 (last exit code 127: herd-runner: not found)"
            )
        );
        let mut reasonless = looping.clone();
        if let Some(last) = reasonless
            .status
            .as_mut()
            .and_then(|s| s.init_container_statuses.as_mut())
            .and_then(|c| c[0].last_state.as_mut())
            .and_then(|l| l.terminated.as_mut())
        {
            last.message = None;
            last.reason = None;
        }
        assert_eq!(
            pod_outcome(&reasonless),
            not_starting(
                "CrashLoopBackOff",
                "container sandbox: back-off 40s restarting failed container=sandbox \
                 (last exit code 127)"
            )
        );
    }

    #[test]
    fn an_unschedulable_pod_carries_the_schedulers_message() {
        let message = "0/1 nodes are available: 1 node(s) didn't match Pod's node \
                       affinity/selector. preemption: 0/1 nodes are available.";
        let unschedulable = pod(json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": message}]}));
        assert_eq!(
            pod_outcome(&unschedulable),
            not_starting("Unschedulable", message)
        );
        let silent = pod(json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}));
        assert_eq!(
            pod_outcome(&silent),
            not_starting("Unschedulable", "no node fits the pod")
        );
        for (status, why) in [("True", "Unschedulable"), ("False", "SchedulerError")] {
            let other = pod(json!({"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": status, "reason": why}]}));
            assert_eq!(pod_outcome(&other), PodOutcome::Pending, "{status} {why}");
        }
    }

    #[test]
    fn progress_is_pending_and_a_started_agent_is_not_a_start_failure() {
        let creating = pod(json!({"phase": "Pending",
            "initContainerStatuses": [waiting("sandbox", "ContainerCreating", "")],
            "containerStatuses": [waiting("agent", "PodInitializing", "")]}));
        assert_eq!(pod_outcome(&creating), PodOutcome::Pending);
        let running = pod(json!({"phase": "Running",
            "initContainerStatuses": [waiting("sandbox", "CrashLoopBackOff", "")],
            "containerStatuses": agent_state(json!({"running": {}}))}));
        assert_eq!(
            pod_outcome(&running),
            PodOutcome::Running,
            "a sandbox lost after the start is the runner's to report"
        );
    }

    #[test]
    fn a_running_agent_is_running() {
        let running = pod(json!({"phase": "Running",
            "containerStatuses": agent_state(json!({"running": {}}))}));
        assert_eq!(pod_outcome(&running), PodOutcome::Running);
    }

    #[test]
    fn the_agent_exit_is_read_with_its_message_and_oom() {
        let done = pod(json!({"phase": "Failed", "containerStatuses": agent_state(
            json!({"terminated": {"exitCode": 1, "reason": "Error", "message": "boom"}}))}));
        assert_eq!(
            pod_outcome(&done),
            PodOutcome::AgentExited(AgentExit {
                exit_code: 1,
                oom_killed: false,
                message: "boom".into()
            })
        );
        let oom = pod(json!({"phase": "Failed", "containerStatuses": agent_state(
            json!({"terminated": {"exitCode": 137, "reason": "OOMKilled"}}))}));
        assert_eq!(
            pod_outcome(&oom),
            PodOutcome::AgentExited(AgentExit {
                exit_code: 137,
                oom_killed: true,
                message: String::new()
            })
        );
    }

    #[test]
    fn a_deleted_pod_stopped_by_its_signals_is_infrastructure_but_not_an_earlier_exit() {
        let deleting = |state: serde_json::Value| {
            let mut pod = pod(json!({"phase": "Running", "containerStatuses": agent_state(state)}));
            pod.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
            );
            pod_outcome(&pod)
        };
        let deleted = PodOutcome::Deleted;
        assert_eq!(deleting(json!({"running": {}})), deleted, "still stopping");
        for code in [143, 137] {
            assert_eq!(
                deleting(json!({"terminated": {"exitCode": code}})),
                deleted,
                "exit {code}"
            );
        }
        assert!(
            matches!(
                deleting(json!({"terminated": {"exitCode": 1}})),
                PodOutcome::AgentExited(AgentExit { exit_code: 1, .. })
            ),
            "the agent failed on its own before the deletion"
        );
    }

    #[test]
    fn eviction_disruption_and_deadline_win_over_the_exit() {
        let killed = agent_state(json!({"terminated": {"exitCode": 137, "reason": "Error"}}));
        let evicted = pod(json!({"phase": "Failed", "reason": "Evicted",
            "message": "low on memory", "containerStatuses": killed}));
        assert_eq!(
            pod_outcome(&evicted),
            PodOutcome::Evicted("the pod was evicted: low on memory".into())
        );
        let disrupted = pod(json!({"phase": "Failed", "containerStatuses": killed,
            "conditions": [{"type": "DisruptionTarget", "status": "True",
                            "reason": "PreemptionByScheduler"}]}));
        assert_eq!(
            pod_outcome(&disrupted),
            PodOutcome::Infrastructure("the pod was disrupted: PreemptionByScheduler".into())
        );
        let not_disrupted = pod(json!({"phase": "Running",
            "containerStatuses": agent_state(json!({"running": {}})),
            "conditions": [{"type": "DisruptionTarget", "status": "False"}]}));
        assert_eq!(pod_outcome(&not_disrupted), PodOutcome::Running);
        let deadline = pod(json!({"phase": "Failed", "reason": "DeadlineExceeded",
            "containerStatuses": killed}));
        assert_eq!(pod_outcome(&deadline), PodOutcome::DeadlineExceeded);
    }

    #[test]
    fn an_eviction_carries_the_kubelets_message() {
        for message in [
            "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi.",
            "Usage of EmptyDir volume \"workspace\" exceeds the limit \"1Gi\".",
        ] {
            let evicted = pod(
                json!({"phase": "Failed", "reason": "Evicted", "message": message,
                "conditions": [{"type": "DisruptionTarget", "status": "True",
                                "reason": "TerminationByKubelet"}],
                "containerStatuses": agent_state(json!({"terminated": {"exitCode": 137}}))}),
            );
            assert_eq!(
                pod_outcome(&evicted),
                PodOutcome::Evicted(format!("the pod was evicted: {message}"))
            );
        }
    }

    #[test]
    fn a_pod_failed_before_the_agent_ran_was_rejected_by_the_kubelet() {
        let rejected = pod(json!({"phase": "Failed", "reason": "OutOfcpu",
            "message": "Node didn't have enough resource: cpu"}));
        assert_eq!(
            pod_outcome(&rejected),
            PodOutcome::Infrastructure(
                "the kubelet rejected the pod (OutOfcpu): Node didn't have enough resource: cpu"
                    .into()
            )
        );
        assert_eq!(
            pod_outcome(&pod(json!({"phase": "Failed"}))),
            PodOutcome::Infrastructure("the kubelet rejected the pod (no reason)".into())
        );
    }
}
