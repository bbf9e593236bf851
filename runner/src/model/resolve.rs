//! Which model a run uses, with which settings, and building it.
//!
//! Precedence: the Run's `model` override (name, temperature, maxTokens) over the Agent's
//! `model` over the default model (a Helm value, or `--model` locally). The Agent's model
//! replaces the default whole, never field by field: mixing them could send the default
//! model's API key to the Agent's endpoint.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use herd_crds::agent::ModelPricing;
/// Which API a model speaks: the Agent's `model.provider`.
pub use herd_crds::agent::Provider;
use herd_crds::run::ModelOverride;

use super::anthropic::AnthropicModel;
use super::error::ModelError;
use super::openai::OpenAiModel;
use super::priced::PricedModel;
use super::scripted::{ScriptError, ScriptedModel};
use super::{CallOptions, ChatModel, HttpModelConfig};

/// OpenAI's API, when an `openai` model sets no `baseURL`.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Anthropic's API, when an `anthropic` model sets no `baseURL`.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// `requestTimeout` when the model sets none: long enough for a slow local model to write a
/// long answer.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest silence allowed inside a stream (capped by the request timeout). Local servers
/// send nothing while they read a long prompt, so this is generous.
pub const STREAM_CHUNK_TIMEOUT: Duration = Duration::from_secs(180);

/// A model as configured (the Agent's `model`, or the default), with its API key already
/// read from its Secret or environment variable and its script from its ConfigMap or file.
#[derive(Clone, PartialEq)]
pub struct ConfiguredModel {
    pub provider: Provider,
    /// Model name sent to the provider (for `scripted`, only a label).
    pub name: String,
    /// Absent: the provider's public API ([`OPENAI_BASE_URL`], [`ANTHROPIC_BASE_URL`]).
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// The model's context window in tokens (the prompt shrinks to fit half of it).
    pub context_window: Option<u32>,
    pub supports_vision: bool,
    /// Whether thinking may be asked of this model (absent in the manifest = false).
    pub supports_thinking: bool,
    /// `low`, `medium` or `high`; sent only to models that support thinking.
    pub reasoning_effort: Option<String>,
    /// Absent: [`DEFAULT_REQUEST_TIMEOUT`].
    pub request_timeout: Option<Duration>,
    /// For the LLM error-handling middleware; the clients themselves never retry.
    pub max_retries: Option<u32>,
    /// The script text of a `scripted` model.
    pub script: Option<String>,
    /// What the model's tokens cost (the Agent's `model.pricing`).
    pub pricing: Option<ModelPricing>,
}

impl ConfiguredModel {
    /// A spec with just a provider and a name; everything else unset.
    pub fn new(provider: Provider, name: impl Into<String>) -> Self {
        ConfiguredModel {
            provider,
            name: name.into(),
            base_url: None,
            api_key: None,
            temperature: None,
            max_tokens: None,
            context_window: None,
            supports_vision: false,
            supports_thinking: false,
            reasoning_effort: None,
            request_timeout: None,
            max_retries: None,
            script: None,
            pricing: None,
        }
    }

    /// The base URL requests go to.
    pub fn effective_base_url(&self) -> Option<&str> {
        match (self.provider, self.base_url.as_deref()) {
            (_, Some(url)) => Some(url),
            (Provider::Openai, None) => Some(OPENAI_BASE_URL),
            (Provider::Anthropic, None) => Some(ANTHROPIC_BASE_URL),
            (Provider::Scripted, None) => None,
        }
    }
}

/// The API key is never printed (specs end up in logs and error reports).
impl fmt::Debug for ConfiguredModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfiguredModel")
            .field("provider", &self.provider)
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("context_window", &self.context_window)
            .field("supports_vision", &self.supports_vision)
            .field("supports_thinking", &self.supports_thinking)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field(
                "script",
                &self.script.as_ref().map(|s| format!("<{} bytes>", s.len())),
            )
            .field("pricing", &self.pricing)
            .finish()
    }
}

/// The model a run uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// The chosen spec with the Run's override applied; build it with [`build_model`].
    pub spec: ConfiguredModel,
    /// The options for the run's model calls; `thinking` is off here, the run plan decides it
    /// (`plan::thinking`).
    pub options: CallOptions,
    /// Settings that were dropped, for the user to see.
    pub warnings: Vec<String>,
}

