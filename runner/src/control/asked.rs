//! What a run waits for a person about: a clarification question, or the tool calls of one
//! turn that need approval. Both take the same way: reported with the thread's checkpoint,
//! then awaited in the Run's `spec.responses` (or at the terminal), one id after the other.

use herd_crds::approval::{ApprovalDecision, ApprovalRequest, Verdict};
use herd_crds::report::Clarification;
use herd_crds::wire::Answer;

use super::checkpoint::Checkpoint;
use crate::thread::ThreadState;

/// What a run asks a person.
#[derive(Clone, Copy, Debug)]
pub enum Asked<'a> {
    /// A clarification question; its answer is text.
    Question(&'a Clarification),
    /// Tool calls held for approval; each one's answer is a decision.
    Approval(&'a [ApprovalRequest]),
}

impl Asked<'_> {
    /// The ids the answers quote, in order.
    pub fn ids(&self) -> Vec<&str> {
        match self {
            Asked::Question(question) => vec![question.id.as_str()],
            Asked::Approval(requests) => requests.iter().map(|r| r.id.as_str()).collect(),
        }
    }

    /// The checkpoint of a run waiting for this, with thread `state`.
    pub fn checkpoint(&self, state: ThreadState) -> Checkpoint {
        match self {
            Asked::Question(question) => Checkpoint::question((*question).clone(), state),
            Asked::Approval(requests) => Checkpoint::approval(requests.to_vec(), state),
        }
    }
}

/// The verdict an answer in `spec.responses` gives an approval request: its decision, or,
/// for a text answered where a decision was due, a denial quoting it (only a decision
/// approves).
pub fn verdict_of(answer: &Answer) -> Verdict {
    match answer.decision {
        Some(ApprovalDecision::Approve) => Verdict::approve(),
        Some(ApprovalDecision::Deny) => Verdict::deny(answer.reason.clone()),
        None => Verdict::deny(Some(format!(
            "answered {:?} instead of approve or deny",
            answer.answer
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_decision_approves() {
        let decided = |decision, reason: Option<&str>| Answer {
            decision,
            reason: reason.map(str::to_owned),
            ..Answer::text("a-1", "")
        };
        assert_eq!(
            verdict_of(&decided(Some(ApprovalDecision::Approve), None)),
            Verdict::approve()
        );
        assert_eq!(
            verdict_of(&decided(Some(ApprovalDecision::Deny), Some("no"))),
            Verdict::deny(Some("no".into()))
        );
        assert_eq!(
            verdict_of(&Answer::text("a-1", "yes")),
            Verdict::deny(Some("answered \"yes\" instead of approve or deny".into()))
        );
    }

    #[test]
    fn a_turns_requests_are_awaited_in_order() {
        let requests = vec![
            ApprovalRequest::new("c1", "bash", "{}"),
            ApprovalRequest::new("c2", "write_file", "{}"),
        ];
        assert_eq!(Asked::Approval(&requests).ids(), ["a-c1", "a-c2"]);
    }
}
