//! `spec.model` of an Agent: which chat model the agent talks to, and how.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::refs::{SecretKeyRef, ValueFrom};

/// The chat model an Agent uses.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelSpec {
    /// The API the model speaks: `openai` (any OpenAI-compatible Chat Completions server: OpenAI,
    /// vLLM, Ollama, llama.cpp, LiteLLM, DeepSeek...), `anthropic` (the Messages API), or
    /// `scripted` (replays a script from `scriptFrom`; for tests and offline demos).
    pub provider: Provider,
    /// The model's name as the server knows it, e.g. `gpt-4.1-mini` or `qwen3:8b`.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Base URL of the API, an http or https URL, e.g. `http://vllm.models:8000/v1`. Absent: the provider's public
    /// endpoint.
    #[serde(rename = "baseURL")]
    #[schemars(length(max = 2048))]
    #[x_kube(validation = Rule::new(crate::rules::HTTP_URL).message(crate::rules::expression(crate::rules::HTTP_URL_MESSAGE)))]
    pub base_url: Option<String>,
    /// The Secret key holding the API key. The Secret must carry the label
    /// `herd.dev/model-credentials: "true"`. Absent: requests carry no key.
    pub api_key_secret_ref: Option<SecretKeyRef>,
    /// Sampling temperature, 0 to 2. Absent: the server's default.
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: Option<f64>,
    /// Most tokens one answer may have. Absent: the server's default.
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    /// The model's context window in tokens. When set, the system prompt's optional sections
    /// shrink to fit half of it, so small local models work.
    #[schemars(range(min = 1))]
    pub context_window: Option<u32>,
    /// Whether the model accepts images (enables `view_image`). Absent: false.
    pub supports_vision: Option<bool>,
    /// Whether the model can think before answering (extended thinking / reasoning). Absent:
    /// false; with false, `thinking` in runs is ignored.
    pub supports_thinking: Option<bool>,
    /// Reasoning effort to request from reasoning models: `low`, `medium` or `high`.
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::optional_enum::<ReasoningEffort>")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// How long one model request may take, 1s to 168h, e.g. `5m`. Absent: 10m.
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new(crate::rules::DURATION).message(crate::rules::DURATION_MESSAGE),
        validation = Rule::new(crate::rules::DURATION_UP_TO_168H).message(crate::rules::expression(crate::rules::DURATION_UP_TO_168H_MESSAGE))
    )]
    pub request_timeout: Option<String>,
    /// Retries of a failed model request (rate limits, 5xx, timeouts), after the first try.
    /// Absent: 2, so three attempts in all (DeerFlow's default).
    #[schemars(range(max = 10))]
    pub max_retries: Option<u32>,
    /// CIDRs the model endpoint lives in (e.g. `10.20.0.0/16`), opened in the Agent's NetworkPolicy (at most 16).
    /// Absent: the public internet (`0.0.0.0/0` and `::/0` minus private ranges).
    #[serde(rename = "egressCIDRs")]
    #[schemars(length(max = 16), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new(crate::rules::CIDRS).message(crate::rules::expression(crate::rules::CIDRS_MESSAGE)))]
    pub egress_cidrs: Option<Vec<String>>,
    /// For `provider: scripted`: the ConfigMap key holding the script (YAML rules matching on
    /// role, subagent type, purpose, attempt and the last message's text).
    pub script_from: Option<ValueFrom>,
    /// Prices of this model; with them, Runs show what they cost. Absent: no cost.
    pub pricing: Option<ModelPricing>,
}

/// What a model's tokens cost, per million, as decimal strings (e.g. `"2.50"`, at most six
/// decimals), so status never holds a rounded float.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelPricing {
    /// Per million input tokens not read from the provider's cache.
    #[schemars(regex(pattern = r"^[0-9]{1,9}(\.[0-9]{1,6})?$"))]
    pub input_per_million: String,
    /// Per million output tokens.
    #[schemars(regex(pattern = r"^[0-9]{1,9}(\.[0-9]{1,6})?$"))]
    pub output_per_million: String,
    /// Per million input tokens read from the cache. Absent: `inputPerMillion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]{1,9}(\.[0-9]{1,6})?$"))]
    pub cached_input_per_million: Option<String>,
    /// ISO 4217 code, e.g. `USD`.
    #[schemars(regex(pattern = "^[A-Z]{3}$"))]
    pub currency: String,
}

/// The API a model speaks.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Provider {
    /// OpenAI-compatible Chat Completions.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// A script replayed without any server.
    Scripted,
}

/// How hard a reasoning model should think.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ReasoningEffort {
    /// Least reasoning, fastest answers.
    Low,
    /// The usual balance.
    Medium,
    /// Most reasoning.
    High,
}
