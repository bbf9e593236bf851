//! `kubectl herd cancel RUN`: sets `spec.cancel` (which cannot be undone); the operator deletes
//! the pod, if there is one, and cancels the children.

use herd_crds::run::{Run, RunPhase};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::connect::Cluster;
use crate::error::{CliError, api_error};
use crate::runs::{get_run, run_target, runs};
use crate::view::{phase_name, view};

/// What cancelling a Run comes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cancel {
    /// Set `spec.cancel`.
    Patch,
    /// Nothing to do; the sentence says why.
    Already(String),
}

/// What `cancel` does to `run`, or why it cannot.
pub fn cancel_decision(run: &Run) -> Result<Cancel, String> {
    let name = run.name_any();
    let phase = view(run).phase;
    match phase {
        RunPhase::Cancelled => Ok(Cancel::Already(format!("Run {name} is already cancelled"))),
        RunPhase::Succeeded | RunPhase::Failed => Err(format!(
            "Run {name} has already finished ({}): there is nothing to cancel \
             (kubectl herd result {name})",
            phase_name(phase)
        )),
        _ if run.spec.cancel => Ok(Cancel::Already(format!(
            "Run {name} is being cancelled already (kubectl herd get {name})"
        ))),
        _ => Ok(Cancel::Patch),
    }
}

/// What a cancelled Run comes to: its Pod is deleted only when it has one, its children are
/// cancelled only when it has some.
pub fn cancelled_line(run: &Run) -> String {
    let name = run.name_any();
    let status = run.status.as_ref();
    let pod = status.and_then(|s| s.pod_name.as_deref());
    let children = status.map_or(0, |s| s.children.len());
    let mut said = Vec::new();
    match pod {
        Some(pod) => said.push(format!("its Pod {pod} is being deleted")),
        None => said.push("it had no Pod yet".to_owned()),
    }
    match children {
        0 => {}
        1 => said.push("its child Run is being cancelled".to_owned()),
        n => said.push(format!("its {n} child Runs are being cancelled")),
    }
    format!("Run {name} cancelled: {}", said.join(", "))
}

/// Cancels the Run `name`; the sentence to print.
pub async fn cancel(cluster: &Cluster, name: &str) -> Result<String, CliError> {
    let run = get_run(cluster, name).await?;
    match cancel_decision(&run).map_err(CliError::new)? {
        Cancel::Already(sentence) => Ok(sentence),
        Cancel::Patch => {
            let object = format!("Run {name}");
            let patch = json!({"spec": {"cancel": true}});
            runs(cluster)
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| api_error(&e, run_target(cluster, &object, "cancelling")))?;
            Ok(cancelled_line(&run))
        }
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::condition::ConditionStatus;

    use super::*;
    use crate::testing::{question_run, run_named, run_with};

    #[test]
    fn going_runs_are_cancelled() {
        assert_eq!(cancel_decision(&run_named("r")), Ok(Cancel::Patch));
        assert_eq!(cancel_decision(&question_run("q", &[])), Ok(Cancel::Patch));
        let running = run_with(Some((ConditionStatus::Unknown, "Running")), None, None);
        assert_eq!(cancel_decision(&running), Ok(Cancel::Patch));
    }

    #[test]
    fn cancelling_twice_is_no_error() {
        let mut asked = run_with(Some((ConditionStatus::Unknown, "Running")), None, None);
        asked.spec.cancel = true;
        assert!(
            matches!(cancel_decision(&asked), Ok(Cancel::Already(s)) if s.contains("being cancelled"))
        );
        let done = run_with(Some((ConditionStatus::False, "Cancelled")), None, None);
        assert_eq!(
            cancel_decision(&done),
            Ok(Cancel::Already("Run r is already cancelled".into()))
        );
    }

    #[test]
    fn a_run_without_a_pod_is_not_said_to_lose_one() {
        assert_eq!(
            cancelled_line(&run_named("r")),
            "Run r cancelled: it had no Pod yet"
        );
        let mut running = run_with(Some((ConditionStatus::Unknown, "Running")), None, None);
        if let Some(status) = running.status.as_mut() {
            status.pod_name = Some("r-1".into());
            status.children = vec![herd_crds::run::ChildRef {
                name: "r-a".into(),
                state: RunPhase::Running,
            }];
        }
        assert_eq!(
            cancelled_line(&running),
            "Run r cancelled: its Pod r-1 is being deleted, its child Run is being cancelled"
        );
    }

    #[test]
    fn finished_runs_cannot_be_cancelled() {
        let done = run_with(Some((ConditionStatus::True, "Succeeded")), None, None);
        assert_eq!(
            cancel_decision(&done).unwrap_err(),
            "Run r has already finished (Succeeded): there is nothing to cancel (kubectl herd \
             result r)"
        );
        let failed = run_with(Some((ConditionStatus::False, "TimedOut")), None, None);
        assert!(cancel_decision(&failed).unwrap_err().contains("(Failed)"));
    }
}
