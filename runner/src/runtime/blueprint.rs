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
use crate::prompt::budget::{CHAT_TEMPLATE_TOKENS, ContextBudget};
use crate::prompt::tokenizer::count_tokens;
use crate::prompt::{
    PromptContext, PromptError, SubagentPrompt, SubagentPromptContext, render_subagent_prompt,
    render_system_prompt,
};
use crate::sandbox::executor::ToolExecutor;
use crate::skills::Skill;
use crate::thread::ThreadState;
use crate::tools::ask_clarification::AskClarification;
use crate::tools::lean::Lean;
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
    /// Tokens its system prompt and tool schemas take (`tokenizer::count_tokens`); 0 without
    /// a context window, where nothing is budgeted.
    pub prompt_tokens: usize,
}

/// Builds the middleware chain for an agent of this run.
pub trait ChainFactory: Send + Sync {
    fn build(&self, role: ChainRole, control: &Arc<dyn ControlPlane>) -> Vec<Arc<dyn Middleware>>;

    /// The tokens the chain's injected memory needs at least in a small context window,
    /// which this agent's system prompt leaves room for.
    fn min_injected_tokens(&self, _role: ChainRole) -> usize {
        0
    }
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
        tools.push(Arc::new(WebFetch::new(self.web_fetch.clone())));
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

    /// The tools of an agent; with lean schemas when the full ones would take more than half
    /// of a small context window's prompt share.
    fn registry(&self, candidates: Vec<Arc<dyn Tool>>, denied: &[&str]) -> ToolRegistry {
        let groups = self.tool_groups.as_deref();
        let full = ToolRegistry::new(candidates.clone(), groups, denied);
        let Some(window) = self.context_window else {
            return full;
        };
        if self.schema_tokens(&full) <= ContextBudget::new(window).prompt() / 2 {
            return full;
        }
        let lean = candidates
            .into_iter()
            .map(|tool| Arc::new(Lean(tool)) as Arc<dyn Tool>)
            .collect();
        ToolRegistry::new(lean, groups, denied)
    }

