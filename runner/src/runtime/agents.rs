//! The agents of one run, built from its plan: the lead, and subagents for `task` calls
//! (in-process locally; a child Run's own pod in a cluster).

use std::sync::Arc;

use herd_sandbox::ToolExecutor;

use crate::agent::{Agent, AgentEvent, Limits, Observer, RunResources, ToolRegistry};
use crate::control::checkpoint::ThreadCompactor;
use crate::control::deadline::Deadline;
use crate::control::{ControlPlane, SubagentCaps};
use crate::mcp::catalog::DeferredCatalog;
use crate::mcp::tool_search::ToolSearch;
use crate::mcp::{McpToolset, deferral};
use crate::middleware::chain::{ChainRole, StandardChain, summary_call};
use crate::middleware::summarization::{Summarization, SummarizationConfig};
use crate::model::resolve::{ResolveError, build_model};
use crate::model::{AgentRole, CallContext};
use crate::plan::RunPlan;
use crate::prompt::budget::{CHAT_TEMPLATE_TOKENS, ContextBudget};
use crate::prompt::tokenizer::count_tokens;
use crate::prompt::{
    PromptContext, PromptError, SubagentPrompt, SubagentPromptContext, render_subagent_prompt,
    render_system_prompt,
};
use crate::skills::Skill;
use crate::telemetry::Telemetry;
use crate::tools::ask_clarification::AskClarification;
use crate::tools::lean_schema::Lean;
use crate::tools::present_files::PresentFiles;
use crate::tools::task::{SubagentType, Task};
use crate::tools::view_image::ViewImage;
use crate::tools::web::{SearchProvider, build_search_provider};
use crate::tools::web_fetch::WebFetch;
use crate::tools::web_search::WebSearch;
use crate::tools::write_todos::WriteTodos;
use crate::tools::{Tool, ToolGroup, sandbox_tools::sandbox_tools};

/// Tools a subagent never gets: it cannot talk to the user or present deliverables.
const SUBAGENT_DENIED: [&str; 2] = ["ask_clarification", "present_files"];
/// The only tools of the `bash` subagent (DeerFlow's list).
const BASH_SUBAGENT_TOOLS: [&str; 5] = ["bash", "ls", "read_file", "write_file", "str_replace"];

/// A client of the plan could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    #[error(transparent)]
    Model(#[from] ResolveError),
    #[error("spec.tools.webSearch: {0}")]
    WebSearch(String),
}

/// Builds the agents of one run.
pub struct RunAgents {
    plan: Arc<RunPlan>,
    resources: RunResources,
    web_search: Option<Arc<dyn SearchProvider>>,
    chain: StandardChain,
    mcp: Arc<McpToolset>,
    /// The MCP tools' schemas when they are deferred (behind `tool_search`).
    deferred: Option<Arc<DeferredCatalog>>,
}

impl RunAgents {
    /// The agents of `plan`, with its model and search clients built.
    pub fn new(
        plan: Arc<RunPlan>,
        executor: Arc<dyn ToolExecutor>,
        skills: Vec<Skill>,
        observer: Arc<dyn Observer>,
    ) -> Result<Self, AgentsError> {
        let resources = RunResources {
            model: build_model(&plan.model)?,
            executor,
            skills,
            observer,
        };
        let web_search = plan
            .web_search
            .as_ref()
            .map(build_search_provider)
            .transpose()
            .map_err(AgentsError::WebSearch)?;
        Ok(Self::with_clients(plan, resources, web_search))
    }

    /// The agents of `plan`, with its MCP servers started (those that fail are warnings to
    /// `observer`). What both shells call.
    pub async fn start(
        plan: Arc<RunPlan>,
        executor: Arc<dyn ToolExecutor>,
        skills: Vec<Skill>,
        observer: Arc<dyn Observer>,
    ) -> Result<Self, AgentsError> {
        let warn = |message: String| {
            observer.on_event(AgentEvent::Warning {
                agent: "lead".into(),
                message,
            });
        };
        let vision = plan.model.supports_vision;
        let mcp = McpToolset::start(&plan.mcp, executor.as_ref(), vision, &warn).await;
        Ok(Self::new(plan, executor, skills, observer.clone())?.with_mcp(mcp))
    }

