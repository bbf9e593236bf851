//! What a Run's Pod says about the attempt: read from the `agent` container's terminated state
//! first, and from the Pod's own phase, reason and conditions for what the kubelet or the
//! cluster did to it.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// The name of the container whose exit ends the Pod.
pub const AGENT_CONTAINER: &str = "agent";

/// The exit code of a runner that could not post its result and wrote a fallback report to its
/// termination log instead.
pub const FALLBACK_EXIT_CODE: i32 = 75;

/// Exit codes of a process ended by SIGTERM (the runner's own 143) or SIGKILL.
const STOPPED_BY_SIGNAL: [i32; 2] = [143, 137];

/// Where an attempt's Pod stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodOutcome {
    /// Created, `agent` not started yet (scheduling, image pulls, the sandbox's startup probe).
    Pending,
    /// `agent` is running.
    Running,
    /// `agent` terminated.
    AgentExited(AgentExit),
    /// The kubelet stopped the Pod at `activeDeadlineSeconds` (the backstop).
    DeadlineExceeded,
    /// The kubelet or the eviction API evicted the Pod.
    Evicted(String),
    /// Something outside the agent ended the Pod: a disruption (`DisruptionTarget=True`), a
    /// kubelet admission rejection, or a deletion by anyone but the operator. Retried.
    Infrastructure(String),
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
        return PodOutcome::Infrastructure("the pod was deleted".to_owned());
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
        _ => PodOutcome::Pending,
    }
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
        let deleted = PodOutcome::Infrastructure("the pod was deleted".into());
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