/// A model configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(
        "no model configured: the Agent has no `model` and there is no default model (the \
         operator's Helm value, or `--model` locally)"
    )]
    NoModel,
    #[error("model `{field}` is invalid: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("the scripted model has no script (set `model.scriptFrom`, or a script file locally)")]
    MissingScript,
    #[error(transparent)]
    Script(#[from] ScriptError),
    #[error("cannot set up the model client: {0}")]
    Client(#[from] ModelError),
}

fn invalid(field: &'static str, message: impl Into<String>) -> ResolveError {
    ResolveError::Invalid {
        field,
        message: message.into(),
    }
}

/// Picks the model (Run override > Agent model > default) and the call options.
pub fn resolve(
    default: Option<&ConfiguredModel>,
    agent: Option<&ConfiguredModel>,
    run: Option<&ModelOverride>,
) -> Result<Resolved, ResolveError> {
    let mut spec = agent.or(default).ok_or(ResolveError::NoModel)?.clone();
    // The prices are those of the Agent's model, not of another model the Run names.
    let mut priced_for = None;
    if let Some(run) = run {
        if let Some(name) = run.name.as_ref().filter(|n| !n.trim().is_empty()) {
            if *name != spec.name && spec.pricing.take().is_some() {
                priced_for = Some(std::mem::take(&mut spec.name));
            }
            spec.name = name.clone();
        }
        spec.temperature = run.temperature.or(spec.temperature);
        spec.max_tokens = run.max_tokens.or(spec.max_tokens);
    }
    validate(&spec)?;
    let mut warnings = Vec::new();
    if let Some(priced) = priced_for {
        warnings.push(format!(
            "the Run uses model `{}` instead of `{priced}`: the Agent's `pricing` is for \
             `{priced}`, so this Run shows no cost",
            spec.name
        ));
    }
    if !spec.supports_thinking
        && let Some(effort) = spec.reasoning_effort.take()
    {
        warnings.push(format!(
            "model `{}` sets `reasoningEffort: {effort}` but does not declare \
             `supportsThinking`: the effort is not sent",
            spec.name
        ));
    }
    if spec.provider != Provider::Scripted
        && spec.base_url.is_none()
        && spec.api_key.as_deref().is_none_or(str::is_empty)
    {
        warnings.push(format!(
            "model `{}` goes to {} without an API key (set `model.apiKeySecretRef`, or \
             `--api-key-env` locally)",
            spec.name,
            spec.effective_base_url().unwrap_or_default()
        ));
    }
    Ok(Resolved {
        options: CallOptions {
            temperature: spec.temperature,
            max_tokens: spec.max_tokens,
            thinking: false,
            reasoning_effort: spec.reasoning_effort.clone(),
        },
        spec,
        warnings,
    })
}

fn validate(spec: &ConfiguredModel) -> Result<(), ResolveError> {
    if spec.provider != Provider::Scripted && spec.name.trim().is_empty() {
        return Err(invalid("name", "is empty"));
    }
    if let Some(t) = spec.temperature
        && !(t.is_finite() && (0.0..=2.0).contains(&t))
    {
        return Err(invalid(
            "temperature",
            format!("{t} is not between 0 and 2"),
        ));
    }
    if spec.max_tokens == Some(0) {
        return Err(invalid("maxTokens", "must be at least 1"));
    }
    if spec.request_timeout == Some(Duration::ZERO) {
        return Err(invalid("requestTimeout", "must be longer than zero"));
    }
    if let Some(url) = &spec.base_url {
        match reqwest::Url::parse(url) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
            Ok(parsed) => {
                return Err(invalid(
                    "baseURL",
                    format!("`{url}` must use http or https, not {}", parsed.scheme()),
                ));
            }
            Err(e) => return Err(invalid("baseURL", format!("`{url}` is not a URL: {e}"))),
        }
    }
    if spec.provider == Provider::Scripted && spec.script.is_none() {
        return Err(ResolveError::MissingScript);
    }
    Ok(())
}

