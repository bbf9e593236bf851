//! `kubectl herd approve RUN [ID]` and `kubectl herd deny RUN [ID] --reason …`: append
//! `{id, decision, reason}` to `spec.responses` with a JSON patch, the id being one of the tool
//! calls the Run holds for approval (`status.report.approvals`). Without an id the Run must
//! hold exactly one. Like answers, decisions are append-only, and the patch only applies to the
//! Run and the responses it was decided on. Whoever may patch the Run may decide: RBAC is the
//! control (docs/approval.md).

use herd_crds::approval::{ApprovalDecision, ApprovalRequest, MAX_DECISION_REASON};
use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::reason::condition_type;
use herd_crds::run::{MAX_RESPONSES, Run};
use herd_crds::terminal_text::one_line;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::connect::Cluster;
use crate::error::{CliError, api_error};
use crate::runs::{get_run, run_target, runs};
use crate::view::{phase_name, view};

/// The field manager of the decisions this command writes (the Run's Event names it).
pub const FIELD_MANAGER: &str = "kubectl-herd";

/// A decision on a held tool call, as a patch.
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionPatch {
    /// The approval request decided on.
    pub request: ApprovalRequest,
    /// The JSON patch (RFC 6902).
    pub patch: Value,
}

/// The tool calls `run` holds for approval that no response decides yet (none once it has
/// finished or is being cancelled).
pub fn pending_approvals(run: &Run) -> Vec<&ApprovalRequest> {
    if run.spec.cancel {
        return Vec::new();
    }
    let Some(status) = run.status.as_ref() else {
        return Vec::new();
    };
    let finished = find_condition(&status.conditions, condition_type::SUCCEEDED)
        .is_some_and(|c| c.status != ConditionStatus::Unknown);
    if finished {
        return Vec::new();
    }
    status
        .report
        .as_ref()
        .map(|report| {
            report
                .approvals
                .iter()
                .filter(|r| !run.spec.responses.iter().any(|given| given.id == r.id))
                .collect()
        })
        .unwrap_or_default()
}

/// The verb of `decision` in the past tense.
pub fn decided(decision: ApprovalDecision) -> &'static str {
    match decision {
        ApprovalDecision::Approve => "approved",
        ApprovalDecision::Deny => "denied",
    }
}

/// The command of `decision`.
fn command(decision: ApprovalDecision) -> &'static str {
    match decision {
        ApprovalDecision::Approve => "approve",
        ApprovalDecision::Deny => "deny",
    }
}

/// The held calls, one a line: `  a-call_1  bash: rm -rf build/`.
pub fn listing(requests: &[&ApprovalRequest]) -> String {
    requests
        .iter()
        .map(|r| format!("\n  {}  {}", one_line(&r.id), one_line(&r.summary())))
        .collect()
}

/// The JSON patch deciding `decision` (with `reason`) on the call `id` of `run` (without: its
/// only held call), or why there is none to decide. It tests the Run's uid and its responses
/// so far: a Run recreated under the same name or answered meanwhile refuses it.
pub fn decision_patch(
    run: &Run,
    id: Option<&str>,
    decision: ApprovalDecision,
    reason: Option<&str>,
) -> Result<DecisionPatch, String> {
    let name = run.name_any();
    let verb = command(decision);
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    if let Some(reason) = reason
        && reason.chars().count() > MAX_DECISION_REASON
    {
        return Err(format!(
            "the reason has {} characters; a Run takes at most {MAX_DECISION_REASON}",
            reason.chars().count()
        ));
    }
    let pending = pending_approvals(run);
    let request = match (id, pending.as_slice()) {
        (_, []) => return Err(nothing_held(run, id)),
        (None, [only]) => *only,
        (None, several) => {
            return Err(format!(
                "Run {name} holds {} tool calls for approval; name one:{}\n(kubectl herd {verb} \
                 {name} ID)",
                several.len(),
                listing(several)
            ));
        }
        (Some(id), held) => match held.iter().find(|r| r.id == id) {
            Some(request) => *request,
            None => return Err(nothing_held(run, Some(id))),
        },
    };
    if run.spec.responses.len() >= MAX_RESPONSES {
        return Err(format!(
            "Run {name} already has {} responses, the most a Run takes: it cannot take another \
             decision (kubectl herd cancel {name} stops it)",
            run.spec.responses.len()
        ));
    }
    let mut value = json!({"id": request.id, "decision": decision});
    if let Some(reason) = reason {
        value["reason"] = json!(reason);
    }
    let patch = json!([
        {"op": "test", "path": "/metadata/uid", "value": run.metadata.uid},
        {"op": "test", "path": "/spec/responses", "value": run.spec.responses},
        {"op": "add", "path": "/spec/responses/-", "value": value},
    ]);
    Ok(DecisionPatch {
        request: request.clone(),
        patch,
    })
}

