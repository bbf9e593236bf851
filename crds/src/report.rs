//! What a runner reports about its Run: `status.report`, written only through the run API.
//!
//! These types are shared by the CRD (`RunStatus.report`), the run-API wire bodies and the
//! runner itself, so a todo list or a clarification question has one shape everywhere.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::formats::is_date_time;
use crate::validation::{Checker, FieldErrors};

/// One item of the agent's plan (plan mode's `write_todos`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Todo {
    /// What the step is, in the agent's words.
    #[schemars(length(max = 2048))]
    pub content: String,
    /// Where the step stands: `pending`, `in_progress` or `completed`.
    pub status: TodoStatus,
}

/// Progress of one todo item.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started yet.
    Pending,
    /// Being worked on now; the agent keeps exactly one item in this state.
    InProgress,
    /// Done.
    Completed,
}

/// Tokens and calls a run has used so far, summed over the lead agent and its in-process work.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens reported by the model provider (estimated when the provider reports none).
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens reported by the model provider (estimated when the provider reports none).
    #[serde(default)]
    pub output_tokens: u64,
    /// Model calls made, retries included.
    #[serde(default)]
    pub model_calls: u32,
    /// Tool calls executed.
    #[serde(default)]
    pub tool_calls: u32,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Adds another usage record to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.model_calls = self.model_calls.saturating_add(other.model_calls);
        self.tool_calls = self.tool_calls.saturating_add(other.tool_calls);
    }
}

/// Most layers in a [`SandboxReport`].
pub const MAX_SANDBOX_LAYERS: usize = 16;
/// Most characters of a [`SandboxLayer`]'s `detail`.
pub const MAX_SANDBOX_LAYER_DETAIL: usize = 512;

/// The isolation around a Run's tools, as its sandbox found it when it started: which layers
/// confine the model's commands and file tools, and which could not be used here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxReport {
    /// Each layer the sandbox knows of, active or not.
    #[serde(default)]
    #[schemars(length(max = 16))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub layers: Vec<SandboxLayer>,
}

/// One layer of isolation around the tools.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxLayer {
    /// The layer: `landlock` (file access rules), `userNamespaces` (a private user and mount
    /// namespace, local runs only), `seccomp`, `noNewPrivileges`, `capabilities` (none held).
    #[schemars(length(max = 64))]
    pub name: String,
    /// Whether the layer confines the tools.
    pub active: bool,
    /// What the layer enforces, or why it is not active (e.g. `ABI 6: writes only to
    /// /mnt/user-data and /tmp`, `unavailable: the kernel does not support Landlock`).
    #[serde(default)]
    #[schemars(length(max = 512))]
    pub detail: String,
}

impl SandboxLayer {
    /// A layer named `name`, active or not, saying `detail`.
    pub fn new(name: &str, active: bool, detail: impl Into<String>) -> Self {
        SandboxLayer {
            name: name.to_owned(),
            active,
            detail: detail.into(),
        }
    }
}

impl SandboxReport {
    /// The report cut to the CRD's limits (layers and characters), so a status write never
    /// fails on a sandbox that says too much.
    pub fn bounded(&self) -> SandboxReport {
        SandboxReport {
            layers: self
                .layers
                .iter()
                .take(MAX_SANDBOX_LAYERS)
                .map(|layer| SandboxLayer {
                    name: layer.name.chars().take(64).collect(),
                    active: layer.active,
                    detail: layer
                        .detail
                        .chars()
                        .take(MAX_SANDBOX_LAYER_DETAIL)
                        .collect(),
                })
                .collect(),
        }
    }

