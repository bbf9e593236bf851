//! The state of one agent thread: everything needed to checkpoint a run and resume it exactly.

use std::collections::BTreeMap;

use herd_crds::approval::{ApprovalRequest, Verdict};
use herd_crds::report::{StopReason, Todo, Usage, UsageTotals};
use herd_crds::wire::ChildStatus;
use herd_sandbox::UploadedFile;
use serde::{Deserialize, Serialize};

use super::message::Message;

/// An image the model looked at with `view_image`: metadata only, never the bytes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ViewedImage {
    pub mime_type: String,
    pub size: u64,
}

/// Where a delegated subagent task stands: running, or finished as its child ended
/// (`wire::ChildStatus`, converted by `From`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DelegationStatus {
    Running,
    Completed,
    Failed,
    Cancelled,
    TimedOut,
}

impl From<ChildStatus> for DelegationStatus {
    fn from(status: ChildStatus) -> Self {
        match status {
            ChildStatus::Completed => DelegationStatus::Completed,
            ChildStatus::Failed => DelegationStatus::Failed,
            ChildStatus::Cancelled => DelegationStatus::Cancelled,
            ChildStatus::TimedOut => DelegationStatus::TimedOut,
        }
    }
}

impl DelegationStatus {
    /// Whether the delegation has finished (a finished delegation is never downgraded).
    pub fn is_terminal(self) -> bool {
        !matches!(self, DelegationStatus::Running)
    }
}

/// One `task` delegation of this run (the durable delegation ledger).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Delegation {
    /// The `task` tool call's id.
    pub id: String,
    pub description: String,
    pub subagent_type: String,
    pub status: DelegationStatus,
    /// A short head/tail excerpt of the result, once there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_brief: Option<String>,
}

/// A skill whose SKILL.md the agent has read or which was slash-activated.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SkillContext {
    pub name: String,
    /// Virtual path of the SKILL.md.
    pub path: String,
    pub description: String,
    /// Activated with `/skill-name` (dominates passive loads for the skill tool policy).
    #[serde(default)]
    pub slash_activated: bool,
}

/// The state of one thread.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ThreadState {
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub todos: Vec<Todo>,
    /// Virtual paths of presented files, in order, without duplicates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uploaded_files: Vec<UploadedFile>,
    /// Images viewed in this run, by virtual path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub viewed_images: BTreeMap<String, ViewedImage>,
    /// Usage so far (provider-reported; estimated where the provider reported none).
    #[serde(default)]
    pub usage: Usage,
    /// What the children this thread delegated to used (theirs included), as their outcomes
    /// said: kept in the checkpoint, so a resumed attempt still counts them.
    #[serde(default, skip_serializing_if = "is_no_usage")]
    pub children_usage: UsageTotals,
    /// Summary of messages compacted away by summarization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegations: Vec<Delegation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skill_context: Vec<SkillContext>,
    /// Why the loop stopped, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// Deferred tools whose schemas the model gets for the rest of the run (`tool_search`,
    /// keyword routing).
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub promoted_tools: std::collections::BTreeSet<String>,
    /// Tool calls of the last turn that wait for a person's decision: their results are not in
    /// the thread yet; the loop settles them before the next model call (also after a resume).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub awaiting_approval: Vec<ApprovalRequest>,
    /// Decisions given on tool calls, by call id: a decided call runs (or is denied) without
    /// asking again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub approval_verdicts: BTreeMap<String, Verdict>,
}

/// Most delegations kept in the ledger (DeerFlow's cap).
pub const MAX_DELEGATIONS: usize = 50;
/// Most skills kept in `skill_context` (DeerFlow's cap).
pub const MAX_SKILL_CONTEXT: usize = 8;

fn is_no_usage(usage: &UsageTotals) -> bool {
    *usage == UsageTotals::default()
}

impl ThreadState {
    /// The usage to report: this thread's, with its children's totals in `withChildren` once
    /// a child used anything.
    pub fn usage_with_children(&self) -> Usage {
        self.usage.clone().including_children(&self.children_usage)
    }

