//! What the operator counted for a Budget: the ledger of its current window.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::report::is_zero;

/// Most Runs the ledger follows at once (`status.marks`): Runs that have started and whose
/// final usage is not folded into `used` yet. While it is full, new Runs the Budget selects
/// wait.
pub const MAX_MARKS: usize = 2000;

/// A Budget's ledger and conditions.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetStatus {
    /// The `metadata.generation` this status describes.
    pub observed_generation: Option<i64>,
    /// `Ready` (reasons `Counting`, `InvalidWindow`, `UnknownTimeZone`) and `Exceeded` (True
    /// with reason `LimitReached` while a limit is reached, else False with `WithinLimits`),
    /// with kstatus' `Reconciling` and `Stalled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// The window in a few words (`24h`, `Day Europe/Berlin`).
    #[schemars(length(max = 96))]
    pub window: Option<String>,
    /// When the current window started.
    pub window_start: Option<Time>,
    /// When the current window ends and `used` starts again from zero.
    pub window_end: Option<Time>,
    /// What the selected Runs used in the current window.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub used: BudgetUsage,
    /// What is left of each limit set (zero once reached).
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub remaining: BudgetUsage,
    /// What going Runs may still spend of the token budgets they were given (`tokens`, and
    /// `inputTokens`/`outputTokens` alike, since either may be spent; `costMicros` at their
    /// dearest price): reserved, so no new Run starts on it.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub reserved: BudgetUsage,
    /// `used` of the tightest limit, for `kubectl get` (e.g. `12034 tokens`).
    #[schemars(length(max = 128))]
    pub used_summary: Option<String>,
    /// That limit (e.g. `20000 tokens`).
    #[schemars(length(max = 128))]
    pub limit_summary: Option<String>,
    /// Every Run that finished before this time is counted in full (or belongs to an earlier
    /// window); a finished Run's mark is dropped once it is older.
    pub settled_before: Option<Time>,
    /// What was counted of each Run not settled yet, so a report is added once, a replayed
    /// or older report not at all, and an operator restart picks up where it stopped (at most
    /// 2000).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2000))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub marks: Vec<RunMark>,
}

/// Counts of one window (or of what is left of the limits).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetUsage {
    /// Input plus output tokens.
    #[serde(default)]
    pub tokens: u64,
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Runs started.
    #[serde(default)]
    pub runs: u64,
    /// Cost in the currency of `limits.cost`, in micros (millionths of its unit).
    #[serde(default)]
    pub cost_micros: u64,
}

/// What the ledger has counted of one Run: the newest report taken and the usage it showed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunMark {
    /// The Run's `metadata.uid`.
    #[schemars(length(max = 64))]
    pub uid: String,
    /// The attempt of the newest report counted.
    #[serde(default)]
    pub attempt: u32,
    /// The `seq` of the newest report counted.
    #[serde(default)]
    pub seq: u64,
    /// The highest input tokens the Run reported (counted up to here).
    #[serde(default)]
    pub input_tokens: u64,
    /// The highest output tokens the Run reported.
    #[serde(default)]
    pub output_tokens: u64,
    /// The highest cost the Run reported in the Budget's currency, in micros.
    #[serde(default)]
    pub cost_micros: u64,
    /// The token budget (input plus output, its whole thread) the Run's Pod was given under
    /// this Budget while it goes; what it has not reported yet is reserved. Zero once it ends.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reserved_tokens: u64,
    /// What that token budget may cost at the Run's dearest price, in micros of the Budget's
    /// currency (zero when the Run is not priced in it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reserved_cost_micros: u64,
}

impl RunMark {
    /// A mark of the Run `uid` with nothing counted yet.
    pub fn new(uid: &str) -> Self {
        RunMark {
            uid: uid.to_owned(),
            attempt: 0,
            seq: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_micros: 0,
            reserved_tokens: 0,
            reserved_cost_micros: 0,
        }
    }

    /// What the Run may still spend of its reservation: (tokens, cost micros).
    pub fn outstanding(&self) -> (u64, u64) {
        let reported = self.input_tokens.saturating_add(self.output_tokens);
        (
            self.reserved_tokens.saturating_sub(reported),
            self.reserved_cost_micros.saturating_sub(self.cost_micros),
        )
    }
}
