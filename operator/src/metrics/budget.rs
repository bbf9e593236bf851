//! Budgets' gauges: `herd_budget_used{namespace,budget,limit}` and
//! `herd_budget_limit{namespace,budget,limit}` per limit set (tokens, inputTokens,
//! outputTokens, runs; cost in units of its currency), and `herd_runs_queued_by_budget`.
//! Budgets are few and named by admins, like Agents; Runs never label.

use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The label set of the per-limit gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BudgetLabels {
    /// The Budget's namespace.
    pub namespace: String,
    /// The Budget's name.
    pub budget: String,
    /// The limit, as named in `spec.limits`.
    pub limit: &'static str,
}

/// The Budgets' gauges.
#[derive(Debug, Default)]
pub struct BudgetMetrics {
    used: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
    limit: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
    queued: Gauge<i64, AtomicI64>,
}

impl BudgetMetrics {
    /// Registers the gauges in `registry` (prefixed `herd_` there).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "budget_used",
            "What the Runs a Budget selects used in its current window, by limit (cost in units of its currency)",
            self.used.clone(),
        );
        registry.register(
            "budget_limit",
            "A Budget's limit per window, by limit (cost in units of its currency)",
            self.limit.clone(),
        );
        registry.register(
            "runs_queued_by_budget",
            "Runs ready for their Pod and held because a Budget that selects them has a limit reached",
            self.queued.clone(),
        );
    }

    /// Records a Budget's `used` and limit of one limit.
    pub fn set(&self, labels: BudgetLabels, used: f64, limit: f64) {
        self.limit.get_or_create(&labels).set(limit);
        self.used.get_or_create(&labels).set(used);
    }

    /// Drops the series of a limit no longer set (or of a deleted Budget).
    pub fn remove(&self, labels: &BudgetLabels) {
        self.used.remove(labels);
        self.limit.remove(labels);
    }

    /// Records how many Runs Budgets hold.
    pub fn set_queued(&self, count: usize) {
        self.queued.set(i64::try_from(count).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn gauges_carry_namespace_budget_and_limit_and_go_with_the_limit() {
        let metrics = BudgetMetrics::default();
        let mut registry = Registry::default();
        metrics.register(registry.sub_registry_with_prefix("herd"));
        let labels = BudgetLabels {
            namespace: "team-a".into(),
            budget: "daily".into(),
            limit: "tokens",
        };
        metrics.set(labels.clone(), 1200.0, 20000.0);
        metrics.set_queued(3);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"herd_budget_used{namespace="team-a",budget="daily",limit="tokens"} 1200.0"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"herd_budget_limit{namespace="team-a",budget="daily",limit="tokens"} 20000.0"#
            ),
            "{text}"
        );
        assert!(text.contains("herd_runs_queued_by_budget 3"), "{text}");
        metrics.remove(&labels);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(!text.contains("team-a"), "{text}");
    }
}
