//! Prometheus metrics of the controllers. Labels name controllers, never objects: an object
//! name as a label would make one time series per Agent or Run.

use std::sync::atomic::AtomicI64;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The label set of per-controller metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// `agent`, `skill` (later `run`).
    pub controller: &'static str,
}

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The operator's metrics and the registry that serves them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ControllerLabels, Counter>,
    failures: Family<ControllerLabels, Counter>,
    durations: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    in_flight: Family<ControllerLabels, Gauge<i64, AtomicI64>>,
    leader: Gauge<i64, AtomicI64>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("herd");
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let failures = Family::<ControllerLabels, Counter>::default();
        let durations =
            Family::<ControllerLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                duration_histogram,
            );
        let in_flight = Family::<ControllerLabels, Gauge<i64, AtomicI64>>::default();
        let leader = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "reconciles",
            "Reconciles run, by controller",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed and were retried with backoff, by controller",
            failures.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "How long reconciles took, by controller",
            durations.clone(),
        );
        registry.register(
            "reconciles_in_flight",
            "Reconciles running right now, by controller",
            in_flight.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the Lease and runs the controllers, else 0",
            leader.clone(),
        );
        Metrics {
            registry,
            reconciles,
            failures,
            durations,
            in_flight,
            leader,
        }
    }
}

/// Records one reconcile: counted at start, its duration and the in-flight gauge on drop.
#[derive(Debug)]
pub struct Measure<'a> {
    metrics: &'a Metrics,
    labels: ControllerLabels,
    start: Instant,
}

impl Drop for Measure<'_> {
    fn drop(&mut self) {
        self.metrics
            .durations
            .get_or_create(&self.labels)
            .observe(self.start.elapsed().as_secs_f64());
        self.metrics.in_flight.get_or_create(&self.labels).dec();
    }
}

impl Metrics {
    /// Starts measuring a reconcile of `controller`.
    pub fn reconcile(&self, controller: &'static str) -> Measure<'_> {
        let labels = ControllerLabels { controller };
        self.reconciles.get_or_create(&labels).inc();
        self.in_flight.get_or_create(&labels).inc();
        Measure {
            metrics: self,
            labels,
            start: Instant::now(),
        }
    }

    /// Counts a failed reconcile of `controller`.
    pub fn failure(&self, controller: &'static str) {
        self.failures
            .get_or_create(&ControllerLabels { controller })
            .inc();
    }

    /// Records whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_times_reconciles_by_controller() {
        let metrics = Metrics::default();
        {
            let _measure = metrics.reconcile("agent");
            let text = metrics.encode().unwrap();
            assert!(
                text.contains("herd_reconciles_in_flight{controller=\"agent\"} 1"),
                "{text}"
            );
        }
        metrics.failure("skill");
        metrics.set_leader(true);
        let text = metrics.encode().unwrap();
        assert!(
            text.contains("herd_reconciles_total{controller=\"agent\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("herd_reconciles_in_flight{controller=\"agent\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("herd_reconcile_errors_total{controller=\"skill\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("herd_reconcile_duration_seconds_count{controller=\"agent\"} 1"),
            "{text}"
        );
        assert!(text.contains("herd_leader 1"), "{text}");
    }
}
