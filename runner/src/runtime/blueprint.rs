//! A `Blueprint` holds everything resolved for one run and builds its agents: the lead agent,
//! and subagents for `task` calls (in-process locally; a child Run's own pod in a cluster).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use herd_crds::report::{StopReason, Usage};
use herd_crds::wire::{ChildOutcome, ChildRequest, ChildStatus};

use crate::agent::{Agent, Limits, Middleware, Observer, RunEnv, ToolRegistry};
use crate::control::ControlPlane;
use crate::control::local::{LocalControlPlane, Questions, SubagentCaps, SubagentLauncher};
use crate::model::{AgentRole, CallContext, CallOptions, ChatModel};
use crate::prompt::{
    PromptContext, PromptError, SubagentPrompt, SubagentPromptContext, render_subagent_prompt,
    render_system_prompt,
};
use crate::sandbox::executor::ToolExecutor;
use crate::skills::Skill;
use crate::thread::ThreadState;
use crate::tools::ask_clarification::AskClarification;
use crate::tools::present_files::PresentFiles;
use crate::tools::task::{SubagentType, Task};
use crate::tools::view_image::ViewImage;
use crate::tools::web::SearchProvider;
use crate::tools::web_fetch::{WebFetch, WebFetchConfig};
use crate::tools::web_search::WebSearch;
use crate::tools::write_todos::WriteTodos;
use crate::tools::{Budget, Tool, ToolGroup, sandbox_tools::sandbox_tools};

/// Tools a subagent never gets: it cannot talk to the user or present deliverables.
const SUBAGENT_DENIED: [&str; 2] = ["ask_clarification", "present_files"];
/// The only tools of the `bash` subagent (DeerFlow's list).
const BASH_SUBAGENT_TOOLS: [&str; 5] = ["bash", "ls", "read_file", "write_file", "str_replace"];

/// The Agent's `subagents` settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubagentSettings {
    pub caps: SubagentCaps,
    /// Depth of the deepest allowed child (1 = children only, no grandchildren).
    pub max_depth: u32,
    /// Time one child may take (never more than its parent has left).
    pub timeout: Duration,
}

/// Everything resolved for one run.
pub struct Blueprint {
    pub agent_name: String,
    pub model: Arc<dyn ChatModel>,
    pub options: CallOptions,
    pub context_window: Option<u32>,
    pub supports_vision: bool,
    /// The Agent's `toolGroups` (`None` = all).
    pub tool_groups: Option<Vec<ToolGroup>>,
    pub web_search: Option<Arc<dyn SearchProvider>>,
    pub web_fetch: WebFetchConfig,
    pub skills: Vec<Skill>,
    pub soul: Option<String>,
    /// `None` when subagents are off.
    pub subagents: Option<SubagentSettings>,
    pub plan_mode: bool,
    /// Whether the lead may ask the user (`ask_clarification`).
    pub clarification: bool,
    pub attempt: u32,
    /// The Run's `maxModelCalls` (a subagent gets at most what its parent has left).
    pub max_model_calls: u32,
    pub observer: Arc<dyn Observer>,
    pub executor: Arc<dyn ToolExecutor>,
    /// Builds the middleware chain of an agent (lead or subagent).
    pub chain: Arc<dyn ChainFactory>,
}

/// What differs between the lead agent and a subagent when the chain is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainRole {
    pub role: AgentRole,
    /// `lead`, or the subagent type.
    pub name: &'static str,
    /// Whether this agent has the `task` tool.
    pub delegates: bool,
}

/// Builds the middleware chain for an agent of this run.
pub trait ChainFactory: Send + Sync {
    fn build(&self, role: ChainRole, control: &Arc<dyn ControlPlane>) -> Vec<Arc<dyn Middleware>>;
}

impl Blueprint {
    fn has_group(&self, group: ToolGroup) -> bool {
        self.tool_groups
            .as_ref()
            .is_none_or(|groups| groups.contains(&group))
    }

    /// Every tool the Agent's settings allow, before role-specific filtering.
    fn candidate_tools(&self, delegates: bool, lead: bool) -> Vec<Arc<dyn Tool>> {
        let mut tools = sandbox_tools();
        match WebFetch::new(self.web_fetch.clone()) {
            Ok(fetch) => tools.push(Arc::new(fetch)),
            Err(error) => tracing::warn!("web_fetch is unavailable: {error}"),
        }
        if let Some(provider) = &self.web_search {
            tools.push(Arc::new(WebSearch::new(provider.clone())));
        }
        if self.supports_vision {
            tools.push(Arc::new(ViewImage));
        }
        if delegates {
            tools.push(Arc::new(Task));
        }
        if lead {
            if self.plan_mode {
                tools.push(Arc::new(WriteTodos));
            }
            if self.clarification {
                tools.push(Arc::new(AskClarification));
            }
            tools.push(Arc::new(PresentFiles));
        }
        tools
    }