/// Why `run` holds no call to decide (under `id`, when given).
fn nothing_held(run: &Run, id: Option<&str>) -> String {
    let name = run.name_any();
    let status = run.status.as_ref();
    let finished = status
        .and_then(|s| find_condition(&s.conditions, condition_type::SUCCEEDED))
        .is_some_and(|c| c.status != ConditionStatus::Unknown);
    if finished {
        return format!(
            "Run {name} has finished ({}): it holds no tool call any more (kubectl herd result \
             {name})",
            phase_name(view(run).phase)
        );
    }
    if run.spec.cancel {
        return format!(
            "Run {name} is being cancelled: it takes no decision any more (kubectl herd get \
             {name})"
        );
    }
    let requests = status
        .and_then(|s| s.report.as_ref())
        .map(|r| r.approvals.as_slice())
        .unwrap_or_default();
    let decided_already = |id: &str| {
        run.spec
            .responses
            .iter()
            .find(|given| given.id == id)
            .and_then(|given| given.decision)
    };
    match id {
        Some(id) => {
            if let Some(decision) = decided_already(id) {
                return format!(
                    "the tool call {} of Run {name} is already {}; the agent picks it up \
                     shortly (kubectl herd follow {name})",
                    one_line(id),
                    decided(decision)
                );
            }
            let pending = pending_approvals(run);
            if pending.is_empty() {
                format!(
                    "Run {name} holds no tool call for approval, none under the id {:?}: it is \
                     {} (kubectl herd get {name})",
                    one_line(id),
                    phase_name(view(run).phase)
                )
            } else {
                format!(
                    "Run {name} holds no tool call under the id {:?}; these wait:{}",
                    one_line(id),
                    listing(&pending)
                )
            }
        }
        None => match requests {
            [only] if decided_already(&only.id).is_some() => format!(
                "the tool call {} of Run {name} is already decided; the agent picks it up \
                 shortly (kubectl herd follow {name})",
                one_line(&only.id)
            ),
            _ => format!(
                "Run {name} holds no tool call for approval: it is {} (kubectl herd get {name})",
                phase_name(view(run).phase)
            ),
        },
    }
}

/// Decides `decision` on the Run `name`'s held call `id` (without: its only one); the request
/// decided.
pub async fn decide(
    cluster: &Cluster,
    name: &str,
    id: Option<&str>,
    decision: ApprovalDecision,
    reason: Option<&str>,
) -> Result<ApprovalRequest, CliError> {
    let run = get_run(cluster, name).await?;
    let DecisionPatch { request, patch } =
        decision_patch(&run, id, decision, reason).map_err(CliError::new)?;
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| CliError::new(e.to_string()))?;
    let object = format!("Run {name}");
    // The Run's Event about the decision names its field manager.
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match runs(cluster)
        .patch(name, &params, &Patch::<()>::Json(patch))
        .await
    {
        Ok(_) => Ok(request),
        // A failed `test` operation: the Run was answered or recreated since it was read.
        Err(kube::Error::Api(status)) if status.code == 422 => {
            let again = get_run(cluster, name).await?;
            match decision_patch(&again, id, decision, reason) {
                Err(why) => Err(CliError::new(why)),
                Ok(_) => Err(CliError::new(format!(
                    "the API server refused the decision on Run {name}: {} (run the command \
                     again)",
                    one_line(&status.message)
                ))),
            }
        }
        Err(error) => Err(api_error(
            &error,
            run_target(cluster, &object, command(decision)),
        )),
    }
}

/// What `kubectl herd approve|deny` prints once the decision is written.
pub fn decided_line(run: &str, decision: ApprovalDecision, request: &ApprovalRequest) -> String {
    format!(
        "{} {} of Run {run} ({}); follow it with: kubectl herd follow {run}",
        decided(decision),
        one_line(&request.id),
        one_line(&request.summary())
    )
}

