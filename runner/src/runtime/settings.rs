//! Pure decisions about a run's settings: which model, which options, which limits — from the
//! Agent, the optional Run and the command line, in that order of precedence (later wins).

use std::time::Duration;

use herd_crds::agent::{AgentSpec, ModelSpec as AgentModel, Provider as AgentProvider};
use herd_crds::duration::parse_duration;
use herd_crds::run::RunSpec;

use crate::model::resolve::{ModelOverride, ModelSpec, Provider};
use crate::tools::ToolGroup;

/// A setting could not be resolved; the message names the field.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

/// Command-line choices that override the manifests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub task: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub plan: bool,
    pub thinking: bool,
}

/// The run's flags, after precedence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunFlags {
    pub task: String,
    pub plan_mode: bool,
    pub thinking: bool,
    /// Thinking was asked for by the Run or the command line, not just left at the Agent's
    /// default: only then is turning it off for a model without thinking worth a warning.
    pub thinking_explicit: bool,
    pub timeout: Duration,
    pub max_model_calls: u32,
}

/// Task, plan mode, thinking and limits: command line > Run > Agent `runDefaults`.
pub fn run_flags(
    agent: &AgentSpec,
    run: Option<&RunSpec>,
    overrides: &Overrides,
) -> Result<RunFlags, SettingsError> {
    let task = overrides
        .task
        .clone()
        .or_else(|| run.map(|r| r.task.clone()))
        .filter(|task| !task.trim().is_empty())
        .ok_or_else(|| {
            SettingsError("no task: give it as the last argument, or -f a Run manifest".into())
        })?;
    let defaults = &agent.run_defaults;
    let plan_mode = overrides.plan || run.and_then(|r| r.plan_mode).unwrap_or(defaults.plan_mode);
    let explicit = overrides
        .thinking
        .then_some(true)
        .or(run.and_then(|r| r.thinking));
    let thinking = explicit.unwrap_or(defaults.thinking);
    let (field, timeout_text) = match run.and_then(|r| r.timeout.as_deref()) {
        Some(text) => ("spec.timeout", text),
        None => ("spec.runDefaults.timeout", defaults.timeout.as_str()),
    };
    let timeout =
        parse_duration(timeout_text).map_err(|error| SettingsError(format!("{field}: {error}")))?;
    Ok(RunFlags {
        task,
        plan_mode,
        thinking,
        thinking_explicit: explicit.is_some(),
        timeout,
        max_model_calls: defaults.max_model_calls,
    })
}

/// The Agent's model as the runner's `ModelSpec`. `api_key` and `script` are read by the
/// caller (from the environment, a Secret or a ConfigMap) and passed in.
pub fn agent_model(
    model: &AgentModel,
    api_key: Option<String>,
    script: Option<String>,
) -> Result<ModelSpec, SettingsError> {
    let provider = match model.provider {
        AgentProvider::Openai => Provider::OpenAi,
        AgentProvider::Anthropic => Provider::Anthropic,
        AgentProvider::Scripted => Provider::Scripted,
    };
    let request_timeout = model
        .request_timeout
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(|error| SettingsError(format!("spec.model.requestTimeout: {error}")))?;
    let mut spec = ModelSpec::new(provider, model.name.clone());
    spec.base_url = model.base_url.clone();
    spec.api_key = api_key;
    spec.temperature = model.temperature;
    spec.max_tokens = model.max_tokens;
    spec.context_window = model.context_window;
    spec.supports_vision = model.supports_vision.unwrap_or(false);
    spec.supports_thinking = model.supports_thinking.unwrap_or(false);
    spec.reasoning_effort = model
        .reasoning_effort
        .map(|effort| effort_name(effort).to_owned());
    spec.request_timeout = request_timeout;
    spec.max_retries = model.max_retries;
    spec.script = script;
    Ok(spec)
}

fn effort_name(effort: herd_crds::agent::ReasoningEffort) -> &'static str {
    match effort {
        herd_crds::agent::ReasoningEffort::Low => "low",
        herd_crds::agent::ReasoningEffort::Medium => "medium",
        herd_crds::agent::ReasoningEffort::High => "high",
    }
}

