//! Subagents of `herd-runner run`: each `task` call runs as an agent in this process, under
//! the same caps a cluster enforces on child Runs.

use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::report::{StopReason, Usage};
use herd_crds::wire::{ChildOutcome, ChildRequest, ChildStatus};

use super::agents::RunAgents;
use crate::agent::{Limits, RunEnv};
use crate::control::local::{LocalControlPlane, Questions, SubagentLauncher};
use crate::control::{Budget, ControlPlane};
use crate::memory::file::MemoryFile;
use crate::thread::ThreadState;
use crate::tools::task::SubagentType;

/// Runs subagents in-process for one agent at `depth` (0 = the lead).
pub struct InProcessSubagents {
    agents: Arc<RunAgents>,
    depth: u32,
}

impl InProcessSubagents {
    /// The control plane of an agent at `depth`: children only while below `maxDepth`.
    pub fn control_plane(
        agents: &Arc<RunAgents>,
        depth: u32,
        questions: Questions,
        memory: Option<MemoryFile>,
    ) -> LocalControlPlane {
        match agents.plan().subagents {
            Some(settings) if agents.plan().delegates_at(depth) => LocalControlPlane::new(
                Some(settings.caps),
                Some(Arc::new(InProcessSubagents {
                    agents: agents.clone(),
                    depth,
                })),
                questions,
                memory,
            ),
            _ => LocalControlPlane::new(None, None, questions, memory),
        }
    }
}

fn failed(name: String, status: ChildStatus, error: String, usage: Usage) -> ChildOutcome {
    ChildOutcome {
        name,
        status: Some(status),
        stop_reason: None,
        result: String::new(),
        error: Some(error),
        usage,
        artifacts: Vec::new(),
    }
}

#[async_trait]
impl SubagentLauncher for InProcessSubagents {
    async fn launch(&self, request: ChildRequest, parent: Budget) -> ChildOutcome {
        let name = format!("{}#{}", request.subagent_type, request.tool_call_id);
        let Some(kind) = SubagentType::parse(&request.subagent_type) else {
            return failed(
                name,
                ChildStatus::Failed,
                format!(
                    "unknown subagent type '{}'; available: general-purpose, bash",
                    request.subagent_type
                ),
                Usage::default(),
            );
        };
        let plan = self.agents.plan();
        let Some(settings) = plan.subagents else {
            return failed(
                name,
                ChildStatus::Failed,
                "subagents are not enabled".into(),
                Usage::default(),
            );
        };
        let child_depth = self.depth + 1;
        let own_deadline = tokio::time::Instant::now() + settings.timeout;
        let deadline = parent
            .deadline
            .map_or(own_deadline, |parent| parent.min(own_deadline));
        let control: Arc<LocalControlPlane> = Arc::new(InProcessSubagents::control_plane(
            &self.agents,
            child_depth,
            Questions::Refuse,
            None,
        ));
        let limits = Limits {
            max_model_calls: plan.max_model_calls.min(parent.model_calls_left),
            deadline: Some(deadline),
            ..Limits::default()
        };
        let dyn_control: Arc<dyn ControlPlane> = control.clone();
        let delegates = plan.delegates_at(child_depth);
        let agent = match self
            .agents
            .subagent(kind, name.clone(), delegates, &dyn_control, limits)
        {
            Ok(agent) => agent,
            Err(error) => {
                return failed(
                    name,
                    ChildStatus::Failed,
                    error.to_string(),
                    Usage::default(),
                );
            }
        };
        let env = RunEnv {
            executor: self.agents.resources().executor.clone(),
            control: dyn_control,
        };
        let mut state = ThreadState::new(request.prompt);
        let result = tokio::time::timeout_at(deadline, agent.run(&mut state, &env)).await;
        let mut usage = state.usage;
        usage.add(&control.children_usage());
        match result {
            Err(_) => ChildOutcome {
                name,
                status: Some(ChildStatus::TimedOut),
                stop_reason: Some(StopReason::TimedOut),
                result: state
                    .last_assistant()
                    .map(|m| m.content.clone())
                    .unwrap_or_default(),
                error: Some("the subagent ran out of time".into()),
                usage,
                artifacts: Vec::new(),
            },
            Ok(Err(error)) => failed(name, ChildStatus::Failed, error.to_string(), usage),
            Ok(Ok(outcome)) => {
                let status = match outcome.stop_reason {
                    reason if reason.is_answer() => ChildStatus::Completed,
                    StopReason::TimedOut => ChildStatus::TimedOut,
                    StopReason::Cancelled => ChildStatus::Cancelled,
                    _ => ChildStatus::Failed,
                };
                ChildOutcome {
                    name,
                    status: Some(status),
                    stop_reason: Some(outcome.stop_reason),
                    result: outcome.answer,
                    error: outcome.error,
                    usage,
                    artifacts: Vec::new(),
                }
            }
        }
    }
}
