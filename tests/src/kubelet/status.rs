//! The Pod's status as the kubelet reports it (`pods/status`), from the state of its
//! containers: the phase, its reason at the deadline, the conditions, one status per
//! container with its state, last state, exit code and termination message.

use k8s_openapi::api::core::v1::{
    ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use jiff::Timestamp;

use super::env::POD_IP;
use super::lifecycle::{ContainerState, Ended, PodState, Role, Run, StopWhy};

/// The phase's reason at `activeDeadlineSeconds`.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";

/// The phase of a Pod in `state`.
pub fn phase(state: &PodState) -> &'static str {
    let mains = || state.containers.iter().filter(|c| c.role == Role::Main);
    if state.finished {
        let deadline = state
            .stopping
            .is_some_and(|s| s.why == StopWhy::DeadlineExceeded);
        let succeeded = mains().all(|c| matches!(&c.run, Run::Ended(e) if e.exit_code == 0));
        return if !deadline && state.initialized && succeeded {
            "Succeeded"
        } else {
            "Failed"
        };
    }
    let ran = mains().any(|c| c.is_running() || c.last.is_some() || matches!(c.run, Run::Ended(_)));
    if state.initialized && ran {
        "Running"
    } else {
        "Pending"
    }
}

/// The status to write for `state`, keeping the transition times of `previous` conditions
/// whose status did not change.
pub fn pod_status(
    state: &PodState,
    pod_uid: &str,
    previous: &[PodCondition],
    now: Timestamp,
) -> PodStatus {
    let phase = phase(state);
    let deadline = state.finished
        && state
            .stopping
            .is_some_and(|s| s.why == StopWhy::DeadlineExceeded);
    let statuses = |roles: &[Role]| -> Vec<ContainerStatus> {
        state
            .containers
            .iter()
            .filter(|c| roles.contains(&c.role))
            .map(|c| container_status(c, pod_uid))
            .collect()
    };
    let init_statuses = statuses(&[Role::Init, Role::Sidecar]);
    PodStatus {
        phase: Some(phase.to_owned()),
        reason: deadline.then(|| DEADLINE_EXCEEDED.to_owned()),
        message: deadline
            .then(|| "Pod was active on the node longer than the specified deadline".to_owned()),
        conditions: Some(conditions(state, phase, previous, now)),
        container_statuses: Some(statuses(&[Role::Main])),
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        host_ip: Some(POD_IP.to_owned()),
        host_ips: Some(vec![HostIP {
            ip: POD_IP.to_owned(),
        }]),
        pod_ip: Some(POD_IP.to_owned()),
        pod_ips: Some(vec![PodIP {
            ip: POD_IP.to_owned(),
        }]),
        start_time: Some(Time(state.start_time)),
        ..PodStatus::default()
    }
}

/// The status of a Pod whose containers ran under an earlier kubelet on this node: their
/// processes died with it, so the Pod fails and they end as `ContainerStatusUnknown`. `None`
/// when none of them ever ran.
pub fn lost_status(pod: &Pod, now: Timestamp) -> Option<PodStatus> {
    let status = pod.status.as_ref()?;
    let ran = |list: &Option<Vec<ContainerStatus>>| {
        list.iter().flatten().any(|c| {
            c.container_id.is_some()
                || c.state
                    .as_ref()
                    .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        })
    };
    if !ran(&status.container_statuses) && !ran(&status.init_container_statuses) {
        return None;
    }
    let mut lost = status.clone();
    lost.phase = Some("Failed".to_owned());
    for c in lost
        .container_statuses
        .iter_mut()
        .chain(lost.init_container_statuses.iter_mut())
        .flatten()
    {
        // What was running is gone; what never started stays waiting.
        let running = c.state.as_ref().is_some_and(|s| s.running.is_some());
        if running {
            c.state = Some(ApiState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    reason: Some("ContainerStatusUnknown".to_owned()),
                    message: Some(
                        "The container could not be located when the pod was terminated".to_owned(),
                    ),
                    finished_at: Some(Time(now)),
                    ..ContainerStateTerminated::default()
                }),
                ..ApiState::default()
            });
        }
        c.ready = false;
        c.started = Some(false);
    }
    for condition in lost.conditions.iter_mut().flatten() {
        if matches!(condition.type_.as_str(), "Ready" | "ContainersReady") {
            condition.status = "False".to_owned();
            condition.reason = Some("PodCompleted".to_owned());
            condition.message = None;
            condition.last_transition_time = Some(Time(now));
        }
    }
    Some(lost)
}