    /// The lead agent, reporting to `control`.
    pub fn lead(
        &self,
        control: &Arc<dyn ControlPlane>,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Agent, PromptError> {
        let delegates = self.subagents.is_some();
        let tools = ToolRegistry::new(
            self.candidate_tools(delegates, true),
            self.tool_groups.as_deref(),
            &[],
        );
        let prompt = PromptContext {
            agent_name: self.agent_name.clone(),
            soul: self.soul.clone(),
            skills: self.skills.clone(),
            subagents: self.subagents.map(|s| self.subagent_prompt(s.caps)),
            plan_mode: self.plan_mode,
            thinking: self.options.thinking,
            has_bash: tools.contains("bash"),
            has_web: tools.contains("web_fetch") || tools.contains("web_search"),
            clarification_enabled: tools.contains("ask_clarification"),
            deferred_tools: Vec::new(),
            context_window: self.context_window,
        };
        Ok(Agent {
            name: "lead".to_owned(),
            system_prompt: render_system_prompt(&prompt)?,
            model: self.model.clone(),
            tools,
            chain: self.chain.build(
                ChainRole {
                    role: AgentRole::Lead,
                    name: "lead",
                    delegates,
                },
                control,
            ),
            options: self.options.clone(),
            context: CallContext {
                role: AgentRole::Lead,
                subagent_type: None,
                purpose: Default::default(),
                attempt: self.attempt,
            },
            limits: Limits {
                max_model_calls: self.max_model_calls,
                deadline,
                ..Limits::default()
            },
            observer: self.observer.clone(),
        })
    }

    fn subagent_prompt(&self, caps: SubagentCaps) -> SubagentPrompt {
        SubagentPrompt::builtin(
            caps.max_concurrent,
            caps.max_total,
            self.has_group(ToolGroup::Bash),
        )
    }

    /// A subagent of `kind` at `depth`, within `limits`.
    fn subagent(
        &self,
        kind: SubagentType,
        name: String,
        delegates: bool,
        control: &Arc<dyn ControlPlane>,
        limits: Limits,
    ) -> Result<Agent, PromptError> {
        let mut candidates = self.candidate_tools(delegates, false);
        if kind == SubagentType::Bash {
            candidates.retain(|tool| BASH_SUBAGENT_TOOLS.contains(&tool.name()));
        }
        let tools = ToolRegistry::new(candidates, self.tool_groups.as_deref(), &SUBAGENT_DENIED);
        let prompt = SubagentPromptContext {
            skills: self.skills.clone(),
            delegation: self
                .subagents
                .filter(|_| delegates)
                .map(|s| self.subagent_prompt(s.caps)),
            has_bash: tools.contains("bash"),
            has_web: tools.contains("web_fetch") || tools.contains("web_search"),
            context_window: self.context_window,
        };
        let mut options = self.options.clone();
        // DeerFlow runs subagents with thinking off: they execute, the lead plans.
        options.thinking = false;
        Ok(Agent {
            name,
            system_prompt: render_subagent_prompt(kind.as_str(), &prompt)?,
            model: self.model.clone(),
            tools,
            chain: self.chain.build(
                ChainRole {
                    role: AgentRole::Subagent,
                    name: kind.as_str(),
                    delegates,
                },
                control,
            ),
            options,
            context: CallContext {
                role: AgentRole::Subagent,
                subagent_type: Some(kind.as_str().to_owned()),
                purpose: Default::default(),
                attempt: self.attempt,
            },
            limits,
            observer: self.observer.clone(),
        })
    }
}

/// Runs subagents in-process for one agent at `depth` (0 = the lead).
pub struct InProcessSubagents {
    pub blueprint: Arc<Blueprint>,
    pub depth: u32,
}

impl InProcessSubagents {
    /// The control plane of an agent at `depth`: children only while below `maxDepth`.
    pub fn control_plane(
        blueprint: &Arc<Blueprint>,
        depth: u32,
        questions: Questions,
        memory: Option<crate::memory::file::MemoryFile>,
    ) -> LocalControlPlane {
        match blueprint.subagents {
            Some(settings) if depth < settings.max_depth => LocalControlPlane::new(
                Some(settings.caps),
                Some(Arc::new(InProcessSubagents {
                    blueprint: blueprint.clone(),
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
        let kind = match request.subagent_type.as_str() {
            "general-purpose" => SubagentType::GeneralPurpose,
            "bash" => SubagentType::Bash,
            other => {
                return failed(
                    name,
                    ChildStatus::Failed,
                    format!("unknown subagent type '{other}'; available: general-purpose, bash"),
                    Usage::default(),
                );
            }
        };
        let Some(settings) = self.blueprint.subagents else {
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
            &self.blueprint,
            child_depth,
            Questions::Refuse,
            None,
        ));
        let delegates = child_depth < settings.max_depth;
        let limits = Limits {
            max_model_calls: self.blueprint.max_model_calls.min(parent.model_calls_left),
            deadline: Some(deadline),
            ..Limits::default()
        };
        let dyn_control: Arc<dyn ControlPlane> = control.clone();
        let agent =
            match self
                .blueprint
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
            executor: self.blueprint.executor.clone(),
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
