//! The Events that say who decided on a tool call: one for each new decision in
//! `spec.responses`, naming the field manager that wrote it (from `managedFields`: whoever may
//! patch the Run may approve, and this is how the cluster remembers who did).

use herd_crds::approval::{ApprovalDecision, ApprovalRequest};
use herd_crds::run::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

/// The reason of the Event about an approval.
pub const TOOL_CALL_APPROVED: &str = "ToolCallApproved";
/// The reason of the Event about a denial.
pub const TOOL_CALL_DENIED: &str = "ToolCallDenied";

/// The field managers that own the response `id` of `spec.responses` (a list keyed by `id`),
/// in `managedFields` order.
pub fn writers_of(managed: &[ManagedFieldsEntry], id: &str) -> Vec<String> {
    let key = format!("k:{}", serde_json::json!({ "id": id }));
    managed
        .iter()
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .and_then(|fields| fields.0.get("f:spec"))
                .and_then(|spec| spec.get("f:responses"))
                .and_then(|responses| responses.get(&key))
                .is_some()
        })
        .filter_map(|entry| entry.manager.clone())
        .collect()
}

/// The Event (reason, message) of each decision among `new`: what was decided on which call
/// (`requests`: the Run's open approval requests, for the call's summary), by whom, why.
pub fn decision_events(
    new: &[&Response],
    requests: &[ApprovalRequest],
    managed: &[ManagedFieldsEntry],
) -> Vec<(&'static str, String)> {
    new.iter()
        .filter_map(|response| {
            let decision = response.decision?;
            let (reason, verb) = match decision {
                ApprovalDecision::Approve => (TOOL_CALL_APPROVED, "approved"),
                ApprovalDecision::Deny => (TOOL_CALL_DENIED, "denied"),
            };
            let call = requests
                .iter()
                .find(|r| r.id == response.id)
                .map(|r| format!(" ({})", r.summary()))
                .unwrap_or_default();
            let writers = writers_of(managed, &response.id);
            let by = if writers.is_empty() {
                "an unknown field manager".to_owned()
            } else {
                writers.join(", ")
            };
            let why = response
                .reason
                .as_deref()
                .filter(|r| !r.trim().is_empty())
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            Some((
                reason,
                format!("tool call {}{call} {verb} by {by}{why}", response.id),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    use super::*;

    fn entry(manager: &str, fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    fn managed() -> Vec<ManagedFieldsEntry> {
        vec![
            entry("kubectl-create", json!({"f:spec": {"f:task": {}}})),
            entry(
                "kubectl-herd",
                json!({"f:spec": {"f:responses": {
                    "k:{\"id\":\"a-c1\"}": {".": {}, "f:decision": {}, "f:id": {}}
                }}}),
            ),
            entry(
                "kubectl-patch",
                json!({"f:spec": {"f:responses": {
                    "k:{\"id\":\"a-c2\"}": {".": {}, "f:decision": {}, "f:id": {}, "f:reason": {}}
                }}}),
            ),
        ]
    }

    #[test]
    fn the_writer_of_a_response_is_found_by_its_key() {
        assert_eq!(writers_of(&managed(), "a-c1"), ["kubectl-herd"]);
        assert_eq!(writers_of(&managed(), "a-c2"), ["kubectl-patch"]);
        assert!(writers_of(&managed(), "a-c3").is_empty());
        assert!(writers_of(&[], "a-c1").is_empty());
    }

    #[test]
    fn each_decision_gets_an_event_naming_its_writer_and_answers_get_none() {
        let requests = vec![ApprovalRequest::new(
            "c1",
            "bash",
            r#"{"command":"rm -rf build/"}"#,
        )];
        let approve = Response::decision("a-c1", ApprovalDecision::Approve, None);
        let deny = Response::decision("a-c2", ApprovalDecision::Deny, Some("not on main"));
        let stray = Response::decision("a-c3", ApprovalDecision::Deny, None);
        let answer = Response::answer("q-1", "EU");
        let events = decision_events(&[&approve, &deny, &stray, &answer], &requests, &managed());
        assert_eq!(
            events,
            vec![
                (
                    TOOL_CALL_APPROVED,
                    "tool call a-c1 (bash: rm -rf build/) approved by kubectl-herd".to_owned()
                ),
                (
                    TOOL_CALL_DENIED,
                    "tool call a-c2 denied by kubectl-patch: not on main".to_owned()
                ),
                (
                    TOOL_CALL_DENIED,
                    "tool call a-c3 denied by an unknown field manager".to_owned()
                ),
            ]
        );
    }
}
