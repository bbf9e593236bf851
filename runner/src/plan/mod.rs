//! The run plan: everything a run is decided to be, made by one pure function from the Agent
//! spec, what the Run (or the command line) chose, where the run stands (depth, attempt, what
//! its parent left it) and the facts of its environment passed in as data.
//!
//! Both shells feed it: `herd-runner run` from the manifests and the command line
//! (`runtime::local_plan`), a Run's pod from the run API's `RunConfig` (`runtime::pod_plan`).
//! Neither reads a file, an environment variable or the clock in here, so the same manifests
//! make the same plan on a laptop and in a cluster, and every decision is tested without IO.

pub mod approval;
mod facts;
pub mod mcp;
mod thinking;

use std::time::Duration;

use herd_crds::agent::{
    AgentSpec, MemorySpec, ModelSpec as AgentModel, SummarizationSpec, ToolGroup,
};
use herd_crds::duration::parse_duration;
use herd_crds::run::ModelOverride;
use herd_crds::wire::Answer;

pub use facts::EnvFacts;
#[cfg(test)]
pub(crate) use facts::facts;
pub use mcp::{McpPlan, McpServerPlan, McpTransport};

use crate::control::SubagentCaps;
use crate::model::resolve::{ConfiguredModel, resolve};
use crate::model::{AgentRole, CallOptions};
use crate::prompt::budget::ContextBudget;
use crate::tools::task::SubagentType;
use crate::tools::web::WebSearchSettings;
use crate::tools::web::allowed_ranges::AllowedRanges;
use crate::tools::web_fetch::WebFetchConfig;

/// A plan could not be made; the message names the field.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

/// Everything decided for one run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunPlan {
    pub agent_name: String,
    /// What the user asked.
    pub task: String,
    /// The model, with the Run's override applied and its key and script read.
    pub model: ConfiguredModel,
    /// The lead's call options (thinking decided); see [`RunPlan::call_options`].
    pub options: CallOptions,
    /// Settings that were dropped or look wrong, for the user to see.
    pub warnings: Vec<String>,
    pub soul: Option<String>,
    /// The Agent's `skills` (`None` = every enabled skill).
    pub skills: Option<Vec<String>>,
    /// The Agent's `toolGroups` (`None` = all).
    pub tool_groups: Option<Vec<ToolGroup>>,
    /// `web_search`'s engine, when the Agent has one.
    pub web_search: Option<WebSearchSettings>,
    pub web_fetch: WebFetchConfig,
    /// `None` when subagents are off.
    pub subagents: Option<SubagentSettings>,
    pub plan_mode: bool,
    /// Whether the lead may ask the user (`ask_clarification`).
    pub clarification: bool,
    /// The Run's attempt (1 for the first pod, always 1 locally).
    pub attempt: u32,
    /// 0 for a top-level run, 1 for a child Run, and so on.
    pub depth: u32,
    /// The subagent type of a child Run; `None` for a lead.
    pub subagent_type: Option<SubagentType>,
    /// Model calls allowed (a subagent gets at most what its parent has left).
    pub max_model_calls: u32,
    /// Tokens allowed, when the run has a budget.
    pub token_budget: Option<u64>,
    /// How long the run may take from now.
    pub time_left: Duration,
    pub summarization: SummarizationSpec,
    pub memory: MemorySpec,
    /// Answers given ahead of the questions (the Run's `responses`).
    pub answers: Vec<Answer>,
    /// The Agent's MCP servers.
    pub mcp: McpPlan,
    /// The Agent's `observability.captureContent`: spans record prompt and tool text.
    pub capture_content: bool,
    /// Which tool calls need a person's approval (the Agent's and the Run's rules); `None`
    /// when none do.
    pub approval: Option<approval::ApprovalPlan>,
}

/// The Agent's `subagents` settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubagentSettings {
    pub caps: SubagentCaps,
    /// Depth of the deepest allowed child (1 = children only, no grandchildren).
    pub max_depth: u32,
    /// Time one child may take (never more than its parent has left).
    pub timeout: Duration,
}