/// Builds the client for `spec` (usually [`Resolved::spec`]); its temperature, maxTokens and
/// reasoning effort become the client's defaults for calls that leave them unset.
pub fn build_model(spec: &ConfiguredModel) -> Result<Arc<dyn ChatModel>, ResolveError> {
    validate(spec)?;
    let defaults = CallOptions {
        temperature: spec.temperature,
        max_tokens: spec.max_tokens,
        thinking: false,
        reasoning_effort: spec
            .reasoning_effort
            .clone()
            .filter(|_| spec.supports_thinking),
    };
    let request_timeout = spec.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT);
    let config = || HttpModelConfig {
        model: spec.name.clone(),
        base_url: spec.effective_base_url().unwrap_or_default().to_owned(),
        api_key: spec.api_key.clone().filter(|k| !k.is_empty()),
        request_timeout,
        stream_chunk_timeout: STREAM_CHUNK_TIMEOUT.min(request_timeout),
    };
    let model: Arc<dyn ChatModel> = match spec.provider {
        Provider::Openai => Arc::new(OpenAiModel::new(config())?.with_defaults(defaults)),
        Provider::Anthropic => Arc::new(AnthropicModel::new(config())?.with_defaults(defaults)),
        Provider::Scripted => {
            let script = spec.script.as_deref().ok_or(ResolveError::MissingScript)?;
            let name = if spec.name.is_empty() {
                "scripted"
            } else {
                &spec.name
            };
            Arc::new(ScriptedModel::from_yaml(script)?.with_name(name))
        }
    };
    Ok(match &spec.pricing {
        Some(pricing) => Arc::new(PricedModel::new(model, pricing.clone())),
        None => model,
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn openai(name: &str) -> ConfiguredModel {
        ConfiguredModel {
            base_url: Some("http://localhost:8080/v1".into()),
            temperature: Some(0.3),
            max_tokens: Some(1000),
            ..ConfiguredModel::new(Provider::Openai, name)
        }
    }

    #[test]
    fn the_agent_model_replaces_the_default_whole() {
        let default = ConfiguredModel {
            api_key: Some("default-key".into()),
            ..openai("default")
        };
        let agent = ConfiguredModel {
            base_url: Some("http://agent:8000/v1".into()),
            ..ConfiguredModel::new(Provider::Openai, "agent-model")
        };
        let resolved = resolve(Some(&default), Some(&agent), None).unwrap();
        assert_eq!(resolved.spec, agent);
        assert_eq!(resolved.spec.api_key, None, "the default's key never leaks");
        assert_eq!(resolved.options, CallOptions::default());
        assert!(resolved.warnings.is_empty());

        let resolved = resolve(Some(&default), None, None).unwrap();
        assert_eq!(resolved.spec.name, "default");
        assert_eq!(resolved.options.temperature, Some(0.3));
        assert_eq!(resolved.options.max_tokens, Some(1000));
    }

    #[test]
    fn the_run_override_wins_field_by_field() {
        let agent = openai("agent-model");
        let run = ModelOverride {
            name: Some("bigger-model".into()),
            temperature: Some(0.9),
            max_tokens: None,
        };
        let resolved = resolve(None, Some(&agent), Some(&run)).unwrap();
        assert_eq!(resolved.spec.name, "bigger-model");
        assert_eq!(resolved.spec.base_url, agent.base_url);
        assert_eq!(resolved.options.temperature, Some(0.9));
        assert_eq!(resolved.options.max_tokens, Some(1000));
        let blank = ModelOverride {
            name: Some(" ".into()),
            ..ModelOverride::default()
        };
        let resolved = resolve(None, Some(&agent), Some(&blank)).unwrap();
        assert_eq!(resolved.spec.name, "agent-model");
    }

    #[test]
    fn no_model_at_all_is_an_error() {
        let error = resolve(None, None, None).unwrap_err();
        assert!(matches!(error, ResolveError::NoModel));
        assert!(error.to_string().contains("no default model"));
    }

    #[test]
    fn the_reasoning_effort_is_dropped_with_a_warning_when_thinking_is_unsupported() {
        let plain = ConfiguredModel {
            reasoning_effort: Some("high".into()),
            ..openai("small")
        };
        let resolved = resolve(None, Some(&plain), None).unwrap();
        assert!(!resolved.options.thinking);
        assert_eq!(resolved.options.reasoning_effort, None);
        assert_eq!(resolved.spec.reasoning_effort, None);
        assert_eq!(resolved.warnings.len(), 1);
        assert!(
            resolved.warnings[0].contains("reasoningEffort: high"),
            "{:?}",
            resolved.warnings
        );
        assert!(resolved.warnings[0].contains("`small`"));

        let thinker = ConfiguredModel {
            supports_thinking: true,
            ..plain.clone()
        };
        let resolved = resolve(None, Some(&thinker), None).unwrap();
        assert!(!resolved.options.thinking, "the plan decides thinking");
        assert_eq!(resolved.options.reasoning_effort.as_deref(), Some("high"));
        assert!(resolved.warnings.is_empty());
    }

    #[test]
    fn the_public_apis_without_a_key_get_a_warning() {
        let spec = ConfiguredModel::new(Provider::Anthropic, "claude-sonnet-4-5");
        let resolved = resolve(Some(&spec), None, None).unwrap();
        assert_eq!(resolved.warnings.len(), 1);
        assert!(resolved.warnings[0].contains(ANTHROPIC_BASE_URL));
        let keyed = ConfiguredModel {
            api_key: Some("k".into()),
            ..spec
        };
        assert!(
            resolve(Some(&keyed), None, None)
                .unwrap()
                .warnings
                .is_empty()
        );
    }

    #[test]
    fn invalid_settings_name_the_field() {
        let cases = [
            (ConfiguredModel::new(Provider::Openai, " "), "`name`"),
            (
                ConfiguredModel {
                    temperature: Some(3.0),
                    ..openai("m")
                },
                "`temperature`",
            ),
            (
                ConfiguredModel {
                    max_tokens: Some(0),
                    ..openai("m")
                },
                "`maxTokens`",
            ),
            (
                ConfiguredModel {
                    base_url: Some("localhost:8080".into()),
                    ..openai("m")
                },
                "`baseURL`",
            ),
            (
                ConfiguredModel {
                    base_url: Some("not a url".into()),
                    ..openai("m")
                },
                "`baseURL`",
            ),
            (
                ConfiguredModel {
                    request_timeout: Some(Duration::ZERO),
                    ..openai("m")
                },
                "`requestTimeout`",
            ),
            (ConfiguredModel::new(Provider::Scripted, ""), "no script"),
        ];
        for (spec, expected) in cases {
            let message = resolve(None, Some(&spec), None).unwrap_err().to_string();
            assert!(message.contains(expected), "{spec:?}: {message}");
            assert!(build_model(&spec).is_err());
        }
    }

    #[test]
    fn debug_output_hides_the_api_key() {
        let spec = ConfiguredModel {
            api_key: Some("sk-secret-123".into()),
            script: Some("rules: []".into()),
            ..openai("m")
        };
        let printed = format!("{spec:?}");
        assert!(!printed.contains("sk-secret-123"), "{printed}");
        assert!(printed.contains("<redacted>"));
        assert!(!printed.contains("rules: []"));
    }

    #[test]
    fn default_base_urls() {
        assert_eq!(
            ConfiguredModel::new(Provider::Openai, "gpt").effective_base_url(),
            Some(OPENAI_BASE_URL)
        );
        assert_eq!(
            ConfiguredModel::new(Provider::Anthropic, "claude").effective_base_url(),
            Some(ANTHROPIC_BASE_URL)
        );
        assert_eq!(
            openai("m").effective_base_url(),
            Some("http://localhost:8080/v1")
        );
    }

    #[tokio::test]
    async fn builds_every_provider() {
        let built = build_model(&openai("qwen")).unwrap();
        assert_eq!(built.name(), "qwen");
        let built = build_model(&ConfiguredModel::new(Provider::Anthropic, "claude")).unwrap();
        assert_eq!(built.name(), "claude");
        let scripted = ConfiguredModel {
            script: Some("rules:\n  - respond: {content: hi}\n".into()),
            ..ConfiguredModel::new(Provider::Scripted, "")
        };
        let built = build_model(&scripted).unwrap();
        assert_eq!(built.name(), "scripted");
        let answer = built
            .complete(&super::super::ModelRequest::default(), &|_| {})
            .await
            .unwrap();
        assert_eq!(answer.content, "hi");
        let broken = ConfiguredModel {
            script: Some("rules: [{mach: 1}]".into()),
            ..scripted
        };
        let error = build_model(&broken).err().unwrap();
        assert!(matches!(error, ResolveError::Script(_)));
        assert!(error.to_string().contains("rules[0].mach"), "{error}");
    }

    #[tokio::test]
    async fn built_clients_send_the_spec_defaults() {
        use wiremock::matchers::method;
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(
                r#"{"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}"#,
                "application/json",
            ))
            .mount(&server)
            .await;
        let spec = ConfiguredModel {
            base_url: Some(format!("{}/v1", server.uri())),
            supports_thinking: true,
            reasoning_effort: Some("low".into()),
            ..openai("m")
        };
        let built = build_model(&spec).unwrap();
        built
            .complete(&super::super::ModelRequest::default(), &|_| {})
            .await
            .unwrap();
        let body: serde_json::Value = server.received_requests().await.unwrap()[0]
            .body_json()
            .unwrap();
        assert_eq!(body["temperature"], 0.3);
        assert_eq!(body["max_tokens"], 1000);
        assert_eq!(body["reasoning_effort"], "low");
    }
}
