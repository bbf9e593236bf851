//! The `Budget` resource: tokens and Runs a namespace (or some of its Agents or Runs) may use
//! in a window of time, with the semantics of a ResourceQuota: the operator keeps what was
//! used in `status`, and new Runs wait (or are refused) while a limit is reached.

mod status;
mod window;

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use status::{BudgetStatus, BudgetUsage, MAX_MARKS, RunMark};
pub use window::{BudgetWindow, Calendar, PERIOD_RANGE_SECONDS, parse_period};

/// Most Agent names in `selector.agents`.
pub const MAX_AGENTS: usize = 32;
/// Most labels in `selector.runLabels`.
pub const MAX_RUN_LABELS: usize = 16;

/// How much may be used per window, and by which Runs.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "herd.dev",
    version = "v1alpha1",
    kind = "Budget",
    namespaced,
    status = "BudgetStatus",
    shortname = "hbudget",
    category = "herd",
    derive = "PartialEq",
    doc = "Caps the tokens and Runs of a namespace, or of some of its Agents or Runs, per window of time (a fixed period or a calendar day, week or month); while a limit is reached, new Runs wait or are refused, as under a ResourceQuota.",
    printcolumn(name = "Window", type_ = "string", json_path = ".status.window"),
    printcolumn(name = "Used", type_ = "string", json_path = ".status.usedSummary"),
    printcolumn(name = "Limit", type_ = "string", json_path = ".status.limitSummary"),
    printcolumn(
        name = "Exceeded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Exceeded\")].status"
    ),
    printcolumn(name = "Resets", type_ = "date", json_path = ".status.windowEnd"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "OnExceeded",
        type_ = "string",
        json_path = ".spec.onExceeded",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::duplicated_attributes)]
pub struct BudgetSpec {
    /// The window usage is counted over: a fixed `period` (`24h`, `7d`, `30d`: windows back to
    /// back from the Budget's first one) or a `calendar` day, week (from Monday) or month in a
    /// time zone. At the end of a window, `used` starts again from zero.
    pub window: BudgetWindow,
    /// The limits; at least one. A Run counts against every limit of every Budget that
    /// selects it.
    pub limits: BudgetLimits,
    /// Which Runs of the namespace count and are held. Absent: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<BudgetSelector>,
    /// What happens to a new Run while a limit is reached: `Queue` keeps it `Queued` (reason
    /// `BudgetExceeded`) until the window resets, `Refuse` fails it (reason
    /// `BudgetExceeded`). Runs already going are not stopped: they were given what was left
    /// as their token budget when they started. Default `Queue`.
    #[serde(default)]
    pub on_exceeded: OnExceeded,
}

/// The most a window may use; absent limits are not checked.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(crate::rules::BUDGET_SOME_LIMIT).message(crate::rules::BUDGET_SOME_LIMIT_MESSAGE))]
pub struct BudgetLimits {
    /// Input plus output tokens, as the model providers report them.
    #[schemars(range(min = 1))]
    pub tokens: Option<u64>,
    /// Input (prompt) tokens.
    #[schemars(range(min = 1))]
    pub input_tokens: Option<u64>,
    /// Output (completion) tokens.
    #[schemars(range(min = 1))]
    pub output_tokens: Option<u64>,
    /// Runs started in the window: a Run counts once, when its first Pod is admitted; child
    /// Runs count too.
    #[schemars(range(min = 1))]
    pub runs: Option<u64>,
    /// What the Runs' tokens cost, as priced by their Agents' `model.pricing`. A Run priced in
    /// another currency, or not priced, does not count against it.
    pub cost: Option<CostLimit>,
}

/// A cost limit: an amount of one currency.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CostLimit {
    /// The amount, a decimal with at most six places, e.g. `50` or `12.50`.
    #[schemars(regex(pattern = r"^[0-9]{1,9}(\.[0-9]{1,6})?$"), length(max = 16))]
    pub amount: String,
    /// ISO 4217 code, e.g. `EUR`; only Runs priced in it count.
    #[schemars(regex(pattern = "^[A-Z]{3}$"), length(max = 3))]
    pub currency: String,
}

