//! The model usage and cost of Runs, counted from their reports through the run API:
//! `herd_model_tokens_total{namespace,agent,model,kind}` and
//! `herd_run_cost_total{namespace,agent,currency}`. Each report counts once ([`UsageLedger`]);
//! labels name Agents and models (bounded by the Agents' specs, at most 16 models a Run),
//! never Runs.

use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, PoisonError};

use herd_crds::micros::MICROS_PER_UNIT;
use herd_crds::report::Usage;
use herd_crds::wire::CallStats;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::usage_ledger::UsageLedger;

/// The label set of `herd_model_tokens_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    /// The Run's namespace.
    pub namespace: String,
    /// The Run's Agent.
    pub agent: String,
    /// The model, as configured (or `other`, `unknown`).
    pub model: String,
    /// `input` (not cached), `output` or `cached_input`.
    pub kind: &'static str,
}

/// The label set of `herd_run_cost_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CostLabels {
    /// The Run's namespace.
    pub namespace: String,
    /// The Run's Agent.
    pub agent: String,
    /// The ISO 4217 code of the Agent's `model.pricing`.
    pub currency: String,
}

/// The label set of `herd_tool_calls_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    /// A built-in tool's name, `mcp` (any MCP server's tool) or `other`.
    pub tool: &'static str,
    /// `ok` or `error`.
    pub outcome: &'static str,
}

/// Model call durations: 50 ms to about 27 min.
fn call_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.05, 2.0, 16))
}

/// Which Run a report is of, for the labels and the ledger.
#[derive(Clone, Copy, Debug)]
pub struct ReportOf<'a> {
    /// The Run's namespace.
    pub namespace: &'a str,
    /// The Run's Agent.
    pub agent: &'a str,
    /// The Run's UID.
    pub uid: &'a str,
    /// The report's attempt.
    pub attempt: u32,
    /// The report's `seq`.
    pub seq: u64,
}

/// Token, cost, model call and tool call metrics with the ledger that keeps them exact.
#[derive(Debug)]
pub struct UsageMetrics {
    tokens: Family<TokenLabels, Counter>,
    cost: Family<CostLabels, Counter<f64, AtomicU64>>,
    call_durations: Histogram,
    tool_calls: Family<ToolLabels, Counter>,
    ledger: Mutex<UsageLedger>,
}

impl Default for UsageMetrics {
    fn default() -> Self {
        UsageMetrics {
            tokens: Family::default(),
            cost: Family::default(),
            call_durations: call_histogram(),
            tool_calls: Family::default(),
            ledger: Mutex::default(),
        }
    }
}

impl UsageMetrics {
    /// Registers the counters in `registry` (prefixed `herd_` there).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "model_tokens",
            "Model tokens Runs used, by Agent, model and kind (input not cached, output, \
             cached_input)",
            self.tokens.clone(),
        );
        registry.register(
            "model_call_duration_seconds",
            "How long answered model calls took, request to last byte, as runners reported them",
            self.call_durations.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls Runs made, by tool (built-in name, mcp or other) and outcome (ok, error)",
            self.tool_calls.clone(),
        );
        registry.register(
            "run_cost",
            "What Runs of priced models cost, in units of the currency, by Agent",
            self.cost.clone(),
        );
    }

    /// Counts what the report `of` with `usage` (the Run's own) and `calls` adds; `shown` is
    /// the usage the Run's status shows, counted already when written.
    pub fn report(
        &self,
        of: ReportOf<'_>,
        usage: &Usage,
        calls: &CallStats,
        shown: Option<&Usage>,
    ) {
        let added = self
            .ledger
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(of.uid, of.attempt, of.seq, usage, calls, shown);
        let Some(added) = added else {
            return;
        };
        for (model, kind, count) in added.tokens {
            self.tokens
                .get_or_create(&TokenLabels {
                    namespace: of.namespace.to_owned(),
                    agent: of.agent.to_owned(),
                    model,
                    kind: kind.label(),
                })
                .inc_by(count);
        }
        for seconds in added.call_seconds {
            self.call_durations.observe(seconds);
        }
        for (tool, outcome, count) in added.tool_calls {
            self.tool_calls
                .get_or_create(&ToolLabels { tool, outcome })
                .inc_by(count);
        }
        if let Some((currency, micros)) = added.cost {
            // Counted in whole units as Prometheus expects; a micro is exact enough in an f64
            // up to 2^53 micros (about 9 billion units).
            let units = micros as f64 / MICROS_PER_UNIT as f64;
            self.cost
                .get_or_create(&CostLabels {
                    namespace: of.namespace.to_owned(),
                    agent: of.agent.to_owned(),
                    currency,
                })
                .inc_by(units);
        }
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::report::{Cost, ModelUsage};
    use herd_crds::wire::{TimedCall, ToolCount};
    use prometheus_client::encoding::text::encode;

    use super::*;

    fn encoded(metrics: &UsageMetrics) -> String {
        let mut registry = Registry::with_prefix("herd");
        metrics.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn a_report_sent_twice_counts_once_under_agent_model_and_kind() {
        let metrics = UsageMetrics::default();
        let mut usage = Usage {
            input_tokens: 1000,
            cached_input_tokens: 400,
            output_tokens: 50,
            cost: Some(Cost {
                currency: "USD".into(),
                micros: 2_500,
            }),
            ..Usage::default()
        };
        usage.fold_model(&ModelUsage {
            model: "gpt-4.1".into(),
            input_tokens: 1000,
            cached_input_tokens: 400,
            output_tokens: 50,
            model_calls: 2,
        });
        let calls = CallStats {
            model_calls: vec![
                TimedCall { n: 1, millis: 1200 },
                TimedCall { n: 2, millis: 300 },
            ],
            tool_calls: vec![ToolCount {
                tool: "bash".into(),
                outcome: "ok".into(),
                count: 1,
            }],
        };
        let of = ReportOf {
            namespace: "team",
            agent: "researcher",
            uid: "uid-1",
            attempt: 1,
            seq: 7,
        };
        metrics.report(of, &usage, &calls, None);
        metrics.report(of, &usage, &calls, None);
        let text = encoded(&metrics);
        for line in [
            r#"herd_model_tokens_total{namespace="team",agent="researcher",model="gpt-4.1",kind="input"} 600"#,
            r#"herd_model_tokens_total{namespace="team",agent="researcher",model="gpt-4.1",kind="cached_input"} 400"#,
            r#"herd_model_tokens_total{namespace="team",agent="researcher",model="gpt-4.1",kind="output"} 50"#,
            r#"herd_run_cost_total{namespace="team",agent="researcher",currency="USD"} 0.0025"#,
            r#"herd_tool_calls_total{tool="bash",outcome="ok"} 1"#,
            "herd_model_call_duration_seconds_count 2",
            "herd_model_call_duration_seconds_sum 1.5",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
