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

/// Most entries of [`Usage::by_model`]: the models past the first fifteen share the last entry,
/// named [`OTHER_MODELS`].
pub const MAX_MODELS: usize = 16;
/// The name of the [`Usage::by_model`] entry that sums the models past the first fifteen.
pub const OTHER_MODELS: &str = "other";
/// Most characters of a model's name in [`ModelUsage`] (as `spec.model.name`).
pub const MAX_MODEL_NAME: usize = 256;

/// Whether a count is zero (serde's `skip_serializing_if` for counts shown only when set).
pub(crate) fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Tokens and calls a run has used so far: the lead agent and its in-process work, and with its
/// children in `withChildren`.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens reported by the model provider (estimated when the provider reports none),
    /// cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens reported by the model provider (estimated when the provider reports none).
    #[serde(default)]
    pub output_tokens: u64,
    /// Of the input tokens, those the provider read from its prompt cache (OpenAI
    /// `cached_tokens`, Anthropic `cache_read_input_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// The agent loop's model calls (what `maxModelCalls` limits), retries included; the
    /// side calls for a title, a summary or memory are not counted here, only in `byModel`.
    #[serde(default)]
    pub model_calls: u32,
    /// Tool calls executed.
    #[serde(default)]
    pub tool_calls: u32,
    /// What these tokens cost, when the Agent's model has `pricing`.
    pub cost: Option<Cost>,
    /// The tokens by model (at most 16; models past the first fifteen are summed as `other`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub by_model: Vec<ModelUsage>,
    /// This Run's usage plus that of every child Run it delegated to (and theirs), once a
    /// child has ended.
    pub with_children: Option<UsageTotals>,
}

/// The tokens one model used in a run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelUsage {
    /// The model's name as configured, or `other`.
    #[schemars(length(max = 256))]
    pub model: String,
    /// Prompt tokens, cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Calls to this model that answered, side calls (title, summary, memory) included.
    #[serde(default)]
    pub model_calls: u32,
}

/// Usage summed over a Run and its children, without the split by model.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageTotals {
    /// Prompt tokens, cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// The agent loops' model calls, as `usage.modelCalls` counts them.
    #[serde(default)]
    pub model_calls: u32,
    /// Tool calls executed.
    #[serde(default)]
    pub tool_calls: u32,
    /// What they cost (children priced in another currency than the first are left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

/// An amount of money, in integer millionths of the currency's unit so it never rounds twice.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// ISO 4217 code, e.g. `USD`.
    #[schemars(length(max = 3))]
    pub currency: String,
    /// The amount in millionths of the currency's unit: `4210` is 0.004210.
    pub micros: u64,
}

impl Cost {
    /// The amount as a decimal, six places: `0.004210`.
    pub fn amount(&self) -> String {
        crate::micros::format_micros(self.micros)
    }

    /// The sum of two amounts of the same currency; another currency's is left out.
    fn plus(first: Option<&Cost>, second: Option<&Cost>) -> Option<Cost> {
        match (first, second) {
            (Some(a), Some(b)) if a.currency == b.currency => Some(Cost {
                currency: a.currency.clone(),
                micros: a.micros.saturating_add(b.micros),
            }),
            (Some(a), _) => Some(a.clone()),
            (None, b) => b.cloned(),
        }
    }
}

impl UsageTotals {
    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Adds another total to this one.
    pub fn add(&mut self, other: &UsageTotals) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.model_calls = self.model_calls.saturating_add(other.model_calls);
        self.tool_calls = self.tool_calls.saturating_add(other.tool_calls);
        self.cost = Cost::plus(self.cost.as_ref(), other.cost.as_ref());
    }
}

impl Usage {
    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// This usage's own totals (children left out).
    pub fn totals(&self) -> UsageTotals {
        UsageTotals {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cached_input_tokens: self.cached_input_tokens,
            model_calls: self.model_calls,
            tool_calls: self.tool_calls,
            cost: self.cost.clone(),
        }
    }

    /// The totals with children: `withChildren` when a child has reported, else the own ones.
    pub fn totals_with_children(&self) -> UsageTotals {
        self.with_children.clone().unwrap_or_else(|| self.totals())
    }

