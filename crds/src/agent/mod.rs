//! The `Agent` resource: a configured lead agent (model, SOUL, skills, tools, limits) that Runs
//! refer to.

mod mcp;
mod model;
mod observability;
mod sandbox;
mod settings;
mod validate;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::refs::ValueFrom;

pub use mcp::{McpEnvVar, McpHeader, McpServerSpec, McpSpec, header_env_var};
pub use model::{ModelPricing, ModelSpec, Provider, ReasoningEffort};
pub use observability::ObservabilitySpec;
pub use sandbox::{
    AccessMode, EgressMode, EgressSpec, SandboxResources, SandboxSpec, WorkspaceClaimSpec,
    WorkspaceSpec,
};
pub use settings::{
    MemoryScope, MemorySpec, RunDefaultsSpec, SubagentsSpec, SummarizationSpec, ToolGroup,
    ToolsSpec, WebSearchProvider, WebSearchSpec,
};

/// The agent's configuration: model, SOUL, skills, tools, limits and sandbox.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "herd.dev",
    version = "v1alpha1",
    kind = "Agent",
    namespaced,
    status = "AgentStatus",
    shortname = "hag",
    category = "herd",
    derive = "PartialEq",
    doc = "An agent: a model with a SOUL, skills, tools and limits. Create a Run that names it to give it a task.",
    validation = Rule::new(crate::rules::NAME_63).message(crate::rules::NAME_63_MESSAGE),
    printcolumn(name = "Model", type_ = "string", json_path = ".spec.model.name", description = "The model's name (empty: the operator's default model)"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(crate::rules::SOUL_EXCLUSIVE).message(crate::rules::SOUL_EXCLUSIVE_MESSAGE))]
#[allow(clippy::duplicated_attributes)]
pub struct AgentSpec {
    /// The chat model. Absent: the operator's default model (a Helm value).
    pub model: Option<ModelSpec>,
    /// The agent's SOUL.md: its identity, values and working style, inline (at most 32 KiB).
    /// Exclusive with `soulFrom`.
    #[schemars(length(max = 32768))]
    pub soul: Option<String>,
    /// The SOUL.md taken from a ConfigMap key, for long texts. Exclusive with `soul`.
    pub soul_from: Option<ValueFrom>,
    /// Skills the agent may use, by name (built-in or Skill resources). Absent: every enabled
    /// skill; `[]`: none; a list: only those (each name once).
    #[schemars(length(max = 64), inner(length(max = 64)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new(crate::rules::SKILL_REFS).message(crate::rules::expression(crate::rules::SKILL_REFS_MESSAGE))
    )]
    pub skills: Option<Vec<String>>,
    /// Tool groups the agent may use: `web`, `file:read`, `file:write`, `bash`. Absent: all.
    #[schemars(length(max = 4))]
    pub tool_groups: Option<Vec<ToolGroup>>,
    /// Settings of individual tools.
    pub tools: Option<ToolsSpec>,
    /// Model Context Protocol servers whose tools the agent gets, named `<server>__<tool>`.
    pub mcp: Option<McpSpec>,
    /// Delegation to subagents, each task a child Run.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub subagents: SubagentsSpec,
    /// Defaults for this Agent's Runs.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub run_defaults: RunDefaultsSpec,
    /// Long-term memory of facts learned across runs.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub memory: MemorySpec,
    /// Summarization of older messages in long runs.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub summarization: SummarizationSpec,
    /// The pod the agent's tools run in.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub sandbox: SandboxSpec,
    /// What the agent's traces record.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub observability: ObservabilitySpec,
    /// Tool calls that need a person's yes first (docs/approval.md); Runs only add to it.
    pub approval: Option<crate::approval::ApprovalSpec>,
}

/// What the operator observed about an Agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Accepted`, `ResolvedRefs` (reasons `SkillNotFound`, `SecretNotFound`,
    /// `SecretNotAllowed`...) and `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// The skills the agent gets, with the digest of the version in use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub resolved_skills: Vec<ResolvedSkill>,
}

/// A skill resolved for an Agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSkill {
    /// The skill's name.
    #[schemars(length(max = 64))]
    pub name: String,
    /// SHA-256 of the skill's content and files, hex (built-in skills: of the image's copy).
    #[schemars(length(max = 128))]
    pub digest: String,
}