    /// These agents with the MCP tools of `mcp`, deferred as the plan and the tools' size say.
    pub fn with_mcp(mut self, mcp: McpToolset) -> Self {
        self.deferred = self
            .defers(&mcp)
            .then(|| Arc::new(DeferredCatalog::new(mcp.schemas())));
        self.chain.set_deferred(self.deferred.clone());
        self.mcp = Arc::new(mcp);
        self
    }

    /// Whether `mcp`'s tools are deferred: as `spec.mcp.deferred` says; absent, when there are
    /// more than ten, or when their schemas would take over a quarter of a small context
    /// window's prompt half.
    fn defers(&self, mcp: &McpToolset) -> bool {
        if mcp.is_empty() {
            return false;
        }
        let count = mcp.names().count();
        let setting = self.plan.mcp.deferred;
        let too_large = || {
            self.plan.context_window().is_some_and(|window| {
                let schemas = serde_json::to_string(&mcp.schemas()).unwrap_or_default();
                count_tokens(&schemas) > ContextBudget::new(window).prompt() / 4
            })
        };
        deferral(setting, count) || (setting.is_none() && too_large())
    }

    /// The agents of `plan` over clients already built.
    pub fn with_clients(
        plan: Arc<RunPlan>,
        resources: RunResources,
        web_search: Option<Arc<dyn SearchProvider>>,
    ) -> Self {
        let chain = StandardChain::new(plan.clone(), resources.clone());
        RunAgents {
            plan,
            resources,
            web_search,
            chain,
            mcp: Arc::default(),
            deferred: None,
        }
    }

    /// The plan they were built from.
    pub fn plan(&self) -> &Arc<RunPlan> {
        &self.plan
    }

    /// What they share.
    pub fn resources(&self) -> &RunResources {
        &self.resources
    }

    /// What shrinks `lead`'s thread when its checkpoint is too large: the Agent's
    /// summarization (its `keepMessages`, with the run's model), whether or not it is enabled
    /// for long threads.
    pub fn checkpoint_compactor(&self, lead: &Agent) -> Arc<dyn ThreadCompactor> {
        Arc::new(
            Summarization::new(
                self.resources.model.clone(),
                SummarizationConfig::from_spec(
                    &self.plan.summarization,
                    self.plan.context_window(),
                ),
                lead.context.clone(),
            )
            .with_call(summary_call(&self.plan, &lead.name, &self.resources)),
        )
    }

    fn has_group(&self, group: ToolGroup) -> bool {
        self.plan
            .tool_groups
            .as_ref()
            .is_none_or(|groups| groups.contains(&group))
    }

    /// Every tool the Agent's settings allow, before role-specific filtering.
    fn candidate_tools(&self, delegates: bool, lead: bool) -> Vec<Arc<dyn Tool>> {
        let mut tools = sandbox_tools();
        tools.push(Arc::new(WebFetch::new(self.plan.web_fetch.clone())));
        if let Some(provider) = &self.web_search {
            tools.push(Arc::new(WebSearch::new(provider.clone())));
        }
        if self.plan.model.supports_vision {
            tools.push(Arc::new(ViewImage));
        }
        if delegates {
            tools.push(Arc::new(Task));
        }
        tools.extend(self.mcp.tools());
        if let Some(catalog) = &self.deferred {
            tools.push(Arc::new(ToolSearch::new(catalog.clone())));
        }
        if lead {
            if self.plan.plan_mode {
                tools.push(Arc::new(WriteTodos));
            }
            if self.plan.clarification {
                tools.push(Arc::new(AskClarification));
            }
            tools.push(Arc::new(PresentFiles));
        }
        tools
    }

