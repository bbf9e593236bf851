//! Subagents of `herd-runner run`: each `task` call runs as an agent in this process, under
//! the same caps a cluster enforces on child Runs.

use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::report::{StopReason, Usage};
use herd_crds::wire::{ChildOutcome, ChildRequest, ChildStatus};

use super::agents::RunAgents;
use crate::agent::{Agent, Limits, RunEnv};
use crate::control::deadline::Deadline;
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
        let (agent, control, deadline) = match self.child(&request, &name, parent) {
            Ok(child) => child,
            Err(error) => return failed(name, ChildStatus::Failed, error, Usage::default()),
        };
        let env = RunEnv {
            executor: self.agents.resources().executor.clone(),
            control: control.clone(),
        };
        let mut state = ThreadState::new(request.prompt);
        let result = tokio::time::timeout_at(deadline, agent.run(&mut state, &env)).await;
        let usage = state.usage_with_children();
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
            Ok(Ok(outcome)) => ChildOutcome {
                name,
                status: Some(child_status(outcome.stop_reason)),
                stop_reason: Some(outcome.stop_reason),
                result: outcome.answer,
                error: outcome.error,
                usage,
                artifacts: Vec::new(),
            },
        }
    }
}

impl InProcessSubagents {
    /// The agent for `request`, its control plane (children only below `maxDepth`) and its
    /// deadline: its own timeout, never past its parent's.
    fn child(
        &self,
        request: &ChildRequest,
        name: &str,
        parent: Budget,
    ) -> Result<(Agent, Arc<LocalControlPlane>, tokio::time::Instant), String> {
        let kind = SubagentType::parse(&request.subagent_type).ok_or_else(|| {
            format!(
                "unknown subagent type '{}'; available: general-purpose, bash",
                request.subagent_type
            )
        })?;
        let plan = self.agents.plan();
        let settings = plan
            .subagents
            .ok_or_else(|| "subagents are not enabled".to_owned())?;
        let own_deadline = tokio::time::Instant::now() + settings.timeout;
        let deadline = parent
            .deadline
            .map_or(own_deadline, |parent| parent.min(own_deadline));
        let depth = self.depth + 1;
        let control = Arc::new(InProcessSubagents::control_plane(
            &self.agents,
            depth,
            Questions::Refuse,
            None,
        ));
        let limits = Limits {
            max_model_calls: plan.max_model_calls.min(parent.model_calls_left),
            deadline: Some(Deadline::at(deadline)),
            ..Limits::default()
        };
        let dyn_control: Arc<dyn ControlPlane> = control.clone();
        let agent = self
            .agents
            .subagent(
                kind,
                name.to_owned(),
                plan.delegates_at(depth),
                &dyn_control,
                limits,
            )
            .map_err(|error| error.to_string())?;
        Ok((agent, control, deadline))
    }
}

/// How a child that ran to its end ended, for its parent.
fn child_status(reason: StopReason) -> ChildStatus {
    match reason {
        reason if reason.is_answer() => ChildStatus::Completed,
        StopReason::TimedOut => ChildStatus::TimedOut,
        StopReason::Cancelled => ChildStatus::Cancelled,
        _ => ChildStatus::Failed,
    }
}
