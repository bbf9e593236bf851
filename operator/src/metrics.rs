//! Prometheus metrics of the operator. Labels name controllers, routes and outcomes, never
//! objects: an object name as a label would make one time series per Agent or Run.
//!
//! Everything is `herd_`-prefixed except the process metrics ([`process`]), which keep the
//! names every Prometheus client library gives them (`process_cpu_seconds_total`...), so that
//! existing dashboards and alerts read them as they are.

pub mod budget;
pub mod kube_client;
pub mod process;
pub mod run_api_requests;
pub mod usage;
pub mod usage_ledger;

use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use self::kube_client::{KubeRequestLabels, KubeTimingLabels};
use self::run_api_requests::{RouteLabels, RouteTimingLabels};

/// Every controller, so that their counters exist (at 0) before the first failure: a rate over
/// a series that appears at its first increment misses that increment.
pub const CONTROLLERS: [&str; 5] = ["agent", "skill", "run", "schedule", "budget"];

/// The label set of per-controller metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// `agent`, `skill` or `run`.
    pub controller: &'static str,
}

/// The label set of finished Runs: the `Succeeded` status and reason (a bounded set).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `True` (answered) or `False`.
    pub succeeded: String,
    /// The `Succeeded` reason, e.g. `TimedOut`.
    pub reason: String,
}

/// The label set of per-Agent metrics (Agents are few and named by admins; Runs never label).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AgentLabels {
    /// The Agent's namespace.
    pub namespace: String,
    /// The Agent's name.
    pub agent: String,
}

/// The label set of `herd_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    /// The operator's version (its crate's).
    version: &'static str,
}

/// Run durations: 1 s to about 9 h.
fn run_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

/// Reconcile and request durations: 1 ms to about 33 s.
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
    runs: Family<OutcomeLabels, Counter>,
    run_durations: Family<OutcomeLabels, Histogram, fn() -> Histogram>,
    tokens: Family<AgentLabels, Counter>,
    active_pods: Gauge<i64, AtomicI64>,
    queued_runs: Gauge<i64, AtomicI64>,
    suspended_runs: Gauge<i64, AtomicI64>,
    run_api_requests: Family<RouteLabels, Counter>,
    run_api_durations: Family<RouteTimingLabels, Histogram, fn() -> Histogram>,
    certificate_expiry: Gauge<f64, AtomicU64>,
    kube_requests: Family<KubeRequestLabels, Counter>,
    kube_durations: Family<KubeTimingLabels, Histogram, fn() -> Histogram>,
    budgets: budget::BudgetMetrics,
    usage: usage::UsageMetrics,
}