fn conditions(
    state: &PodState,
    phase: &str,
    previous: &[PodCondition],
    now: Timestamp,
) -> Vec<PodCondition> {
    let terminal = matches!(phase, "Succeeded" | "Failed");
    let not_ready: Vec<&str> = state
        .containers
        .iter()
        .filter(|c| c.role != Role::Init && !c.is_ready())
        .map(|c| c.name.as_str())
        .collect();
    let incomplete: Vec<&str> = state
        .containers
        .iter()
        .filter(|c| match c.role {
            Role::Init => !matches!(&c.run, Run::Ended(e) if e.exit_code == 0),
            Role::Sidecar => !c.is_started(),
            Role::Main => false,
        })
        .map(|c| c.name.as_str())
        .collect();
    let ready_reason = if terminal {
        Some(("PodCompleted".to_owned(), None))
    } else if not_ready.is_empty() {
        None
    } else {
        Some((
            "ContainersNotReady".to_owned(),
            Some(format!(
                "containers with unready status: [{}]",
                not_ready.join(" ")
            )),
        ))
    };
    let ready = !terminal && not_ready.is_empty();
    let initialized_reason = (!state.initialized).then(|| {
        (
            "ContainersNotInitialized".to_owned(),
            Some(format!(
                "containers with incomplete status: [{}]",
                incomplete.join(" ")
            )),
        )
    });
    [
        ("PodReadyToStartContainers", state.volumes_ready, None),
        ("Initialized", state.initialized, initialized_reason),
        ("Ready", ready, ready_reason.clone()),
        ("ContainersReady", ready, ready_reason),
        ("PodScheduled", true, None),
    ]
    .into_iter()
    .map(|(type_, status, reason)| {
        let status = if status { "True" } else { "False" };
        let since = previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or(Time(now));
        let (reason, message) = reason.unwrap_or((String::new(), None));
        PodCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            last_transition_time: Some(since),
            reason: (!reason.is_empty()).then_some(reason),
            message,
            ..PodCondition::default()
        }
    })
    .collect()
}

/// The ID a started container is reported with: one per run.
fn container_id(pod_uid: &str, c: &ContainerState) -> String {
    format!("local-kubelet://{pod_uid}-{}-{}", c.name, c.restarts)
}

fn container_status(c: &ContainerState, pod_uid: &str) -> ContainerStatus {
    let id = container_id(pod_uid, c);
    let ran = !matches!(c.run, Run::Waiting { .. } | Run::Starting)
        && !matches!(&c.run, Run::Ended(e) if e.started_at.is_none());
    let ready = match c.role {
        Role::Init => matches!(&c.run, Run::Ended(e) if e.exit_code == 0),
        _ => c.is_ready(),
    };
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        image_id: String::new(),
        container_id: ran.then(|| id.clone()),
        ready,
        started: Some(c.is_started()),
        restart_count: c.restarts,
        state: Some(api_state(&c.run, &id)),
        last_state: Some(
            c.last
                .as_ref()
                .map(|ended| ApiState {
                    terminated: Some(terminated(ended, None)),
                    ..ApiState::default()
                })
                .unwrap_or_default(),
        ),
        ..ContainerStatus::default()
    }
}