    /// The tools of an agent; with lean schemas when the full ones would take more than half
    /// of a small context window's prompt share.
    fn registry(&self, candidates: Vec<Arc<dyn Tool>>, denied: &[&str]) -> ToolRegistry {
        let groups = self.plan.tool_groups.as_deref();
        let full = ToolRegistry::new(candidates.clone(), groups, denied);
        let Some(window) = self.plan.context_window() else {
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
        deadline: Option<Deadline>,
    ) -> Result<Agent, PromptError> {
        let delegates = self.plan.delegates_at(self.plan.depth);
        let tools = self.registry(self.candidate_tools(delegates, true), &[]);
        let mut role = ChainRole {
            role: AgentRole::Lead,
            name: "lead",
            delegates,
            prompt_tokens: 0,
        };
        let schema_tokens = self.schema_tokens(&tools);
        let prompt = PromptContext {
            agent_name: self.plan.agent_name.clone(),
            soul: self.plan.soul.clone(),
            skills: self.resources.skills.clone(),
            subagents: self.plan.subagents.map(|s| self.subagent_prompt(s.caps)),
            plan_mode: self.plan.plan_mode,
            thinking: self.plan.options.thinking,
            has_bash: tools.contains("bash"),
            has_web: tools.contains("web_fetch") || tools.contains("web_search"),
            clarification_enabled: tools.contains("ask_clarification"),
            tools: tools.names().map(str::to_owned).collect(),
            deferred_tools: self.deferred_names(&tools),
            context_window: self.plan.context_window(),
            reserved_tokens: schema_tokens + self.chain.min_injected_tokens(role),
        };
        let system_prompt = render_system_prompt(&prompt)?;
        if self.plan.context_window().is_some() {
            role.prompt_tokens = schema_tokens + count_tokens(&system_prompt);
        }
        Ok(Agent {
            name: "lead".to_owned(),
            system_prompt,
            model: self.resources.model.clone(),
            tools,
            chain: self.chain.build(role, control),
            options: self.plan.call_options(AgentRole::Lead),
            context: CallContext {
                role: AgentRole::Lead,
                subagent_type: None,
                purpose: Default::default(),
                attempt: self.plan.attempt,
            },
            limits: Limits {
                max_model_calls: self.plan.max_model_calls,
                deadline,
                token_budget: self.plan.token_budget,
                ..Limits::default()
            },
            observer: self.resources.observer.clone(),
            telemetry: Telemetry::global(self.plan.capture_content),
        })
    }

    /// What the tool schemas sent with every request (deferred ones are not), with the chat
    /// template's wrapping, take of a small context window's prompt half; nothing to count
    /// without a window (nor a tokenizer to load).
    fn schema_tokens(&self, tools: &ToolRegistry) -> usize {
        let sent: Vec<_> = tools
            .schemas()
            .iter()
            .filter(|schema| !self.is_deferred(&schema.name))
            .collect();
        if self.plan.context_window().is_none() || sent.is_empty() {
            return 0;
        }
        serde_json::to_string(&sent)
            .map(|json| count_tokens(&json) + CHAT_TEMPLATE_TOKENS)
            .unwrap_or(0)
    }

    fn is_deferred(&self, name: &str) -> bool {
        self.deferred
            .as_ref()
            .is_some_and(|catalog| catalog.contains(name))
    }

    /// The deferred tools among `tools`, for the prompt's deferred-tools section.
    fn deferred_names(&self, tools: &ToolRegistry) -> Vec<String> {
        tools
            .names()
            .filter(|name| self.is_deferred(name))
            .map(str::to_owned)
            .collect()
    }

    fn subagent_prompt(&self, caps: SubagentCaps) -> SubagentPrompt {
        SubagentPrompt::builtin(
            caps.max_concurrent,
            caps.max_total,
            self.has_group(ToolGroup::Bash),
        )
    }

    /// A subagent of `kind` at `depth`, within `limits`.
    pub(crate) fn subagent(
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
            skills: self.resources.skills.clone(),
            delegation: self
                .plan
                .subagents
                .filter(|_| delegates)
                .map(|s| self.subagent_prompt(s.caps)),
            has_bash: tools.contains("bash"),
            has_web: tools.contains("web_fetch") || tools.contains("web_search"),
            tools: tools.names().map(str::to_owned).collect(),
            deferred_tools: self.deferred_names(&tools),
            context_window: self.plan.context_window(),
            reserved_tokens: self.schema_tokens(&tools),
        };
        Ok(Agent {
            name,
            system_prompt: render_subagent_prompt(kind.as_str(), &prompt)?,
            model: self.resources.model.clone(),
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
            options: self.plan.call_options(AgentRole::Subagent),
            context: CallContext {
                role: AgentRole::Subagent,
                subagent_type: Some(kind.as_str().to_owned()),
                purpose: Default::default(),
                attempt: self.plan.attempt,
            },
            limits,
            observer: self.resources.observer.clone(),
            telemetry: Telemetry::global(self.plan.capture_content),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use herd_sandbox::testing::FakeExecutor;
    use herd_sandbox::{SandboxResponse, SkillFile};

    use super::*;
    use crate::agent::NoObserver;
    use crate::plan::{SubagentSettings, test_plan};
    use crate::skills::SkillCatalog;
    use crate::test_doubles::{GROUP_TOOLS, QueuedModel, RecordingControl};

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

    /// The default Agent: every tool group, the built-in skills, no plan mode; `plan` changes
    /// it before the agents are built.
    fn agents_of(
        subagents: Option<SubagentSettings>,
        plan_mode: bool,
        change: impl FnOnce(&mut RunPlan),
    ) -> RunAgents {
        let mut plan = test_plan();
        plan.subagents = subagents;
        plan.plan_mode = plan_mode;
        change(&mut plan);
        let executor: Arc<dyn ToolExecutor> =
            Arc::new(FakeExecutor::answering(SandboxResponse::Done {
                path: None,
            }));
        RunAgents::with_clients(
            Arc::new(plan),
            RunResources {
                model: QueuedModel::new(vec![]),
                executor,
                skills: public_skills(),
                observer: Arc::new(NoObserver),
            },
            None,
        )
    }

    fn default_agents(subagents: Option<SubagentSettings>, plan_mode: bool) -> RunAgents {
        agents_of(subagents, plan_mode, |_| {})
    }

    fn prompt_and_schema_tokens(agent: &Agent) -> usize {
        let bpe = tiktoken_rs::cl100k_base().unwrap();
        let schemas = serde_json::to_string(agent.tools.schemas()).unwrap();
        bpe.encode_ordinary(&agent.system_prompt).len() + bpe.encode_ordinary(&schemas).len()
    }

    fn control() -> Arc<dyn ControlPlane> {
        Arc::new(RecordingControl::default())
    }

    /// Subagents of up to 3 at a time and 6 in all, `max_depth` deep.
    fn settings(max_depth: u32) -> SubagentSettings {
        SubagentSettings {
            caps: SubagentCaps {
                max_concurrent: 3,
                max_total: 6,
            },
            max_depth,
            timeout: Duration::from_secs(60),
        }
    }

    /// A subagent of `kind` with the default limits.
    fn subagent(
        agents: &RunAgents,
        kind: SubagentType,
        delegates: bool,
        control: &Arc<dyn ControlPlane>,
    ) -> Agent {
        agents
            .subagent(
                kind,
                kind.as_str().to_owned(),
                delegates,
                control,
                Limits::default(),
            )
            .unwrap()
    }

    /// Asserts that `agent`'s system prompt with `schemas` and the chat template fits the
    /// 2048 tokens a 4k window leaves the prompt.
    #[track_caller]
    fn assert_fits_half_of_4k(agent: &Agent, schemas: &(impl serde::Serialize + ?Sized)) {
        let used = count_tokens(&agent.system_prompt)
            + count_tokens(&serde_json::to_string(schemas).unwrap())
            + CHAT_TEMPLATE_TOKENS;
        assert!(
            used <= 2048,
            "system prompt and schemas take {used} of 2048 tokens"
        );
    }

    #[test]
    fn the_default_agent_fits_its_prompt_and_tools_in_3000_tokens() {
        let control = control();
        let lead = default_agents(None, false).lead(&control, None).unwrap();
        let tokens = prompt_and_schema_tokens(&lead);
        assert!(tokens <= 3000, "default agent: {tokens} tokens");
    }

    #[test]
    fn lead_and_subagents_get_deerflows_tool_sets() {
        let agents = default_agents(Some(settings(1)), true);
        let control = control();
        let lead = agents.lead(&control, None).unwrap();
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
        let general = subagent(&agents, SubagentType::GeneralPurpose, false, &control);
        let general_tools: Vec<&str> = general.tools.names().collect();
        for absent in ["task", "ask_clarification", "present_files", "write_todos"] {
            assert!(
                !general_tools.contains(&absent),
                "{absent} in {general_tools:?}"
            );
        }
        assert!(general_tools.contains(&"web_fetch"));
        let bash = subagent(&agents, SubagentType::Bash, false, &control);
        let mut bash_tools: Vec<&str> = bash.tools.names().collect();
        bash_tools.sort_unstable();
        assert_eq!(
            bash_tools,
            vec!["bash", "ls", "read_file", "str_replace", "write_file"]
        );
        let delegating = subagent(&agents, SubagentType::GeneralPurpose, true, &control);
        assert!(
            delegating.tools.contains("task"),
            "below maxDepth a child keeps task"
        );
    }

    #[test]
    fn a_small_window_gets_lean_schemas_a_fitting_prompt_and_room_to_answer() {
        let settings = settings(2);
        let control = control();
        let roomy = default_agents(Some(settings), true)
            .lead(&control, None)
            .unwrap();
        let small = agents_of(Some(settings), true, |plan| {
            plan.model.context_window = Some(4096);
        })
        .lead(&control, None)
        .unwrap();
        assert_fits_half_of_4k(&small, small.tools.schemas());
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

    /// A tool as an MCP server would offer it.
    struct FakeMcpTool(crate::model::ToolSchema);

    #[async_trait::async_trait]
    impl Tool for FakeMcpTool {
        fn name(&self) -> &str {
            &self.0.name
        }
        fn group(&self) -> Option<ToolGroup> {
            None
        }
        fn schema(&self) -> crate::model::ToolSchema {
            self.0.clone()
        }
        async fn call(
            &self,
            _arguments: serde_json::Value,
            _ctx: &crate::tools::ToolContext,
        ) -> crate::tools::ToolOutput {
            crate::tools::ToolOutput::ok("7 units")
        }
    }

    fn inventory(count: usize) -> McpToolset {
        let tools = (0..count)
            .map(|i| {
                Arc::new(FakeMcpTool(crate::model::ToolSchema {
                    name: format!("inventory__stock_in_warehouse_{i:02}"),
                    description: format!(
                        "Stock of an item in warehouse {i}, with reserved and incoming units."
                    ),
                    parameters: serde_json::json!({"type": "object", "properties": {
                        "sku": {"type": "string", "description": "The item's stock keeping unit."},
                        "include_reserved": {"type": "boolean", "description": "Count reserved units too."}},
                        "required": ["sku"]}),
                })) as Arc<dyn Tool>
            })
            .collect();
        McpToolset::of_tools(tools)
    }

    #[test]
    fn many_mcp_tools_are_deferred_behind_tool_search_and_named_in_the_prompt() {
        let control = control();
        let agents = default_agents(None, false).with_mcp(inventory(12));
        let lead = agents.lead(&control, None).unwrap();
        assert!(lead.tools.contains("tool_search"));
        assert!(lead.tools.contains("inventory__stock_in_warehouse_11"));
        assert!(
            lead.system_prompt
                .contains("<available-deferred-tools>\ninventory__stock_in_warehouse_00\n"),
            "{}",
            lead.system_prompt
        );
        let chain: Vec<&str> = lead.chain.iter().map(|m| m.name()).collect();
        for name in ["McpRouting", "DeferredToolFilter"] {
            assert!(chain.contains(&name), "{name} missing from {chain:?}");
        }
        let general = subagent(&agents, SubagentType::GeneralPurpose, false, &control);
        assert!(general.tools.contains("tool_search"));
        assert!(general.system_prompt.contains("<available-deferred-tools>"));
        let bash = subagent(&agents, SubagentType::Bash, false, &control);
        assert!(!bash.tools.contains("inventory__stock_in_warehouse_00"));

        let few = default_agents(None, false).with_mcp(inventory(3));
        let lead = few.lead(&control, None).unwrap();
        assert!(
            !lead.tools.contains("tool_search"),
            "ten or fewer are not deferred"
        );
        assert!(!lead.system_prompt.contains("<available-deferred-tools>"));
        let forced = agents_of(None, false, |plan| plan.mcp.deferred = Some(true))
            .with_mcp(inventory(3))
            .lead(&control, None)
            .unwrap();
        assert!(forced.tools.contains("tool_search"));
        let refused = agents_of(None, false, |plan| plan.mcp.deferred = Some(false))
            .with_mcp(inventory(12))
            .lead(&control, None)
            .unwrap();
        assert!(!refused.tools.contains("tool_search"));
    }

    /// The system prompt plus the schemas a request carries before any promotion.
    fn first_request_tokens(agent: &Agent) -> usize {
        let bpe = tiktoken_rs::cl100k_base().unwrap();
        let sent: Vec<_> = agent
            .tools
            .schemas()
            .iter()
            .filter(|s| !s.name.starts_with("inventory__") || !agent.tools.contains("tool_search"))
            .collect();
        bpe.encode_ordinary(&agent.system_prompt).len()
            + bpe
                .encode_ordinary(&serde_json::to_string(&sent).unwrap())
                .len()
    }

    #[test]
    fn deferral_keeps_the_first_request_small_and_a_small_window_fits() {
        let control = control();
        let eager = agents_of(None, false, |plan| plan.mcp.deferred = Some(false))
            .with_mcp(inventory(40))
            .lead(&control, None)
            .unwrap();
        let deferred = default_agents(None, false)
            .with_mcp(inventory(40))
            .lead(&control, None)
            .unwrap();
        let (eager, deferred) = (
            first_request_tokens(&eager),
            first_request_tokens(&deferred),
        );
        println!("40 MCP tools: {eager} tokens eager, {deferred} deferred");
        assert!(
            eager > deferred + 2000,
            "deferred {deferred}, eager {eager}"
        );
        // With a 4k window, a handful of tools that would fill a quarter of the prompt half
        // are deferred although there are fewer than eleven.
        let small = agents_of(None, false, |plan| plan.model.context_window = Some(4096))
            .with_mcp(inventory(8))
            .lead(&control, None)
            .unwrap();
        assert!(small.tools.contains("tool_search"));
        let schemas: Vec<_> = small
            .tools
            .schemas()
            .iter()
            .filter(|s| !s.name.starts_with("inventory__"))
            .collect();
        assert_fits_half_of_4k(&small, &schemas);
    }

    #[test]
    fn tool_groups_narrow_the_tools() {
        let read_only = agents_of(None, false, |plan| {
            plan.tool_groups = Some(vec![ToolGroup::FileRead]);
        });
        let control = control();
        let lead = read_only.lead(&control, None).unwrap();
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

        let no_groups = agents_of(None, false, |plan| plan.tool_groups = Some(Vec::new()));
        let lead = no_groups.lead(&control, None).unwrap();
        for absent in GROUP_TOOLS {
            assert!(!lead.system_prompt.contains(absent), "{absent}");
        }
    }
}
