//! What a Run's runner waits for a person about, as the Run's conditions show it: its question
//! (`WaitingForInput`), or the tool calls of one turn held for approval (`WaitingForApproval`).
//! Both open `InputRequired` and count against `inputTimeout` the same way.

use herd_crds::reason::run as reason;
use herd_crds::run::RunReport;

/// Most characters of the text shown for approvals (the calls' one-line summaries).
const MAX_SHOWN: usize = 1024;

/// The open input request of a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Awaited {
    /// The ids whose answers (or decisions) `spec.responses` must carry.
    pub ids: Vec<String>,
    /// What a person reads: the question, or the calls to approve.
    pub question: String,
    /// `WaitingForInput` or `WaitingForApproval`.
    pub reason: &'static str,
}

impl Awaited {
    /// Whether every id has its response among `answered`.
    pub fn answered_in(&self, answered: &[String]) -> bool {
        self.ids.iter().all(|id| answered.contains(id))
    }
}

/// What `report` waits for, if anything: its question, else its approval requests.
pub fn awaited(report: &RunReport) -> Option<Awaited> {
    if let Some(question) = &report.clarification {
        return Some(Awaited {
            ids: vec![question.id.clone()],
            question: question.question.clone(),
            reason: reason::WAITING_FOR_INPUT,
        });
    }
    if report.approvals.is_empty() {
        return None;
    }
    let shown = report
        .approvals
        .iter()
        .map(|r| format!("approve {}? ({})", r.summary(), r.id))
        .collect::<Vec<_>>()
        .join("; ");
    Some(Awaited {
        ids: report.approvals.iter().map(|r| r.id.clone()).collect(),
        question: shown.chars().take(MAX_SHOWN).collect(),
        reason: reason::WAITING_FOR_APPROVAL,
    })
}

#[cfg(test)]
mod tests {
    use herd_crds::approval::ApprovalRequest;
    use herd_crds::report::{Clarification, ClarificationType};

    use super::*;

    #[test]
    fn a_question_then_approvals_then_nothing() {
        let mut report = RunReport::default();
        assert_eq!(awaited(&report), None);
        report.approvals = vec![
            ApprovalRequest::new("c1", "bash", r#"{"command":"rm -rf build/"}"#),
            ApprovalRequest::new("c2", "write_file", r#"{"path":"a"}"#),
        ];
        let approvals = awaited(&report).unwrap();
        assert_eq!(approvals.reason, "WaitingForApproval");
        assert_eq!(approvals.ids, ["a-c1", "a-c2"]);
        assert_eq!(
            approvals.question,
            "approve bash: rm -rf build/? (a-c1); approve write_file {\"path\":\"a\"}? (a-c2)"
        );
        assert!(!approvals.answered_in(&["a-c1".into()]));
        assert!(approvals.answered_in(&["a-c2".into(), "a-c1".into()]));
        report.clarification = Some(Clarification {
            id: "q-1".into(),
            question: "Which?".into(),
            kind: ClarificationType::MissingInfo,
            context: None,
            options: vec![],
            asked_at: None,
        });
        let question = awaited(&report).unwrap();
        assert_eq!(
            (question.ids, question.question.as_str(), question.reason),
            (vec!["q-1".to_owned()], "Which?", "WaitingForInput")
        );
    }

    #[test]
    fn many_calls_are_cut_for_the_condition() {
        let report = RunReport {
            approvals: (0..16)
                .map(|n| ApprovalRequest::new(&format!("c{n}"), "bash", &"x".repeat(500)))
                .collect(),
            ..RunReport::default()
        };
        assert_eq!(
            awaited(&report).unwrap().question.chars().count(),
            MAX_SHOWN
        );
    }
}
