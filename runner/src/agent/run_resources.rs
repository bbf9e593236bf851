//! What every agent of one run shares, built by the run's shell from its plan.

use std::sync::Arc;

use herd_sandbox::ToolExecutor;

use super::Observer;
use crate::model::ChatModel;
use crate::skills::Skill;

/// The model client, the sandbox, the skills found in it, and who watches the run. The lead
/// and its in-process subagents use the same ones.
#[derive(Clone)]
pub struct RunResources {
    /// Also for title, summary and memory calls.
    pub model: Arc<dyn ChatModel>,
    pub executor: Arc<dyn ToolExecutor>,
    /// The skills the Agent enabled, as discovered in the sandbox.
    pub skills: Vec<Skill>,
    pub observer: Arc<dyn Observer>,
}