/// The Run's `model` override merged with `--model`.
pub fn model_override(run: Option<&RunSpec>, cli_model: Option<&str>) -> Option<ModelOverride> {
    let from_run = run.and_then(|r| r.model.as_ref());
    if from_run.is_none() && cli_model.is_none() {
        return None;
    }
    Some(ModelOverride {
        name: cli_model
            .map(str::to_owned)
            .or_else(|| from_run.and_then(|m| m.name.clone())),
        temperature: from_run.and_then(|m| m.temperature),
        max_tokens: from_run.and_then(|m| m.max_tokens),
    })
}

/// The Agent's `toolGroups` as the runner's groups (`None` = all).
pub fn tool_groups(agent: &AgentSpec) -> Option<Vec<ToolGroup>> {
    agent.tool_groups.as_ref().map(|groups| {
        groups
            .iter()
            .map(|group| match group {
                herd_crds::agent::ToolGroup::Web => ToolGroup::Web,
                herd_crds::agent::ToolGroup::FileRead => ToolGroup::FileRead,
                herd_crds::agent::ToolGroup::FileWrite => ToolGroup::FileWrite,
                herd_crds::agent::ToolGroup::Bash => ToolGroup::Bash,
            })
            .collect()
    })
}

/// The environment variable holding a provider's key when `--api-key-env` is not given.
pub fn default_key_env(provider: &AgentProvider) -> Option<&'static str> {
    match provider {
        AgentProvider::Openai => Some("OPENAI_API_KEY"),
        AgentProvider::Anthropic => Some("ANTHROPIC_API_KEY"),
        AgentProvider::Scripted => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(yaml: &str) -> AgentSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn run(yaml: &str) -> RunSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn command_line_beats_run_beats_agent_defaults() {
        let agent = agent("runDefaults: {planMode: false, thinking: true, timeout: 10m}");
        let run = run(
            "agentRef: {name: a}\ntask: from run\nplanMode: true\nthinking: false\ntimeout: 1h",
        );
        let flags = run_flags(&agent, Some(&run), &Overrides::default()).unwrap();
        assert_eq!(flags.task, "from run");
        assert!(flags.plan_mode);
        assert!(!flags.thinking);
        assert_eq!(flags.timeout, Duration::from_secs(3600));
        let overrides = Overrides {
            task: Some("from cli".into()),
            thinking: true,
            ..Overrides::default()
        };
        let flags = run_flags(&agent, Some(&run), &overrides).unwrap();
        assert_eq!(flags.task, "from cli");
        assert!(flags.thinking);
        let flags = run_flags(&agent, None, &overrides).unwrap();
        assert_eq!(flags.timeout, Duration::from_secs(600));
        assert_eq!(flags.max_model_calls, 50);
    }

    #[test]
    fn a_missing_task_is_explained() {
        let error = run_flags(&agent("{}"), None, &Overrides::default()).unwrap_err();
        assert!(error.0.contains("no task"));
    }

    #[test]
    fn the_agent_model_maps_field_by_field() {
        let agent = agent(
            "model: {provider: openai, name: qwen, baseURL: 'http://localhost:8080/v1', \
             contextWindow: 4096, supportsThinking: true, reasoningEffort: high, \
             requestTimeout: 90s, maxRetries: 2}",
        );
        let spec = agent_model(agent.model.as_ref().unwrap(), Some("k".into()), None).unwrap();
        assert_eq!(spec.provider, Provider::OpenAi);
        assert_eq!(spec.base_url.as_deref(), Some("http://localhost:8080/v1"));
        assert_eq!(spec.context_window, Some(4096));
        assert!(spec.supports_thinking);
        assert_eq!(spec.reasoning_effort.as_deref(), Some("high"));
        assert_eq!(spec.request_timeout, Some(Duration::from_secs(90)));
        assert_eq!(spec.max_retries, Some(2));
        assert_eq!(spec.api_key.as_deref(), Some("k"));
    }

    #[test]
    fn model_overrides_merge_run_and_command_line() {
        assert_eq!(model_override(None, None), None);
        let run = run("agentRef: {name: a}\ntask: t\nmodel: {name: big, temperature: 0.2}");
        let merged = model_override(Some(&run), Some("small")).unwrap();
        assert_eq!(merged.name.as_deref(), Some("small"));
        assert_eq!(merged.temperature, Some(0.2));
    }
}