    /// One line for a person: `landlock on (ABI 6: …), userNamespaces off (…)`.
    pub fn summary(&self) -> String {
        self.layers
            .iter()
            .map(|layer| {
                let state = if layer.active { "on" } else { "off" };
                if layer.detail.is_empty() {
                    format!("{} {state}", layer.name)
                } else {
                    format!("{} {state} ({})", layer.name, layer.detail)
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why the agent loop stopped.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// The model gave a final answer.
    Completed,
    /// The agent asked a clarification question and waits for an answer.
    InputRequired,
    /// `maxModelCalls` was reached.
    ModelCallLimit,
    /// Loop detection stopped repeated tool calls.
    LoopDetected,
    /// The run's token budget was used up.
    TokenBudgetExceeded,
    /// The per-run subagent total was reached.
    SubagentLimitReached,
    /// The model stopped on its output-length limit.
    ModelLengthLimit,
    /// The provider's safety system stopped the answer.
    SafetyStop,
    /// The model could not be reached or kept failing.
    ModelError,
    /// The run was cancelled.
    Cancelled,
    /// The run's time ran out.
    TimedOut,
    /// The sandbox (the tools' container) could not be reached or kept failing.
    SandboxUnavailable,
    /// The final answer and presented files did not fit the result ConfigMap (written by the
    /// run API).
    ResultTooLarge,
    /// The checkpoint stayed too large after summarization (written by the run API).
    CheckpointTooLarge,
    /// A signal (Ctrl-C, SIGTERM) stopped a local run, which saved a checkpoint to resume
    /// from; a Run's pod stopped this way posts its checkpoint, never a result.
    Interrupted,
}

impl StopReason {
    /// Whether the run produced its answer (possibly capped) rather than failing or pausing.
    pub fn is_answer(self) -> bool {
        matches!(
            self,
            StopReason::Completed
                | StopReason::ModelCallLimit
                | StopReason::LoopDetected
                | StopReason::TokenBudgetExceeded
                | StopReason::SubagentLimitReached
                | StopReason::ModelLengthLimit
                | StopReason::SafetyStop
        )
    }
}

/// The kind of question the agent asks (DeerFlow's `clarification_type`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClarificationType {
    /// Information needed to go on is missing.
    MissingInfo,
    /// The request can be read more than one way.
    AmbiguousRequirement,
    /// Several approaches are possible and the user should choose.
    ApproachChoice,
    /// The next step is risky and needs confirmation.
    RiskConfirmation,
    /// The agent proposes something and asks for agreement.
    Suggestion,
}

/// An open question from the agent to the user.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Clarification {
    /// Identifier to quote in `spec.responses[].id` when answering.
    #[schemars(length(max = 64))]
    pub id: String,
    /// The question itself.
    #[schemars(length(max = 4096))]
    pub question: String,
    /// What kind of question this is.
    #[serde(rename = "type")]
    pub kind: ClarificationType,
    /// Why the agent asks, if it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub context: Option<String>,
    /// Suggested answers, if the agent offered a choice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 24))]
    pub options: Vec<String>,
    /// When the question was asked (RFC 3339), e.g. `2026-01-31T09:30:00Z`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(crate::rules::DATE_TIME).message(crate::rules::expression(crate::rules::DATE_TIME_MESSAGE)))]
    pub asked_at: Option<String>,
}

impl Clarification {
    /// The question as the user sees it (and the model, as the tool's result): the context,
    /// the question after an icon of its kind, the options numbered. Raw text: pass it through
    /// [`crate::terminal_text::for_terminal`] before printing it.
    pub fn render(&self) -> String {
        let icon = match self.kind {
            ClarificationType::MissingInfo => "❓",
            ClarificationType::AmbiguousRequirement => "🤔",
            ClarificationType::ApproachChoice => "🔀",
            ClarificationType::RiskConfirmation => "⚠️",
            ClarificationType::Suggestion => "💡",
        };
        let mut text = String::new();
        if let Some(context) = &self.context {
            text.push_str(context);
            text.push_str("\n\n");
        }
        text.push_str(icon);
        text.push(' ');
        text.push_str(&self.question);
        for (index, option) in self.options.iter().enumerate() {
            text.push_str(&format!("\n  {}. {option}", index + 1));
        }
        text
    }

    /// The answer a line typed at a terminal means: an option's text for its number, else the
    /// trimmed line; `None` for an empty line.
    pub fn answer_from(&self, line: &str) -> Option<String> {
        let line = line.trim();
        if line.is_empty() {
            return None;
        }
        let picked = line
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|index| self.options.get(index));
        Some(picked.cloned().unwrap_or_else(|| line.to_owned()))
    }

    /// Checks the CRD's rule on `askedAt` (the run API refuses a question the API server would
    /// refuse, before writing it).
    pub fn validate(&self) -> Result<(), FieldErrors> {
        let mut checker = Checker::default();
        if let Some(asked_at) = &self.asked_at {
            checker.quoted(
                is_date_time(asked_at),
                "status.report.clarification.askedAt",
                asked_at,
                crate::rules::DATE_TIME_SUFFIX,
            );
        }
        checker.finish()
    }
}

/// A file the agent presented as a deliverable.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Virtual path under `/mnt/user-data/outputs/`.
    #[schemars(length(max = 1024))]
    pub path: String,
    /// Size in bytes.
    pub size: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_report_is_cut_to_the_crds_limits_and_summarized_on_one_line() {
        let report = SandboxReport {
            layers: (0..20)
                .map(|i| SandboxLayer::new(&format!("layer{i}"), i == 0, "x".repeat(600)))
                .collect(),
        };
        let bounded = report.bounded();
        assert_eq!(bounded.layers.len(), MAX_SANDBOX_LAYERS);
        assert!(
            bounded
                .layers
                .iter()
                .all(|layer| layer.detail.chars().count() == MAX_SANDBOX_LAYER_DETAIL)
        );
        let short = SandboxReport {
            layers: vec![
                SandboxLayer::new("landlock", true, "ABI 6"),
                SandboxLayer::new("userNamespaces", false, ""),
            ],
        };
        assert_eq!(short.summary(), "landlock on (ABI 6), userNamespaces off");
    }

    fn question(options: &[&str], context: Option<&str>) -> Clarification {
        Clarification {
            id: "q".into(),
            question: "Format?".into(),
            kind: ClarificationType::ApproachChoice,
            context: context.map(str::to_owned),
            options: options.iter().map(|o| (*o).to_owned()).collect(),
            asked_at: None,
        }
    }

    #[test]
    fn a_question_renders_context_icon_question_and_numbered_options() {
        assert_eq!(
            question(&["PDF", "HTML"], Some("Two ways work.")).render(),
            "Two ways work.\n\n🔀 Format?\n  1. PDF\n  2. HTML"
        );
        assert_eq!(question(&[], None).render(), "🔀 Format?");
    }

    #[test]
    fn numbers_pick_options_and_text_passes_through() {
        let q = question(&["PDF", "HTML"], None);
        assert_eq!(q.answer_from("2\n").as_deref(), Some("HTML"));
        assert_eq!(q.answer_from("3").as_deref(), Some("3"));
        assert_eq!(q.answer_from("0").as_deref(), Some("0"));
        assert_eq!(q.answer_from(" Markdown ").as_deref(), Some("Markdown"));
        assert_eq!(q.answer_from("  \n"), None);
    }
}
