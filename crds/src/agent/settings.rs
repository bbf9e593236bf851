//! The Agent's behaviour settings: tool groups, web search, subagents, run defaults, memory and
//! summarization. Every defaulted field has its default both in the schema and in serde, because
//! `herd-runner run -f` reads manifests without an API server.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::refs::SecretKeyRef;

/// A group of tools the agent may use.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ToolGroup {
    /// `web_search` and `web_fetch`.
    #[serde(rename = "web")]
    Web,
    /// `ls`, `read_file`, `glob`, `grep` in the sandbox.
    #[serde(rename = "file:read")]
    FileRead,
    /// `write_file` and `str_replace` in the sandbox.
    #[serde(rename = "file:write")]
    FileWrite,
    /// `bash` in the sandbox.
    #[serde(rename = "bash")]
    Bash,
}

/// Settings of individual tools.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolsSpec {
    /// The search engine behind `web_search`. Absent: `web_search` is not offered (`web_fetch`
    /// still is, with the `web` group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_search: Option<WebSearchSpec>,
}

/// The search engine behind `web_search`.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebSearchSpec {
    /// `searxng` (a self-hosted SearXNG with its JSON API enabled) or `tavily`.
    pub provider: WebSearchProvider,
    /// Base URL of the engine, an http or https URL, e.g. `http://searxng.search:8080`. Required for `searxng`;
    /// absent for `tavily` means its public API.
    #[serde(rename = "baseURL")]
    #[schemars(length(max = 2048))]
    #[x_kube(validation = Rule::new(crate::rules::HTTP_URL).message(crate::rules::expression(crate::rules::HTTP_URL_MESSAGE)))]
    pub base_url: Option<String>,
    /// The Secret key holding the engine's API key (labelled
    /// `herd.dev/model-credentials: "true"`, like model keys).
    pub api_key_secret_ref: Option<SecretKeyRef>,
}

/// A web search engine.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum WebSearchProvider {
    /// SearXNG's JSON API.
    Searxng,
    /// Tavily's search API.
    Tavily,
}

fn default_max_concurrent() -> u32 {
    3
}
fn default_max_total() -> u32 {
    6
}
fn default_max_depth() -> u32 {
    1
}
fn default_subagent_timeout() -> String {
    "15m".to_owned()
}

/// Whether and how the agent delegates work to subagents (the `task` tool); each subagent task
/// becomes a child Run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubagentsSpec {
    /// Whether the agent gets the `task` tool. Default false.
    #[serde(default)]
    pub enabled: bool,
    /// Most child Runs of one Run going at the same time, 1 to 4. Default 3.
    #[serde(default = "default_max_concurrent")]
    #[x_kube(validation = Rule::new(crate::rules::MAX_CONCURRENT).message(crate::rules::MAX_CONCURRENT_MESSAGE))]
    pub max_concurrent: u32,
    /// Most child Runs one Run may start in total, 1 to 50. Default 6.
    #[serde(default = "default_max_total")]
    #[x_kube(validation = Rule::new(crate::rules::MAX_TOTAL).message(crate::rules::MAX_TOTAL_MESSAGE))]
    pub max_total: u32,
    /// How deep subagents may nest, 1 to 3. A child above this depth keeps the `task` tool; at
    /// it, it does not. Default 1 (children cannot delegate further).
    #[serde(default = "default_max_depth")]
    #[x_kube(validation = Rule::new(crate::rules::MAX_DEPTH).message(crate::rules::MAX_DEPTH_MESSAGE))]
    pub max_depth: u32,
    /// Time limit of one child Run, 1s to 168h, e.g. `15m`; never more than its parent has
    /// left. Default `15m`.
    #[serde(default = "default_subagent_timeout")]
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new(crate::rules::DURATION).message(crate::rules::DURATION_MESSAGE),
        validation = Rule::new(crate::rules::DURATION_UP_TO_168H).message(crate::rules::expression(crate::rules::DURATION_UP_TO_168H_MESSAGE))
    )]
    pub timeout: String,
}

impl Default for SubagentsSpec {
    fn default() -> Self {
        SubagentsSpec {
            enabled: false,
            max_concurrent: default_max_concurrent(),
            max_total: default_max_total(),
            max_depth: default_max_depth(),
            timeout: default_subagent_timeout(),
        }
    }
}

fn default_true() -> bool {
    true
}
fn default_timeout() -> String {
    "30m".to_owned()
}
fn default_input_timeout() -> String {
    "24h".to_owned()
}
fn default_max_model_calls() -> u32 {
    50
}
fn default_suspend_after() -> String {
    "2m".to_owned()
}