impl CostLimit {
    /// The amount in micros (millionths of the currency's unit); `None` when it does not
    /// parse (the schema's pattern forbids that).
    pub fn micros(&self) -> Option<u64> {
        crate::micros::parse_micros(&self.amount)
    }
}

/// The Runs a Budget counts: those matching every field set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetSelector {
    /// Runs of these Agents (`spec.agentRef.name`). Absent or empty: any Agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "agent_names")]
    pub agents: Vec<String>,
    /// Runs carrying all of these labels (as a label selector's `matchLabels`; child Runs
    /// carry their parent's labels). Absent or empty: any labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "bounded_labels")]
    pub run_labels: BTreeMap<String, String>,
}

/// `agents`: at most 32 Agent names.
fn agent_names(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "maxItems": MAX_AGENTS,
        "items": {"type": "string", "minLength": 1, "maxLength": 63},
        "x-kubernetes-list-type": "set",
        "x-kubernetes-validations": [{
            "rule": crate::rules::BUDGET_AGENTS,
            "messageExpression": crate::rules::BUDGET_AGENTS_MESSAGE,
        }],
    })
}

/// `runLabels`: label keys (at most 317 characters, a prefix and a name) and values (63).
fn bounded_labels(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": MAX_RUN_LABELS,
        "additionalProperties": {"type": "string", "maxLength": 63},
        "x-kubernetes-validations": [{
            "rule": crate::rules::LABEL_KEYS,
            "message": crate::rules::LABEL_KEYS_MESSAGE,
        }],
    })
}

impl BudgetSelector {
    /// Whether a Run of Agent `agent` with `labels` is selected.
    pub fn selects(&self, agent: &str, labels: &BTreeMap<String, String>) -> bool {
        (self.agents.is_empty() || self.agents.iter().any(|a| a == agent))
            && self
                .run_labels
                .iter()
                .all(|(key, value)| labels.get(key) == Some(value))
    }
}

impl BudgetSpec {
    /// The currency of its cost limit, when it has one: Runs' costs count only in it.
    pub fn currency(&self) -> Option<&str> {
        self.limits.cost.as_ref().map(|c| c.currency.as_str())
    }

    /// Whether the Budget counts (and holds) a Run of Agent `agent` with `labels` in its
    /// namespace.
    pub fn selects(&self, agent: &str, labels: &BTreeMap<String, String>) -> bool {
        self.selector
            .as_ref()
            .is_none_or(|selector| selector.selects(agent, labels))
    }
}

/// What happens to a new Run while a limit is reached.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum OnExceeded {
    /// The Run waits, `Queued` with reason `BudgetExceeded`, until the window resets.
    #[default]
    Queue,
    /// The Run fails with reason `BudgetExceeded`.
    Refuse,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_selector_matches_agents_and_all_labels() {
        let spec = |selector: Option<BudgetSelector>| BudgetSpec {
            window: BudgetWindow::default(),
            limits: BudgetLimits::default(),
            selector,
            on_exceeded: OnExceeded::Queue,
        };
        assert!(spec(None).selects("any", &labels(&[])));
        let by_agent = spec(Some(BudgetSelector {
            agents: vec!["researcher".into()],
            run_labels: BTreeMap::new(),
        }));
        assert!(by_agent.selects("researcher", &labels(&[])));
        assert!(!by_agent.selects("coder", &labels(&[])));
        let by_labels = spec(Some(BudgetSelector {
            agents: vec![],
            run_labels: labels(&[("team", "a"), ("tier", "batch")]),
        }));
        assert!(by_labels.selects(
            "x",
            &labels(&[("team", "a"), ("tier", "batch"), ("o", "1")])
        ));
        assert!(!by_labels.selects("x", &labels(&[("team", "a")])));
        assert!(!by_labels.selects("x", &labels(&[("team", "b"), ("tier", "batch")])));
    }
}