fn api_state(run: &Run, id: &str) -> ApiState {
    match run {
        Run::Waiting { reason, message } => ApiState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: message.clone(),
            }),
            ..ApiState::default()
        },
        Run::Starting => ApiState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".to_owned()),
                message: None,
            }),
            ..ApiState::default()
        },
        Run::Running { since, .. } => ApiState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(*since)),
            }),
            ..ApiState::default()
        },
        Run::Ended(ended) => ApiState {
            terminated: Some(terminated(ended, Some(id))),
            ..ApiState::default()
        },
    }
}

fn terminated(ended: &Ended, id: Option<&str>) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: ended.exit_code,
        signal: ended.signal,
        reason: Some(ended.reason.clone()),
        message: ended.message.clone().filter(|m| !m.is_empty()),
        started_at: ended.started_at.map(Time),
        finished_at: Some(Time(ended.finished_at)),
        container_id: id.filter(|_| ended.started_at.is_some()).map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::test_support::{herd_pod, ready, running, t};
    use serde_json::json;

    fn json_of(status: &PodStatus) -> serde_json::Value {
        serde_json::to_value(status).unwrap()
    }

    fn condition(status: &serde_json::Value, type_: &str) -> serde_json::Value {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == type_)
            .cloned()
            .unwrap()
    }

    #[test]
    fn a_new_pod_is_pending_and_initializing() {
        let mut s = ready(&herd_pod(json!({})));
        s.step(t(0));
        let status = json_of(&pod_status(&s, "u", &[], t(0)));
        assert_eq!(status["phase"], "Pending");
        assert_eq!(
            condition(&status, "Initialized")["message"],
            "containers with incomplete status: [sandbox]"
        );
        assert_eq!(
            status["containerStatuses"][0]["state"],
            json!({"waiting": {"reason": "PodInitializing"}})
        );
        assert_eq!(status["initContainerStatuses"][0]["name"], "sandbox");
        assert_eq!(
            status["initContainerStatuses"][0]["state"],
            json!({"waiting": {"reason": "ContainerCreating"}}),
            "being started"
        );
        assert_eq!(status["podIP"], "127.0.0.1");
        assert_eq!(status["startTime"], "2023-11-14T22:13:20Z");
    }

    #[test]
    fn a_running_pod_is_ready_once_every_container_is() {
        let s = running(json!({}));
        let status = json_of(&pod_status(&s, "u", &[], t(3)));
        assert_eq!(status["phase"], "Running");
        assert_eq!(condition(&status, "Ready")["status"], "True");
        assert_eq!(condition(&status, "Initialized")["status"], "True");
        let agent = &status["containerStatuses"][0];
        assert_eq!(agent["ready"], true);
        assert_eq!(agent["started"], true);
        assert_eq!(agent["image"], "r:1");
        assert_eq!(
            agent["state"]["running"]["startedAt"],
            "2023-11-14T22:13:22Z"
        );
        assert_eq!(agent["containerID"], "local-kubelet://u-agent-0");
    }

    #[test]
    fn transition_times_stay_while_a_condition_keeps_its_status() {
        let s = running(json!({}));
        let first = pod_status(&s, "u", &[], t(3));
        let again = pod_status(&s, "u", first.conditions.as_deref().unwrap(), t(50));
        assert_eq!(first.conditions, again.conditions);
    }

    #[test]
    fn the_agent_exit_and_its_message_are_reported_and_decide_the_phase() {
        for (code, want) in [(0, "Succeeded"), (75, "Failed")] {
            let mut s = running(json!({}));
            s.exited(1, code, None, Some("the answer".into()), t(10));
            s.step(t(10));
            assert_eq!(phase(&s), "Running", "the sidecar still stops");
            s.exited(0, 143, None, None, t(11));
            s.step(t(11));
            let status = json_of(&pod_status(&s, "u", &[], t(11)));
            assert_eq!(status["phase"], want);
            assert_eq!(condition(&status, "Ready")["reason"], "PodCompleted");
            let terminated = &status["containerStatuses"][0]["state"]["terminated"];
            assert_eq!(terminated["exitCode"], code);
            assert_eq!(terminated["message"], "the answer");
            assert_eq!(
                terminated["reason"],
                if code == 0 { "Completed" } else { "Error" }
            );
            assert_eq!(terminated["startedAt"], "2023-11-14T22:13:22Z");
            assert_eq!(terminated["finishedAt"], "2023-11-14T22:13:30Z");
            assert!(status.get("reason").is_none());
        }
    }

    #[test]
    fn the_deadline_fails_the_pod_with_its_reason() {
        let mut s = running(json!({}));
        s.active_deadline = Some(std::time::Duration::from_secs(60));
        s.step(t(60));
        s.exited(1, 143, None, None, t(61));
        s.step(t(61));
        s.exited(0, 143, None, None, t(62));
        s.step(t(62));
        let status = json_of(&pod_status(&s, "u", &[], t(62)));
        assert_eq!(status["phase"], "Failed");
        assert_eq!(status["reason"], DEADLINE_EXCEEDED);
    }

    #[test]
    fn a_start_error_and_a_restart_show_in_the_states() {
        let mut s = ready(&herd_pod(json!({"restartPolicy": "OnFailure"})));
        s.step(t(0));
        s.start_failed(0, "cannot run herd-runner".into(), t(1));
        let status = json_of(&pod_status(&s, "u", &[], t(1)));
        let sandbox = &status["initContainerStatuses"][0];
        assert_eq!(sandbox["state"]["terminated"]["reason"], "StartError");
        assert_eq!(sandbox["state"]["terminated"]["exitCode"], 128);
        assert!(sandbox.get("containerID").is_none(), "it never ran");
        s.step(t(1));
        let status = json_of(&pod_status(&s, "u", &[], t(1)));
        let sandbox = &status["initContainerStatuses"][0];
        assert_eq!(sandbox["restartCount"], 1);
        assert_eq!(
            sandbox["lastState"]["terminated"]["message"],
            "cannot run herd-runner"
        );
        assert_eq!(sandbox["state"]["waiting"]["reason"], "ContainerCreating");
    }

    #[test]
    fn a_pod_whose_containers_ran_under_an_earlier_kubelet_fails() {
        let mut s = ready(&herd_pod(json!({})));
        s.step(t(0));
        s.started(0, t(1));
        let status = pod_status(&s, "u", &[], t(3));
        let pod = Pod {
            status: Some(status.clone()),
            ..Pod::default()
        };
        let lost = json_of(&lost_status(&pod, t(9)).unwrap());
        assert_eq!(lost["phase"], "Failed");
        let sandbox = &lost["initContainerStatuses"][0];
        assert_eq!(
            sandbox["state"]["terminated"]["reason"],
            "ContainerStatusUnknown"
        );
        assert_eq!(sandbox["state"]["terminated"]["exitCode"], 137);
        assert_eq!(sandbox["ready"], false);
        let agent = &lost["containerStatuses"][0];
        assert_eq!(
            agent["state"]["waiting"]["reason"], "PodInitializing",
            "the agent never started: {agent}"
        );
        assert_eq!(condition(&lost, "Ready")["status"], "False");
        let mut fresh = ready(&herd_pod(json!({})));
        fresh.step(t(0));
        let pending = Pod {
            status: Some(pod_status(&fresh, "u", &[], t(0))),
            ..Pod::default()
        };
        assert_eq!(
            lost_status(&pending, t(1)),
            None,
            "nothing ran: it starts afresh"
        );
        assert_eq!(lost_status(&Pod::default(), t(1)), None);
    }

    #[test]
    fn a_pod_deleted_before_it_ran_fails() {
        let mut s = ready(&herd_pod(json!({})));
        s.deleted(std::time::Duration::from_secs(30), t(1));
        s.step(t(1));
        assert_eq!(phase(&s), "Failed");
    }
}