/// What a plan is made from; each shell fills it from its own sources.
#[derive(Clone, Debug)]
pub struct PlanInputs<'a> {
    pub agent_name: String,
    /// The Agent spec. Its `soulFrom` and `model.scriptFrom` are not read here: the shell
    /// passes their texts as `soul` and `script`.
    pub agent: &'a AgentSpec,
    pub soul: Option<String>,
    pub script: Option<String>,
    pub choices: RunChoices,
    pub standing: Standing,
    pub keys: ApiKeys,
}

/// What the Run or the command line chose; `None` leaves the Agent's `runDefaults`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunChoices {
    pub task: String,
    pub plan_mode: Option<bool>,
    pub thinking: Option<bool>,
    /// The Run's `model` override (with `--model` locally).
    pub model: Option<ModelOverride>,
    /// `--base-url`: another endpoint for the Agent's model (locally only).
    pub base_url: Option<String>,
    /// A child Run's `subagentType`.
    pub subagent_type: Option<String>,
    pub answers: Vec<Answer>,
    /// The Run's `approval` rules, added to the Agent's.
    pub approval: Option<herd_crds::approval::ApprovalSpec>,
    /// The Run's `inputTimeout` (`None`: the Agent's `runDefaults.inputTimeout`).
    pub input_timeout: Option<String>,
}

/// Where the run stands in its tree, and what it has left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Standing {
    pub depth: u32,
    pub attempt: u32,
    pub time_left: Duration,
    pub max_model_calls: u32,
    pub token_budget: Option<u64>,
}

/// API keys the shell read (from environment variables fed by Secrets, or the user's shell).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ApiKeys {
    pub model: Option<String>,
    pub web_search: Option<String>,
    /// MCP header values by (server, header) index into `spec.mcp.servers`.
    pub mcp_headers: std::collections::BTreeMap<(usize, usize), String>,
}