    /// The lead agent, reporting to `control`.
    pub fn lead(
        &self,
        control: &Arc<dyn ControlPlane>,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Agent, PromptError> {
        let delegates = self.subagents.is_some();
        let tools = self.registry(self.candidate_tools(delegates, true), &[]);
        let mut role = ChainRole {
            role: AgentRole::Lead,
            name: "lead",
            delegates,
            prompt_tokens: 0,
        };
        let schema_tokens = self.schema_tokens(&tools);
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
            tools: tools.names().map(str::to_owned).collect(),
            deferred_tools: Vec::new(),
            context_window: self.context_window,
            reserved_tokens: schema_tokens + self.chain.min_injected_tokens(role),
        };
        let system_prompt = render_system_prompt(&prompt)?;
        if self.context_window.is_some() {
            role.prompt_tokens = schema_tokens + count_tokens(&system_prompt);
        }
        Ok(Agent {
            name: "lead".to_owned(),
            system_prompt,
            model: self.model.clone(),
            tools,
            chain: self.chain.build(role, control),
            options: self.call_options(),
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

    /// What the tool schemas, with the chat template's wrapping, take of a small context
    /// window's prompt half; nothing to count without a window (nor a tokenizer to load).
    fn schema_tokens(&self, tools: &ToolRegistry) -> usize {
        if self.context_window.is_none() || tools.schemas().is_empty() {
            return 0;
        }
        serde_json::to_string(tools.schemas())
            .map(|json| count_tokens(&json) + CHAT_TEMPLATE_TOKENS)
            .unwrap_or(0)
    }

    /// The run's call options, with `max_tokens` leaving a small window room for the prompt
    /// and the conversation.
    fn call_options(&self) -> CallOptions {
        let mut options = self.options.clone();
        if let Some(window) = self.context_window {
            options.max_tokens = Some(ContextBudget::new(window).output(options.max_tokens));
        }
        options
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
        let tools = self.registry(candidates, &SUBAGENT_DENIED);
        let prompt = SubagentPromptContext {
            skills: self.skills.clone(),
            delegation: self
                .subagents
                .filter(|_| delegates)
                .map(|s| self.subagent_prompt(s.caps)),
            has_bash: tools.contains("bash"),
            has_web: tools.contains("web_fetch") || tools.contains("web_search"),
            tools: tools.names().map(str::to_owned).collect(),
            context_window: self.context_window,
            reserved_tokens: self.schema_tokens(&tools),
        };
        let mut options = self.call_options();
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
                    prompt_tokens: 0,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::NoObserver;
    use crate::middleware::chain::{ChainSettings, StandardChain};
    use crate::sandbox::protocol::{SandboxResponse, SkillFile};
    use crate::skills::SkillCatalog;
    use crate::testing::{QueuedModel, RecordingControl, StaticExecutor};

    fn public_skills() -> Vec<Skill> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../skills/public");
        let files: Vec<SkillFile> = std::fs::read_dir(&root)
            .unwrap()
            .map(|entry| {
                let dir_name = entry.unwrap().file_name().to_string_lossy().into_owned();
                let content =
                    std::fs::read_to_string(root.join(&dir_name).join("SKILL.md")).unwrap();
                SkillFile {
                    category: "public".into(),
                    path: format!("/mnt/skills/public/{dir_name}/SKILL.md"),
                    dir_name,
                    content,
                }
            })
            .collect();
        SkillCatalog::build(&files, None).skills
    }

    /// The default Agent: every tool group, the built-in skills, no subagents, no plan mode.
    fn default_blueprint(subagents: Option<SubagentSettings>, plan_mode: bool) -> Blueprint {
        let model: Arc<dyn ChatModel> = QueuedModel::new(vec![]);
        let executor: Arc<dyn ToolExecutor> =
            Arc::new(StaticExecutor(SandboxResponse::Done { path: None }));
        let skills = public_skills();
        let chain = StandardChain::new(ChainSettings {
            plan_mode,
            subagents: subagents.map(|s| s.caps),
            vision: false,
            context_window: None,
            max_retries: None,
            token_budget: None,
            summarization: Default::default(),
            memory: Default::default(),
            skills: skills.clone(),
            clarification: true,
            attempt: 1,
            model: model.clone(),
            executor: executor.clone(),
            observer: Arc::new(NoObserver),
        });
        Blueprint {
            agent_name: "agent".into(),
            model,
            options: CallOptions::default(),
            context_window: None,
            supports_vision: false,
            tool_groups: None,
            web_search: None,
            web_fetch: WebFetchConfig::default(),
            skills,
            soul: None,
            subagents,
            plan_mode,
            clarification: true,
            attempt: 1,
            max_model_calls: 50,
            observer: Arc::new(NoObserver),
            executor,
            chain: Arc::new(chain),
        }
    }

    fn prompt_and_schema_tokens(agent: &Agent) -> usize {
        let bpe = tiktoken_rs::cl100k_base().unwrap();
        let schemas = serde_json::to_string(agent.tools.schemas()).unwrap();
        bpe.encode_ordinary(&agent.system_prompt).len() + bpe.encode_ordinary(&schemas).len()
    }

    #[test]
    fn the_default_agent_fits_its_prompt_and_tools_in_3000_tokens() {
        let control: Arc<dyn ControlPlane> = Arc::new(RecordingControl::default());
        let lead = default_blueprint(None, false).lead(&control, None).unwrap();
        let tokens = prompt_and_schema_tokens(&lead);
        assert!(tokens <= 3000, "default agent: {tokens} tokens");
    }

    #[test]
    fn lead_and_subagents_get_deerflows_tool_sets() {
        let settings = SubagentSettings {
            caps: SubagentCaps {
                max_concurrent: 3,
                max_total: 6,
            },
            max_depth: 1,
            timeout: Duration::from_secs(60),
        };
        let blueprint = default_blueprint(Some(settings), true);
        let control: Arc<dyn ControlPlane> = Arc::new(RecordingControl::default());
        let lead = blueprint.lead(&control, None).unwrap();
        let lead_tools: Vec<&str> = lead.tools.names().collect();
        for tool in [
            "task",
            "write_todos",
            "ask_clarification",
            "present_files",
            "bash",
            "web_fetch",
        ] {
            assert!(
                lead_tools.contains(&tool),
                "{tool} missing from {lead_tools:?}"
            );
        }
        let general = blueprint
            .subagent(
                SubagentType::GeneralPurpose,
                "gp".into(),
                false,
                &control,
                Limits::default(),
            )
            .unwrap();
        let general_tools: Vec<&str> = general.tools.names().collect();
        for absent in ["task", "ask_clarification", "present_files", "write_todos"] {
            assert!(
                !general_tools.contains(&absent),
                "{absent} in {general_tools:?}"
            );
        }
        assert!(general_tools.contains(&"web_fetch"));
        let bash = blueprint
            .subagent(
                SubagentType::Bash,
                "b".into(),
                false,
                &control,
                Limits::default(),
            )
            .unwrap();
        let mut bash_tools: Vec<&str> = bash.tools.names().collect();
        bash_tools.sort_unstable();
        assert_eq!(
            bash_tools,
            vec!["bash", "ls", "read_file", "str_replace", "write_file"]
        );
        let delegating = blueprint
            .subagent(
                SubagentType::GeneralPurpose,
                "gp".into(),
                true,
                &control,
                Limits::default(),
            )
            .unwrap();
        assert!(
            delegating.tools.contains("task"),
            "below maxDepth a child keeps task"
        );
    }

    #[test]
    fn a_small_window_gets_lean_schemas_a_fitting_prompt_and_room_to_answer() {
        let settings = SubagentSettings {
            caps: SubagentCaps {
                max_concurrent: 3,
                max_total: 6,
            },
            max_depth: 2,
            timeout: Duration::from_secs(60),
        };
        let control: Arc<dyn ControlPlane> = Arc::new(RecordingControl::default());
        let roomy = default_blueprint(Some(settings), true)
            .lead(&control, None)
            .unwrap();
        let mut blueprint = default_blueprint(Some(settings), true);
        blueprint.context_window = Some(4096);
        let small = blueprint.lead(&control, None).unwrap();
        let schemas = serde_json::to_string(small.tools.schemas()).unwrap();
        let used =
            count_tokens(&small.system_prompt) + count_tokens(&schemas) + CHAT_TEMPLATE_TOKENS;
        assert!(
            used <= 2048,
            "system prompt and schemas take {used} of 2048 tokens"
        );
        assert_eq!(small.options.max_tokens, Some(1024));
        assert_eq!(roomy.options.max_tokens, None);
        let grep = |agent: &Agent| {
            agent
                .tools
                .schemas()
                .iter()
                .find(|s| s.name == "grep")
                .map(|s| s.parameters["properties"].clone())
                .unwrap()
        };
        assert!(grep(&roomy).get("max_results").is_some());
        assert!(
            grep(&small).get("max_results").is_none(),
            "lean: required only"
        );
        assert!(small.system_prompt.len() < roomy.system_prompt.len());
    }

    #[test]
    fn tool_groups_narrow_the_tools() {
        let mut blueprint = default_blueprint(None, false);
        blueprint.tool_groups = Some(vec![ToolGroup::FileRead]);
        let control: Arc<dyn ControlPlane> = Arc::new(RecordingControl::default());
        let lead = blueprint.lead(&control, None).unwrap();
        let mut tools: Vec<&str> = lead.tools.names().collect();
        tools.sort_unstable();
        assert_eq!(
            tools,
            vec![
                "ask_clarification",
                "glob",
                "grep",
                "ls",
                "present_files",
                "read_file"
            ]
        );
        assert!(!lead.system_prompt.contains("str_replace"));

        blueprint.tool_groups = Some(Vec::new());
        let lead = blueprint.lead(&control, None).unwrap();
        for absent in [
            "read_file",
            "write_file",
            "str_replace",
            "bash",
            "web_fetch",
        ] {
            assert!(!lead.system_prompt.contains(absent), "{absent}");
        }
    }
}