    /// This usage with `children` (the sum of the children's [`Usage::totals_with_children`])
    /// in `withChildren`; unchanged when no child used anything.
    pub fn including_children(mut self, children: &UsageTotals) -> Usage {
        if *children != UsageTotals::default() {
            let mut total = self.totals();
            total.add(children);
            self.with_children = Some(total);
        }
        self
    }

    /// Adds one answered model call's tokens (`call`, whose own calls and split are ignored) to
    /// the totals and to `model`'s entry. Model calls are counted by the caller, retries
    /// included.
    pub fn add_call(&mut self, model: &str, call: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(call.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(call.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(call.cached_input_tokens);
        self.fold_model(&ModelUsage {
            model: model.chars().take(MAX_MODEL_NAME).collect(),
            input_tokens: call.input_tokens,
            output_tokens: call.output_tokens,
            cached_input_tokens: call.cached_input_tokens,
            model_calls: 1,
        });
    }

    /// Adds `entry` to the entry of its model; a model not yet listed gets its own entry while
    /// fewer than fifteen are, else it is summed into the last entry, [`OTHER_MODELS`].
    pub fn fold_model(&mut self, entry: &ModelUsage) {
        let index = match self.by_model.iter().position(|m| m.model == entry.model) {
            Some(index) => index,
            None if self.by_model.len() < MAX_MODELS - 1 => {
                self.by_model.push(ModelUsage {
                    model: entry.model.clone(),
                    ..ModelUsage::default()
                });
                self.by_model.len() - 1
            }
            None => match self.by_model.iter().position(|m| m.model == OTHER_MODELS) {
                Some(index) => index,
                None => {
                    self.by_model.push(ModelUsage {
                        model: OTHER_MODELS.to_owned(),
                        ..ModelUsage::default()
                    });
                    self.by_model.len() - 1
                }
            },
        };
        if let Some(slot) = self.by_model.get_mut(index) {
            slot.input_tokens = slot.input_tokens.saturating_add(entry.input_tokens);
            slot.output_tokens = slot.output_tokens.saturating_add(entry.output_tokens);
            slot.cached_input_tokens = slot
                .cached_input_tokens
                .saturating_add(entry.cached_input_tokens);
            slot.model_calls = slot.model_calls.saturating_add(entry.model_calls);
        }
    }

    /// Adds another usage record to this one: totals, split by model and cost (children's
    /// totals are not added: see [`Usage::including_children`]).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.model_calls = self.model_calls.saturating_add(other.model_calls);
        self.tool_calls = self.tool_calls.saturating_add(other.tool_calls);
        self.cost = Cost::plus(self.cost.as_ref(), other.cost.as_ref());
        for entry in &other.by_model {
            self.fold_model(entry);
        }
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
    /// The agent asked a clarification question, or a tool call needs a person's approval, and
    /// the run waits for the answer.
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
    /// A tool call waited longer than `approval.timeout` for a person's decision, with
    /// `approval.onTimeout: fail`.
    ApprovalTimedOut,
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
#[serde_with::skip_serializing_none]
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
    #[schemars(length(max = 4096))]
    pub context: Option<String>,
    /// Suggested answers, if the agent offered a choice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 24))]
    pub options: Vec<String>,
    /// When the question was asked (RFC 3339), e.g. `2026-01-31T09:30:00Z`.
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

    fn call(input: u64, cached: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            ..Usage::default()
        }
    }

    #[test]
    fn calls_add_to_the_totals_and_to_their_models_entry() {
        let mut usage = Usage::default();
        usage.add_call("gpt-4.1", &call(100, 80, 10));
        usage.add_call("gpt-4.1-mini", &call(50, 0, 5));
        usage.add_call("gpt-4.1", &call(200, 150, 20));
        assert_eq!(
            (
                usage.input_tokens,
                usage.cached_input_tokens,
                usage.output_tokens
            ),
            (350, 230, 35)
        );
        assert_eq!(
            usage.by_model,
            [
                ModelUsage {
                    model: "gpt-4.1".into(),
                    input_tokens: 300,
                    output_tokens: 30,
                    cached_input_tokens: 230,
                    model_calls: 2,
                },
                ModelUsage {
                    model: "gpt-4.1-mini".into(),
                    input_tokens: 50,
                    output_tokens: 5,
                    cached_input_tokens: 0,
                    model_calls: 1,
                },
            ]
        );
    }

    #[test]
    fn with_children_sums_the_own_totals_and_the_childrens_and_their_cost() {
        let mut own = call(100, 0, 10);
        own.model_calls = 2;
        own.cost = Some(Cost {
            currency: "USD".into(),
            micros: 300,
        });
        let mut children = UsageTotals {
            input_tokens: 40,
            output_tokens: 4,
            model_calls: 1,
            cost: Some(Cost {
                currency: "USD".into(),
                micros: 70,
            }),
            ..UsageTotals::default()
        };
        children.add(&UsageTotals {
            cost: Some(Cost {
                currency: "EUR".into(),
                micros: 5,
            }),
            ..UsageTotals::default()
        });
        let usage = own.clone().including_children(&children);
        let total = usage.with_children.clone().unwrap();
        assert_eq!(
            (total.input_tokens, total.output_tokens, total.model_calls),
            (140, 14, 3)
        );
        assert_eq!(
            total.cost.unwrap().micros,
            370,
            "another currency is left out"
        );
        assert_eq!(usage.totals_with_children().input_tokens, 140);
        // No child used anything: no withChildren, and the own totals stand for both.
        let alone = own.including_children(&UsageTotals::default());
        assert_eq!(alone.with_children, None);
        assert_eq!(alone.totals_with_children().input_tokens, 100);
    }

    #[test]
    fn old_reports_without_the_new_fields_still_read() {
        let usage: Usage = serde_json::from_value(serde_json::json!(
            {"inputTokens": 5, "outputTokens": 2, "modelCalls": 1, "toolCalls": 0}
        ))
        .unwrap();
        assert_eq!(
            usage,
            Usage {
                input_tokens: 5,
                output_tokens: 2,
                model_calls: 1,
                ..Usage::default()
            }
        );
        assert_eq!(
            serde_json::to_value(&usage).unwrap(),
            serde_json::json!({"inputTokens": 5, "outputTokens": 2, "modelCalls": 1, "toolCalls": 0}),
            "nothing new is written where there is nothing to say"
        );
    }

    proptest::proptest! {
        #[test]
        fn the_split_by_model_stays_bounded_and_sums_to_the_totals(
            calls in proptest::collection::vec((0usize..40, 0u64..1_000_000, 0u64..1_000), 0..200)
        ) {
            let mut usage = Usage::default();
            for (model, input, output) in &calls {
                usage.add_call(&format!("model-{model}"), &call(*input, input / 2, *output));
            }
            proptest::prop_assert!(usage.by_model.len() <= MAX_MODELS);
            let input: u64 = usage.by_model.iter().map(|m| m.input_tokens).sum();
            let output: u64 = usage.by_model.iter().map(|m| m.output_tokens).sum();
            let cached: u64 = usage.by_model.iter().map(|m| m.cached_input_tokens).sum();
            let answered: u32 = usage.by_model.iter().map(|m| m.model_calls).sum();
            proptest::prop_assert_eq!(input, usage.input_tokens);
            proptest::prop_assert_eq!(output, usage.output_tokens);
            proptest::prop_assert_eq!(cached, usage.cached_input_tokens);
            proptest::prop_assert_eq!(answered as usize, calls.len());
            // Only the last entry may be `other`, and only once fifteen models have their own.
            for (index, entry) in usage.by_model.iter().enumerate() {
                if entry.model == OTHER_MODELS {
                    proptest::prop_assert_eq!(index, MAX_MODELS - 1);
                }
            }
            // Adding a usage record folds its split the same way.
            let mut twice = usage.clone();
            twice.add(&usage);
            proptest::prop_assert!(twice.by_model.len() <= MAX_MODELS);
            proptest::prop_assert_eq!(twice.input_tokens, usage.input_tokens * 2);
        }
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