    /// A fresh thread holding one user message.
    pub fn new(task: impl Into<String>) -> Self {
        ThreadState {
            messages: vec![Message::user("user-0", task)],
            ..ThreadState::default()
        }
    }

    /// Adds presented files, keeping the first occurrence of each path.
    pub fn add_artifacts(&mut self, paths: impl IntoIterator<Item = String>) {
        for path in paths {
            if !self.artifacts.contains(&path) {
                self.artifacts.push(path);
            }
        }
    }

    /// Records or updates a delegation; a finished one is never downgraded.
    pub fn record_delegation(&mut self, entry: Delegation) {
        if let Some(existing) = self.delegations.iter_mut().find(|d| d.id == entry.id) {
            if existing.status.is_terminal() && !entry.status.is_terminal() {
                return;
            }
            *existing = entry;
            return;
        }
        self.delegations.push(entry);
        if self.delegations.len() > MAX_DELEGATIONS {
            let excess = self.delegations.len() - MAX_DELEGATIONS;
            self.delegations.drain(..excess);
        }
    }

    /// Records a loaded skill, deduplicated by path; the oldest fall off past the cap.
    pub fn record_skill(&mut self, skill: SkillContext) {
        if let Some(existing) = self.skill_context.iter_mut().find(|s| s.path == skill.path) {
            existing.slash_activated |= skill.slash_activated;
            return;
        }
        self.skill_context.push(skill);
        if self.skill_context.len() > MAX_SKILL_CONTEXT {
            let excess = self.skill_context.len() - MAX_SKILL_CONTEXT;
            self.skill_context.drain(..excess);
        }
    }

    /// The last assistant message, if any.
    pub fn last_assistant(&self) -> Option<&crate::thread::message::AssistantMessage> {
        self.messages.iter().rev().find_map(Message::as_assistant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delegation(id: &str, status: DelegationStatus) -> Delegation {
        Delegation {
            id: id.into(),
            description: "d".into(),
            subagent_type: "general-purpose".into(),
            status,
            result_brief: None,
        }
    }

    #[test]
    fn artifacts_are_deduplicated_in_order() {
        let mut state = ThreadState::new("t");
        state.add_artifacts(["/a".to_string(), "/b".to_string()]);
        state.add_artifacts(["/b".to_string(), "/c".to_string(), "/a".to_string()]);
        assert_eq!(state.artifacts, vec!["/a", "/b", "/c"]);
    }

    #[test]
    fn finished_delegations_are_never_downgraded() {
        let mut state = ThreadState::default();
        state.record_delegation(delegation("1", DelegationStatus::Running));
        state.record_delegation(delegation("1", DelegationStatus::Completed));
        state.record_delegation(delegation("1", DelegationStatus::Running));
        assert_eq!(state.delegations.len(), 1);
        assert_eq!(state.delegations[0].status, DelegationStatus::Completed);
    }

    #[test]
    fn delegation_ledger_is_capped() {
        let mut state = ThreadState::default();
        for i in 0..(MAX_DELEGATIONS + 5) {
            state.record_delegation(delegation(&i.to_string(), DelegationStatus::Completed));
        }
        assert_eq!(state.delegations.len(), MAX_DELEGATIONS);
        assert_eq!(state.delegations[0].id, "5");
    }

    #[test]
    fn state_round_trips_through_json() {
        let mut state = ThreadState::new("hello");
        state.title = Some("Hello".into());
        state.stop_reason = Some(StopReason::InputRequired);
        state.record_skill(SkillContext {
            name: "s".into(),
            path: "/mnt/skills/public/s/SKILL.md".into(),
            description: "d".into(),
            slash_activated: false,
        });
        let json = serde_json::to_string(&state).unwrap();
        assert_eq!(serde_json::from_str::<ThreadState>(&json).unwrap(), state);
    }
}