impl Default for Metrics {
    /// Every metric registered with its help text. Long because it is the one list of what
    /// `/metrics` serves, in the order it serves it.
    fn default() -> Self {
        let mut root = Registry::default();
        root.register_collector(Box::new(process::ProcessCollector));
        let registry = root.sub_registry_with_prefix("herd");
        registry.register(
            "build",
            "The operator's version; always 1",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            }),
        );
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
        let budgets = budget::BudgetMetrics::default();
        budgets.register(registry);
        let runs = Family::<OutcomeLabels, Counter>::default();
        let run_durations =
            Family::<OutcomeLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                run_histogram,
            );
        let tokens = Family::<AgentLabels, Counter>::default();
        let usage = usage::UsageMetrics::default();
        usage.register(registry);
        registry.register(
            "runs_finished",
            "Runs finished, by Succeeded status and reason",
            runs.clone(),
        );
        registry.register(
            "run_duration_seconds",
            "From a Run's start to its end, by Succeeded status and reason",
            run_durations.clone(),
        );
        registry.register(
            "run_tokens",
            "Model tokens (input and output) used by finished Runs, by Agent",
            tokens.clone(),
        );
        let active_pods = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "run_active_pods",
            "Run pods neither Succeeded nor Failed, as the leader last saw them",
            active_pods.clone(),
        );
        let queued_runs = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "runs_queued",
            "Runs ready for their Pod and waiting for admission under a cap",
            queued_runs.clone(),
        );
        let suspended_runs = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "runs_suspended",
            "Runs suspended while they wait for a person: no Pod, no concurrency slot",
            suspended_runs.clone(),
        );
        let run_api_requests = Family::<RouteLabels, Counter>::default();
        registry.register(
            "run_api_requests",
            "Run API requests answered, by route template, method and status code",
            run_api_requests.clone(),
        );
        let run_api_durations =
            Family::<RouteTimingLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                duration_histogram,
            );
        registry.register(
            "run_api_request_duration_seconds",
            "How long run API requests took to answer, by route template and method",
            run_api_durations.clone(),
        );
        let certificate_expiry = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "run_api_certificate_expiry_timestamp_seconds",
            "When the run API's serving certificate expires (Unix time); 0 until one is served",
            certificate_expiry.clone(),
        );
        let kube_requests = Family::<KubeRequestLabels, Counter>::default();
        registry.register(
            "kube_requests",
            "Requests to the Kubernetes API server, by verb, resource and status code (`error`: no answer)",
            kube_requests.clone(),
        );
        let kube_durations =
            Family::<KubeTimingLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                duration_histogram,
            );
        registry.register(
            "kube_request_duration_seconds",
            "How long the API server took to answer (a watch: to start streaming), by verb and resource",
            kube_durations.clone(),
        );
        for controller in CONTROLLERS {
            let labels = ControllerLabels { controller };
            let _ = reconciles.get_or_create(&labels);
            let _ = failures.get_or_create(&labels);
        }
        Metrics {
            registry: root,
            run_api_requests,
            run_api_durations,
            certificate_expiry,
            kube_requests,
            kube_durations,
            budgets,
            usage,
            active_pods,
            queued_runs,
            suspended_runs,
            reconciles,
            failures,
            durations,
            in_flight,
            leader,
            runs,
            run_durations,
            tokens,
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

    /// The Budgets' gauges.
    pub fn budgets(&self) -> &budget::BudgetMetrics {
        &self.budgets
    }

    /// Records whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Records a Run that just finished.
    pub fn run_finished(
        &self,
        outcome: OutcomeLabels,
        seconds: f64,
        agent: AgentLabels,
        tokens: u64,
    ) {
        self.runs.get_or_create(&outcome).inc();
        self.run_durations.get_or_create(&outcome).observe(seconds);
        self.tokens.get_or_create(&agent).inc_by(tokens);
    }

    /// The token and cost counters, fed by the Runs' reports.
    pub fn usage(&self) -> &usage::UsageMetrics {
        &self.usage
    }

    /// Records how many Run pods are active.
    pub fn set_active_pods(&self, count: usize) {
        self.active_pods
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Records how many Runs wait for admission.
    pub fn set_queued_runs(&self, count: usize) {
        self.queued_runs
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Records how many Runs are suspended.
    pub fn set_suspended_runs(&self, count: usize) {
        self.suspended_runs
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Records a run API request answered after `took`.
    pub fn run_api_request(&self, labels: RouteLabels, took: Duration) {
        self.run_api_durations
            .get_or_create(&RouteTimingLabels {
                route: labels.route.clone(),
                method: labels.method,
            })
            .observe(took.as_secs_f64());
        self.run_api_requests.get_or_create(&labels).inc();
    }

    /// Records a request to the API server answered with `code` (or `error`) after `took`.
    pub fn kube_request(&self, verb: &'static str, resource: String, code: String, took: Duration) {
        self.kube_durations
            .get_or_create(&KubeTimingLabels {
                verb,
                resource: resource.clone(),
            })
            .observe(took.as_secs_f64());
        self.kube_requests
            .get_or_create(&KubeRequestLabels {
                verb,
                resource,
                code,
            })
            .inc();
    }

    /// The gauge of the run API certificate's expiry (Unix seconds), which the serving
    /// certificate sets as it loads one.
    pub fn certificate_expiry(&self) -> Gauge<f64, AtomicU64> {
        self.certificate_expiry.clone()
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

    #[test]
    fn build_info_and_every_controllers_errors_exist_from_the_start() {
        let text = Metrics::default().encode().unwrap();
        let build = format!(
            "herd_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&build), "{build} in {text}");
        for controller in CONTROLLERS {
            let errors = format!("herd_reconcile_errors_total{{controller=\"{controller}\"}} 0");
            assert!(text.contains(&errors), "{errors} in {text}");
        }
        assert!(
            text.contains("herd_run_api_certificate_expiry_timestamp_seconds 0.0"),
            "{text}"
        );
    }

    #[test]
    fn finished_runs_by_outcome_and_tokens_by_agent() {
        let metrics = Metrics::default();
        let outcome = OutcomeLabels {
            succeeded: "False".into(),
            reason: "TimedOut".into(),
        };
        let agent = AgentLabels {
            namespace: "ns".into(),
            agent: "helper".into(),
        };
        metrics.run_finished(outcome.clone(), 3.0, agent.clone(), 120);
        metrics.run_finished(outcome, 5.0, agent, 30);
        metrics.set_active_pods(3);
        metrics.set_queued_runs(5);
        let text = metrics.encode().unwrap();
        assert!(
            text.contains("herd_runs_finished_total{succeeded=\"False\",reason=\"TimedOut\"} 2"),
            "{text}"
        );
        assert!(
            text.contains(
                "herd_run_duration_seconds_sum{succeeded=\"False\",reason=\"TimedOut\"} 8.0"
            ),
            "{text}"
        );
        assert!(
            text.contains("herd_run_tokens_total{namespace=\"ns\",agent=\"helper\"} 150"),
            "{text}"
        );
        assert!(text.contains("herd_run_active_pods 3"), "{text}");
        assert!(text.contains("herd_runs_queued 5"), "{text}");
    }
}
