//! What an Agent's traces may hold.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the agent's traces (OpenTelemetry spans) record.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservabilitySpec {
    /// Whether spans record prompts, answers and tool arguments and results, truncated.
    /// Default false. Secrets never.
    #[serde(default)]
    pub capture_content: bool,
}
