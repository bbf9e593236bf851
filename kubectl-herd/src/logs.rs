//! `kubectl herd logs RUN [-c sandbox] [-f]`: the logs of the Run's current pod
//! (`status.podName`, `<run>-<attempt>`) through the API server, as `kubectl logs` reads them.

use futures::{AsyncBufReadExt, TryStreamExt};
use herd_crds::run::{Run, RunPhase};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, LogParams};

use crate::connect::Cluster;
use crate::error::{CliError, api_error};
use crate::io::Io;
use crate::runs::get_run;
use crate::view::{phase_name, view};

/// How often `logs -f` asks again for a container that has not started.
const START_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the API server refused a log read because the container has not started yet
/// (`container "agent" in pod "r-1" is waiting to start: PodInitializing`).
fn not_started_yet(refusal: &kube::core::Status) -> bool {
    refusal.code == 400 && refusal.message.contains("is waiting to start")
}

/// The pod whose logs to read for `run`, or why there is none.
pub fn log_pod(run: &Run) -> Result<String, String> {
    let name = run.name_any();
    let status = run.status.as_ref();
    if let Some(pod) = status.and_then(|s| s.pod_name.clone()) {
        return Ok(pod);
    }
    if let Some(attempt) = status.and_then(|s| s.attempt) {
        return Ok(format!("{name}-{attempt}"));
    }
    let phase = view(run).phase;
    let why = match phase {
        RunPhase::Pending | RunPhase::Queued => "its pod is not created yet",
        _ => "it names no pod",
    };
    Err(format!(
        "Run {name} has no logs: it is {} and {why} (kubectl herd get {name})",
        phase_name(phase)
    ))
}

/// Copies the logs of `container` in the Run `name`'s pod to stdout, following them with
/// `follow`.
pub async fn logs(
    cluster: &Cluster,
    name: &str,
    container: &str,
    follow: bool,
    io: &mut Io<'_>,
) -> Result<(), CliError> {
    let run = get_run(cluster, name).await?;
    let pod = log_pod(&run).map_err(CliError::new)?;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let object = format!("the logs of Pod {pod}");
    let gone = format!(
        "the pod of Run {name} is gone: a finished, cancelled or retried Run's pod is deleted, \
         and its logs with it"
    );
    let target = cluster.target("reading", &object, &gone);
    let params = LogParams {
        container: Some(container.to_owned()),
        follow,
        ..LogParams::default()
    };
    let mut said_waiting = false;
    let stream = loop {
        match pods.log_stream(&pod, &params).await {
            Ok(stream) => break stream,
            // The kubelet reports a started container a moment after it starts (and the Run may
            // already show what the agent did): `-f` waits for it as a person would.
            Err(kube::Error::Api(refusal)) if follow && not_started_yet(&refusal) => {
                if !said_waiting {
                    let _ = writeln!(
                        io.stderr,
                        "waiting for container {container} of Pod {pod} to start ({})",
                        refusal.message
                    );
                    said_waiting = true;
                }
                tokio::select! {
                    () = tokio::time::sleep(START_POLL) => {}
                    () = &mut io.interrupt => return Ok(()),
                }
            }
            Err(error) => return Err(api_error(&error, target)),
        }
    };
    let mut lines = stream.lines();
    while let Some(line) = lines
        .try_next()
        .await
        .map_err(|e| CliError::new(format!("the logs of Pod {pod} broke off: {e}")))?
    {
        let shown = herd_crds::terminal_text::for_terminal(&line);
        // A reader that stopped reading (`| head`) ends `-f` too.
        if writeln!(io.stdout, "{shown}").is_err() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use herd_crds::condition::ConditionStatus;

    use super::*;
    use crate::testing::{run_named, run_with};

    #[test]
    fn the_current_pod_is_read() {
        let mut run = run_with(Some((ConditionStatus::Unknown, "Running")), None, None);
        if let Some(status) = run.status.as_mut() {
            status.pod_name = Some("r-2".into());
            status.attempt = Some(2);
        }
        assert_eq!(log_pod(&run), Ok("r-2".into()));
        if let Some(status) = run.status.as_mut() {
            status.pod_name = None;
        }
        assert_eq!(log_pod(&run), Ok("r-2".into()), "from the attempt");
    }

    #[test]
    fn only_a_container_waiting_to_start_is_waited_for() {
        let refusal = |code: u16, message: &str| {
            kube::core::Status::failure(message, "BadRequest").with_code(code)
        };
        assert!(not_started_yet(&refusal(
            400,
            "container \"agent\" in pod \"r-1\" is waiting to start: PodInitializing"
        )));
        assert!(!not_started_yet(&refusal(
            400,
            "container \"nope\" is not valid for pod \"r-1\""
        )));
        assert!(!not_started_yet(&refusal(404, "pods \"r-1\" not found")));
    }

    #[test]
    fn a_run_without_a_pod_says_so() {
        assert_eq!(
            log_pod(&run_named("r")).unwrap_err(),
            "Run r has no logs: it is Pending and its pod is not created yet (kubectl herd get r)"
        );
        let queued = run_with(Some((ConditionStatus::Unknown, "Queued")), None, None);
        assert!(log_pod(&queued).unwrap_err().contains("it is Queued"));
    }
}