/// Keys are never printed (plans end up in logs and error reports).
impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |key: &Option<String>| key.as_ref().map(|_| "<redacted>");
        f.debug_struct("ApiKeys")
            .field("model", &shown(&self.model))
            .field("web_search", &shown(&self.web_search))
            .field("mcp_headers", &self.mcp_headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Makes the plan of one run.
pub fn plan_run(inputs: PlanInputs<'_>) -> Result<RunPlan, PlanError> {
    let PlanInputs {
        agent_name,
        agent,
        soul,
        script,
        choices,
        standing,
        keys,
    } = inputs;
    if choices.task.trim().is_empty() {
        return Err(PlanError("spec.task: the task is empty".into()));
    }
    let model = agent
        .model
        .as_ref()
        .ok_or_else(|| PlanError("spec.model: the Agent names no model".into()))?;
    let mut spec = agent_model(model, keys.model, script)?;
    if let Some(url) = &choices.base_url {
        spec.base_url = Some(url.clone());
    }
    let resolved = resolve(None, Some(&spec), choices.model.as_ref())
        .map_err(|error| PlanError(error.to_string()))?;
    let mut warnings = resolved.warnings;
    let mut options = resolved.options;
    let thinking = thinking::decide(
        choices.thinking,
        agent.run_defaults.thinking,
        &resolved.spec,
    );
    options.thinking = thinking.on;
    warnings.extend(thinking.warning);
    let subagent_type = choices
        .subagent_type
        .as_deref()
        .map(|name| {
            SubagentType::parse(name).ok_or_else(|| {
                PlanError(format!(
                    "spec.subagentType: unknown subagent type '{name}'; available: \
                     general-purpose, bash"
                ))
            })
        })
        .transpose()?;
    Ok(RunPlan {
        agent_name,
        task: choices.task,
        model: resolved.spec,
        options,
        warnings,
        soul,
        skills: agent.skills.clone(),
        tool_groups: agent.tool_groups.clone(),
        web_search: web_search(agent, keys.web_search),
        web_fetch: WebFetchConfig {
            allowed: AllowedRanges::from_egress(agent.sandbox.egress.as_ref())
                .map_err(|error| PlanError(format!("spec.sandbox.egress.{error}")))?,
            ..WebFetchConfig::default()
        },
        subagents: subagents(agent)?,
        plan_mode: choices.plan_mode.unwrap_or(agent.run_defaults.plan_mode),
        clarification: subagent_type.is_none(),
        attempt: standing.attempt,
        depth: standing.depth,
        subagent_type,
        max_model_calls: standing.max_model_calls,
        token_budget: standing.token_budget,
        time_left: standing.time_left,
        summarization: agent.summarization.clone(),
        memory: agent.memory.clone(),
        answers: choices.answers,
        mcp: mcp::plan_mcp(agent.mcp.as_ref(), &keys.mcp_headers)?,
        capture_content: agent.observability.capture_content,
        approval: approval::plan_approval(
            agent,
            choices.approval.as_ref(),
            choices.input_timeout.as_deref(),
        )?,
    })
}

impl RunPlan {
    /// The model's context window, when the Agent states it (prompts shrink to fit).
    pub fn context_window(&self) -> Option<u32> {
        self.model.context_window
    }

    /// Whether an agent at `depth` may delegate: subagents are on and `maxDepth` not reached.
    pub fn delegates_at(&self, depth: u32) -> bool {
        self.subagents
            .is_some_and(|settings| depth < settings.max_depth)
    }

    /// The call options of an agent in `role`: `max_tokens` leaves a small window room for
    /// the prompt and the conversation, and subagents never think (DeerFlow's choice: they
    /// execute, the lead plans).
    pub fn call_options(&self, role: AgentRole) -> CallOptions {
        let mut options = self.options.clone();
        if let Some(window) = self.context_window() {
            options.max_tokens = Some(ContextBudget::new(window).output(options.max_tokens));
        }
        if role == AgentRole::Subagent {
            options.thinking = false;
        }
        options
    }
}

/// The Agent's model as the runner's `ConfiguredModel`, with the key and script the shell read.
fn agent_model(
    model: &AgentModel,
    api_key: Option<String>,
    script: Option<String>,
) -> Result<ConfiguredModel, PlanError> {
    use herd_crds::agent::ReasoningEffort;
    let request_timeout = model
        .request_timeout
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(|error| PlanError(format!("spec.model.requestTimeout: {error}")))?;
    let mut spec = ConfiguredModel::new(model.provider, model.name.clone());
    spec.base_url = model.base_url.clone();
    spec.api_key = api_key;
    spec.temperature = model.temperature;
    spec.max_tokens = model.max_tokens;
    spec.context_window = model.context_window;
    spec.supports_vision = model.supports_vision.unwrap_or(false);
    spec.supports_thinking = model.supports_thinking.unwrap_or(false);
    spec.reasoning_effort = model.reasoning_effort.map(|effort| {
        match effort {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
        .to_owned()
    });
    spec.request_timeout = request_timeout;
    spec.max_retries = model.max_retries;
    spec.script = script;
    if let Some(pricing) = &model.pricing {
        if !herd_crds::pricing::is_valid(pricing) {
            return Err(PlanError(
                "spec.model.pricing: prices must be decimals such as 2.50 (at most 6 decimals) \
                 and the currency an ISO 4217 code such as USD"
                    .into(),
            ));
        }
        spec.pricing = Some(pricing.clone());
    }
    Ok(spec)
}

fn web_search(agent: &AgentSpec, api_key: Option<String>) -> Option<WebSearchSettings> {
    let search = agent.tools.as_ref()?.web_search.as_ref()?;
    Some(WebSearchSettings {
        provider: search.provider,
        base_url: search.base_url.clone(),
        api_key,
    })
}

fn subagents(agent: &AgentSpec) -> Result<Option<SubagentSettings>, PlanError> {
    let spec = &agent.subagents;
    if !spec.enabled {
        return Ok(None);
    }
    Ok(Some(SubagentSettings {
        caps: SubagentCaps {
            max_concurrent: spec.max_concurrent,
            max_total: spec.max_total,
        },
        max_depth: spec.max_depth,
        timeout: parse_duration(&spec.timeout)
            .map_err(|error| PlanError(format!("spec.subagents.timeout: {error}")))?,
    }))
}

/// A plan for tests: the default Agent (every tool group, no subagents) on a model that is
/// never built (tests give the agents their own).
#[cfg(test)]
pub(crate) fn test_plan() -> RunPlan {
    let agent: AgentSpec = serde_saphyr::from_str(
        "model: {provider: openai, name: test-model, baseURL: 'http://localhost:1/v1'}\n\
         runDefaults: {thinking: false}",
    )
    .expect("invariant: the test Agent parses");
    plan_run(PlanInputs {
        agent_name: "agent".into(),
        agent: &agent,
        soul: None,
        script: None,
        choices: RunChoices {
            task: "test".into(),
            ..RunChoices::default()
        },
        standing: Standing {
            depth: 0,
            attempt: 1,
            time_left: Duration::from_secs(1800),
            max_model_calls: 50,
            token_budget: None,
        },
        keys: ApiKeys::default(),
    })
    .expect("invariant: the default Agent plans")
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn agent(yaml: &str) -> AgentSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn standing() -> Standing {
        Standing {
            depth: 0,
            attempt: 1,
            time_left: Duration::from_secs(600),
            max_model_calls: 50,
            token_budget: None,
        }
    }

    fn inputs<'a>(agent: &'a AgentSpec, choices: RunChoices) -> PlanInputs<'a> {
        PlanInputs {
            agent_name: "a".into(),
            agent,
            soul: None,
            script: None,
            choices,
            standing: standing(),
            keys: ApiKeys::default(),
        }
    }

    fn task(text: &str) -> RunChoices {
        RunChoices {
            task: text.into(),
            ..RunChoices::default()
        }
    }

    const OPENAI: &str =
        "model: {provider: openai, name: qwen, baseURL: 'http://localhost:8080/v1'}";

    #[test]
    fn choices_beat_the_agents_run_defaults() {
        let agent = agent(&format!(
            "{OPENAI}\nrunDefaults: {{planMode: false, thinking: true}}"
        ));
        let plan = plan_run(inputs(&agent, task("t"))).unwrap();
        assert!(!plan.plan_mode);
        let chosen = RunChoices {
            plan_mode: Some(true),
            ..task("t")
        };
        assert!(plan_run(inputs(&agent, chosen)).unwrap().plan_mode);
    }

    #[test]
    fn an_empty_task_and_a_missing_model_are_explained() {
        let with_model = agent(OPENAI);
        let error = plan_run(inputs(&with_model, task("  "))).unwrap_err();
        assert!(error.0.starts_with("spec.task:"), "{error}");
        let error = plan_run(inputs(&agent("{}"), task("t"))).unwrap_err();
        assert!(error.0.starts_with("spec.model:"), "{error}");
    }

    #[test]
    fn the_agent_model_maps_field_by_field() {
        let agent = agent(
            "model: {provider: openai, name: qwen, baseURL: 'http://localhost:8080/v1', \
             contextWindow: 4096, supportsThinking: true, reasoningEffort: high, \
             requestTimeout: 90s, maxRetries: 2}",
        );
        let spec = agent_model(agent.model.as_ref().unwrap(), Some("k".into()), None).unwrap();
        assert_eq!(spec.provider, herd_crds::agent::Provider::Openai);
        assert_eq!(spec.base_url.as_deref(), Some("http://localhost:8080/v1"));
        assert_eq!(spec.context_window, Some(4096));
        assert!(spec.supports_thinking);
        assert_eq!(spec.reasoning_effort.as_deref(), Some("high"));
        assert_eq!(spec.request_timeout, Some(Duration::from_secs(90)));
        assert_eq!(spec.max_retries, Some(2));
        assert_eq!(spec.api_key.as_deref(), Some("k"));
    }

    #[test]
    fn the_run_override_and_the_base_url_apply_to_the_agent_model() {
        let agent = agent(OPENAI);
        let choices = RunChoices {
            model: Some(ModelOverride {
                name: Some("big".into()),
                temperature: Some(0.2),
                max_tokens: None,
            }),
            base_url: Some("http://elsewhere:9000/v1".into()),
            ..task("t")
        };
        let plan = plan_run(inputs(&agent, choices)).unwrap();
        assert_eq!(plan.model.name, "big");
        assert_eq!(plan.options.temperature, Some(0.2));
        assert_eq!(
            plan.model.base_url.as_deref(),
            Some("http://elsewhere:9000/v1")
        );
    }

    #[test]
    fn subagents_parse_their_timeout_and_say_how_deep_they_go() {
        let agent = agent(&format!(
            "{OPENAI}\nsubagents: {{enabled: true, maxDepth: 2, timeout: 2m}}"
        ));
        let plan = plan_run(inputs(&agent, task("t"))).unwrap();
        let settings = plan.subagents.unwrap();
        assert_eq!(settings.timeout, Duration::from_secs(120));
        assert_eq!(settings.caps.max_concurrent, 3);
        assert!(plan.delegates_at(1));
        assert!(!plan.delegates_at(2));
        let broken = agent_with_subagent_timeout("soon");
        let error = plan_run(inputs(&broken, task("t"))).unwrap_err();
        assert!(error.0.starts_with("spec.subagents.timeout:"), "{error}");
    }

    fn agent_with_subagent_timeout(timeout: &str) -> AgentSpec {
        agent(&format!(
            "{OPENAI}\nsubagents: {{enabled: true, timeout: {timeout}}}"
        ))
    }

    #[test]
    fn a_child_run_is_a_subagent_that_cannot_ask() {
        let agent = agent(OPENAI);
        let child = RunChoices {
            subagent_type: Some("bash".into()),
            ..task("t")
        };
        let plan = plan_run(inputs(&agent, child)).unwrap();
        assert_eq!(plan.subagent_type, Some(SubagentType::Bash));
        assert!(!plan.clarification);
        let unknown = RunChoices {
            subagent_type: Some("poet".into()),
            ..task("t")
        };
        let error = plan_run(inputs(&agent, unknown)).unwrap_err();
        assert!(error.0.contains("unknown subagent type 'poet'"), "{error}");
    }

    #[test]
    fn a_small_window_caps_max_tokens_and_subagents_never_think() {
        let agent = agent(
            "model: {provider: openai, name: q, baseURL: 'http://h:1/v1', contextWindow: 4096, \
             supportsThinking: true}",
        );
        let plan = plan_run(inputs(&agent, task("t"))).unwrap();
        assert!(plan.options.thinking, "runDefaults.thinking is on");
        let lead = plan.call_options(AgentRole::Lead);
        assert!(lead.thinking);
        assert_eq!(lead.max_tokens, Some(1024));
        assert!(!plan.call_options(AgentRole::Subagent).thinking);
    }

    #[test]
    fn egress_cidrs_open_web_fetch_and_bad_ones_name_the_field() {
        let open = agent(&format!(
            "{OPENAI}\nsandbox: {{egress: {{mode: CIDRs, cidrs: ['10.0.0.0/8']}}}}"
        ));
        let plan = plan_run(inputs(&open, task("t"))).unwrap();
        assert!(plan.web_fetch.allowed.contains("10.1.2.3".parse().unwrap()));
        let broken = agent(&format!(
            "{OPENAI}\nsandbox: {{egress: {{mode: CIDRs, cidrs: ['ten']}}}}"
        ));
        let error = plan_run(inputs(&broken, task("t"))).unwrap_err();
        assert!(error.0.starts_with("spec.sandbox.egress."), "{error}");
    }

    #[test]
    fn keys_reach_the_model_and_the_search_engine_but_never_debug_output() {
        let agent = agent(&format!(
            "{OPENAI}\ntools: {{webSearch: {{provider: tavily}}}}"
        ));
        let mut with_keys = inputs(&agent, task("t"));
        with_keys.keys = ApiKeys {
            model: Some("sk-model-secret".into()),
            web_search: Some("tvly-secret".into()),
            ..ApiKeys::default()
        };
        let printed_inputs = format!("{with_keys:?}");
        let plan = plan_run(with_keys).unwrap();
        assert_eq!(plan.model.api_key.as_deref(), Some("sk-model-secret"));
        let search = plan.web_search.as_ref().unwrap();
        assert_eq!(search.api_key.as_deref(), Some("tvly-secret"));
        for printed in [printed_inputs, format!("{plan:?}")] {
            assert!(!printed.contains("sk-model-secret"), "{printed}");
            assert!(!printed.contains("tvly-secret"), "{printed}");
        }
    }
}