#[cfg(test)]
mod tests {
    use herd_crds::condition::ConditionStatus;
    use herd_crds::run::Response;

    use super::*;
    use crate::testing::{approval_run, run_with};

    fn held() -> Vec<ApprovalRequest> {
        vec![
            ApprovalRequest::new("call_1", "bash", r#"{"command":"rm -rf build/"}"#),
            ApprovalRequest::new("call_2", "write_file", r#"{"path":"/mnt/a.md"}"#),
        ]
    }

    #[test]
    fn the_only_held_call_is_decided_without_an_id() {
        let run = approval_run(&held()[..1], &[]);
        let approved = decision_patch(&run, None, ApprovalDecision::Approve, None).unwrap();
        assert_eq!(approved.request.id, "a-call_1");
        assert_eq!(
            approved.patch,
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "uid-r"},
                {"op": "test", "path": "/spec/responses", "value": []},
                {"op": "add", "path": "/spec/responses/-", "value": {"id": "a-call_1", "decision": "approve"}},
            ])
        );
        let denied =
            decision_patch(&run, None, ApprovalDecision::Deny, Some(" use make clean ")).unwrap();
        assert_eq!(
            denied.patch[2]["value"],
            json!({"id": "a-call_1", "decision": "deny", "reason": "use make clean"})
        );
        let patch: Result<json_patch::Patch, _> = serde_json::from_value(denied.patch);
        assert!(patch.is_ok(), "a valid RFC 6902 patch");
    }

    #[test]
    fn several_held_calls_need_an_id_and_an_unknown_one_lists_them() {
        let run = approval_run(&held(), &[]);
        insta::assert_snapshot!(
            "approve_which",
            decision_patch(&run, None, ApprovalDecision::Approve, None).unwrap_err()
        );
        insta::assert_snapshot!(
            "deny_unknown_id",
            decision_patch(&run, Some("a-call_9"), ApprovalDecision::Deny, None).unwrap_err()
        );
        let second =
            decision_patch(&run, Some("a-call_2"), ApprovalDecision::Deny, Some("no")).unwrap();
        assert_eq!(second.request.tool, "write_file");
    }

    #[test]
    fn nothing_to_decide_says_why() {
        let running = run_with(Some((ConditionStatus::Unknown, "Running")), None, None);
        assert_eq!(
            decision_patch(&running, None, ApprovalDecision::Approve, None).unwrap_err(),
            "Run r holds no tool call for approval: it is Running (kubectl herd get r)"
        );
        let done = run_with(Some((ConditionStatus::True, "Succeeded")), None, None);
        assert_eq!(
            decision_patch(&done, Some("a-1"), ApprovalDecision::Approve, None).unwrap_err(),
            "Run r has finished (Succeeded): it holds no tool call any more (kubectl herd \
             result r)"
        );
        let decided_run = approval_run(
            &held()[..1],
            &[Response::decision("a-call_1", ApprovalDecision::Deny, None)],
        );
        assert_eq!(
            decision_patch(
                &decided_run,
                Some("a-call_1"),
                ApprovalDecision::Approve,
                None
            )
            .unwrap_err(),
            "the tool call a-call_1 of Run r is already denied; the agent picks it up shortly \
             (kubectl herd follow r)"
        );
        let mut cancelling = approval_run(&held(), &[]);
        cancelling.spec.cancel = true;
        assert!(
            decision_patch(&cancelling, None, ApprovalDecision::Approve, None)
                .unwrap_err()
                .contains("is being cancelled")
        );
    }

    #[test]
    fn a_long_reason_and_a_full_run_are_refused() {
        let run = approval_run(&held()[..1], &[]);
        let long = "x".repeat(MAX_DECISION_REASON + 1);
        assert!(
            decision_patch(&run, None, ApprovalDecision::Deny, Some(&long))
                .unwrap_err()
                .contains("at most 1024")
        );
        let full: Vec<Response> = (0..MAX_RESPONSES)
            .map(|i| Response::answer(&format!("q{i}"), "a"))
            .collect();
        let run = approval_run(&held()[..1], &full);
        assert!(
            decision_patch(&run, None, ApprovalDecision::Approve, None)
                .unwrap_err()
                .contains("the most a Run takes")
        );
    }

    #[test]
    fn the_line_printed_after_a_decision() {
        insta::assert_snapshot!(
            "approved_line",
            decided_line("r", ApprovalDecision::Approve, &held()[0])
        );
    }
}