/// Defaults for this Agent's Runs; a Run may override `planMode`, `thinking`, `timeout` and
/// `inputTimeout` (`suspendAfter` is the Agent's alone).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunDefaultsSpec {
    /// Plan mode: the agent keeps a todo list (`write_todos`) shown in the Run's status.
    /// Default false.
    #[serde(default)]
    pub plan_mode: bool,
    /// Let the model think before answering, when it supports it. Default true.
    #[serde(default = "default_true")]
    pub thinking: bool,
    /// Time limit of a Run's work, 1s to 168h, e.g. `30m`: from its start (queue and every
    /// attempt included), waits for a person excluded. Default `30m`.
    #[serde(default = "default_timeout")]
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new(crate::rules::DURATION).message(crate::rules::DURATION_MESSAGE),
        validation = Rule::new(crate::rules::DURATION_UP_TO_168H).message(crate::rules::expression(crate::rules::DURATION_UP_TO_168H_MESSAGE))
    )]
    pub timeout: String,
    /// How long a Run waits for an answer to a clarification question before failing with
    /// `InputTimedOut`, 1s to 720h; this time does not count against `timeout`. Default `24h`.
    #[serde(default = "default_input_timeout")]
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new(crate::rules::DURATION).message(crate::rules::DURATION_MESSAGE),
        validation = Rule::new(crate::rules::DURATION_UP_TO_720H).message(crate::rules::expression(crate::rules::DURATION_UP_TO_720H_MESSAGE))
    )]
    pub input_timeout: String,
    /// Wait for an answer after which the Pod suspends: Run `Suspended`, no Pod or slot until
    /// answered. `0`: never. Default `2m`.
    #[serde(default = "default_suspend_after")]
    #[schemars(length(max = 32), regex(pattern = r"^(0|([0-9]{1,6}(ms|s|m|h))+)$"))]
    pub suspend_after: String,
    /// Most model calls of one Run (retries included); a child gets at most what its parent has
    /// left. Default 50.
    #[serde(default = "default_max_model_calls")]
    #[schemars(range(min = 1))]
    pub max_model_calls: u32,
    /// Most tokens (input plus output) one Run may use, children included. Absent: no budget.
    #[schemars(range(min = 1))]
    pub token_budget: Option<u64>,
    /// How often a Run is retried after an infrastructure failure (eviction, node loss, a Pod
    /// deleted by someone else, a Pod that did not start within the operator's pod start
    /// timeout unless its image name is invalid), 0 to 3. A retry resumes from the Run's
    /// checkpoint (its latest question) when it has one. Failures of the agent itself are never
    /// retried. Default 0.
    #[serde(default)]
    #[x_kube(validation = Rule::new(crate::rules::RETRIES).message(crate::rules::RETRIES_MESSAGE))]
    pub retries: u32,
    /// Seconds after which a finished Run is deleted, with what it owns: its Pods (the Failed
    /// Pods of earlier attempts, such as an evicted one, are kept until then for `kubectl
    /// describe`), snapshot, result, checkpoint, NetworkPolicy and workspace claim. Absent: kept
    /// until deleted.
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<u32>,
}

impl RunDefaultsSpec {
    /// `suspendAfter` as a duration; `None` for `0` (never suspend).
    pub fn suspend_after(
        &self,
    ) -> Result<Option<std::time::Duration>, crate::duration::DurationError> {
        parse_suspend_after(&self.suspend_after)
    }
}

/// A `suspendAfter` value: `None` for `0` or a zero duration (never suspend), else the wait.
pub fn parse_suspend_after(
    text: &str,
) -> Result<Option<std::time::Duration>, crate::duration::DurationError> {
    if text == "0" {
        return Ok(None);
    }
    let wait = crate::duration::parse_duration(text)?;
    Ok((!wait.is_zero()).then_some(wait))
}

impl Default for RunDefaultsSpec {
    fn default() -> Self {
        RunDefaultsSpec {
            plan_mode: false,
            thinking: true,
            timeout: default_timeout(),
            input_timeout: default_input_timeout(),
            suspend_after: default_suspend_after(),
            max_model_calls: default_max_model_calls(),
            token_budget: None,
            retries: 0,
            ttl_seconds_after_finished: None,
        }
    }
}

fn default_max_facts() -> u32 {
    100
}
fn default_injection_tokens() -> u32 {
    2000
}

/// Long-term memory: facts about the user, learned from runs and shown to later runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemorySpec {
    /// Whether runs read and update memory (stored in ConfigMap `<agent>-memory`). Default
    /// false.
    #[serde(default)]
    pub enabled: bool,
    /// `agent`: one memory shared by all runs of the Agent; `user`: one per value of the Run's
    /// `herd.dev/user` label. Default `agent`.
    #[serde(default)]
    pub scope: MemoryScope,
    /// Most facts kept; the least confident are dropped first. Default 100.
    #[serde(default = "default_max_facts")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_facts: u32,
    /// Tokens of memory put into a run's context. Default 2000.
    #[serde(default = "default_injection_tokens")]
    #[schemars(range(min = 0, max = 100000))]
    pub injection_tokens: u32,
    /// Most tokens one memory update may write. Absent: `contextWindow`/8 (else 1024), at
    /// most `model.maxTokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
}

impl Default for MemorySpec {
    fn default() -> Self {
        MemorySpec {
            enabled: false,
            scope: MemoryScope::default(),
            max_facts: default_max_facts(),
            injection_tokens: default_injection_tokens(),
            max_tokens: None,
        }
    }
}

/// Whose memory a run uses.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MemoryScope {
    /// One memory for the Agent.
    #[default]
    Agent,
    /// One memory per `herd.dev/user` label value.
    User,
}

fn default_trigger_tokens() -> u32 {
    32_000
}
fn default_keep_messages() -> u32 {
    10
}

/// Summarization of older messages when the conversation grows long.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SummarizationSpec {
    /// Whether older messages are summarized. Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Summarize once the conversation reaches this many tokens (or half the model's
    /// `contextWindow`, if smaller). Default 32000.
    #[serde(default = "default_trigger_tokens")]
    #[schemars(range(min = 1000))]
    pub trigger_tokens: u32,
    /// Most recent messages kept verbatim when summarizing. Default 10.
    #[serde(default = "default_keep_messages")]
    #[schemars(range(min = 1, max = 1000))]
    pub keep_messages: u32,
    /// Most tokens of one summary. Absent: `contextWindow`/8 (else 1024), at most
    /// `model.maxTokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
}

impl Default for SummarizationSpec {
    fn default() -> Self {
        SummarizationSpec {
            enabled: true,
            trigger_tokens: default_trigger_tokens(),
            keep_messages: default_keep_messages(),
            max_tokens: None,
        }
    }
}
