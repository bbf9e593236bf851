//! The Budget controller: counts what the Runs a Budget selects reported into its status (the
//! ledger of [`crate::decide::budget_ledger`]), every few seconds and at each window's end, and
//! says when a limit is reached and when a window resets. It reads the Run controller's cache:
//! Runs' progress does not wake Budgets (thousands of writes a minute would each cost a
//! reconcile per Budget); admission brings each Budget up to date itself when it decides.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use herd_crds::budget::Budget;
use herd_crds::run::Run;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use tracing::{debug, info};

use super::budget_views::{in_namespace, run_usage};
use super::lifecycle::{Lifecycle, log_failure, under_lease};
use super::prologue::begin;
use crate::apply::apply_status;
use crate::controller_state::{Shared, key};
use crate::decide::budget_ledger::Limit;
use crate::decide::budget_status::next_status;
use crate::error::Error;
use crate::metrics::budget::BudgetLabels;
use crate::scope::{Scope, Synced};
use crate::slim::slim_metadata;

/// The controller's name in metrics and logs.
pub const NAME: &str = "budget";

/// When to look again while the Run cache has not been filled yet: counting from an empty
/// cache would take every going Run for deleted.
const UNSYNCED_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// What the Budget controller reads.
pub struct Context {
    /// Shared operator state.
    pub shared: Arc<Shared>,
    /// The Runs of the scope (the Run controller's cache).
    pub runs: Store<Run>,
    /// Whether that cache has been filled.
    pub runs_synced: Vec<Synced>,
}

/// Builds the controller for `scope` on the Run controller's cache `runs` (filled once
/// `runs_synced` are); the returned stream runs it until the operator stops (`lifecycle`).
/// Also returns the Budget cache, for admission.
pub fn controller(
    scope: Scope,
    shared: Arc<Shared>,
    runs: Store<Run>,
    runs_synced: Vec<Synced>,
    lifecycle: Lifecycle,
) -> (impl Stream<Item = ()> + Send, Vec<Synced>, Store<Budget>) {
    let synced = vec![Synced::default()];
    let (budgets, budget_stream) =
        scope.cached::<Budget>(&shared.client, synced[0].clone(), slim_metadata);
    let metrics_of = shared.clone();
    // A deleted Budget's gauges go with it (a reconcile never sees the deletion).
    let budget_stream = budget_stream.inspect(move |event| {
        if let Ok(kube::runtime::watcher::Event::Delete(budget)) = event {
            forget(&metrics_of, budget);
        }
    });
    let context = Arc::new(Context {
        shared,
        runs,
        runs_synced,
    });
    let controller = Controller::for_stream(budget_stream.applied_objects(), budgets.clone());
    let stream = under_lease(controller, &lifecycle)
        .run(reconcile, error_policy, context)
        .map(log_failure("budget"));
    (stream, synced, budgets)
}

/// Steps the Budget's ledger with the Runs of its namespace and writes the status when it
/// changed, conditional on the version it was read at (a reconcile from a stale cache gets a
/// 409 and counts again from the newer status, so nothing is counted twice).
pub async fn reconcile(budget: Arc<Budget>, ctx: Arc<Context>) -> Result<Action, Error> {
    let shared = &ctx.shared;
    let Some(start) = begin(shared, NAME, budget.as_ref())? else {
        return Ok(Action::await_change());
    };
    if !ctx.runs_synced.iter().all(Synced::is_synced) {
        return Ok(Action::requeue(UNSYNCED_RETRY));
    }
    let runs = ctx.runs.state();
    let usages = in_namespace(&budget, &runs).filter_map(|run| run_usage(&budget, run, false));
    let decision = next_status(
        &budget.spec,
        budget.metadata.generation,
        &start.previous,
        usages,
        &start.now,
    );
    if decision.status != start.previous {
        apply_status(&start.api, budget.as_ref(), &decision.status).await?;
        for event in &decision.events {
            info!(budget = %start.name, namespace = %start.namespace, reason = event.reason, note = %event.note, "budget event");
            shared.event(
                budget.as_ref(),
                event.warning,
                event.reason,
                event.note.clone(),
            );
        }
    }
    record(shared, &budget, &decision.status);
    shared.succeeded(&key(NAME, budget.as_ref()));
    Ok(Action::requeue(decision.requeue))
}

/// Sets the Budget's gauges: one series per limit set, none for the others.
fn record(shared: &Shared, budget: &Budget, status: &herd_crds::budget::BudgetStatus) {
    let metrics = shared.metrics.budgets();
    for limit in Limit::ALL {
        let labels = BudgetLabels {
            namespace: budget.namespace().unwrap_or_default(),
            budget: budget.name_any(),
            limit: limit.name(),
        };
        match limit.of(&budget.spec.limits) {
            Some(cap) => metrics.set(
                labels,
                gauge_value(limit, limit.in_usage(&status.used)),
                gauge_value(limit, cap),
            ),
            None => metrics.remove(&labels),
        }
    }
}

/// Drops every gauge series of `budget`.
fn forget(shared: &Shared, budget: &Budget) {
    let metrics = shared.metrics.budgets();
    for limit in Limit::ALL {
        metrics.remove(&BudgetLabels {
            namespace: budget.namespace().unwrap_or_default(),
            budget: budget.name_any(),
            limit: limit.name(),
        });
    }
}

/// A count as a gauge shows it: cost in units of its currency, the rest as they are.
fn gauge_value(limit: Limit, value: u64) -> f64 {
    match limit {
        Limit::Cost => value as f64 / herd_crds::micros::MICROS_PER_UNIT as f64,
        _ => value as f64,
    }
}

/// Backs off per Budget: 1 s doubling to 5 min.
pub fn error_policy(budget: Arc<Budget>, error: &Error, ctx: Arc<Context>) -> Action {
    if let Some(meta) = budget.meta().name.as_deref() {
        debug!(budget = meta, %error, "budget reconcile failed");
    }
    ctx.shared.reconcile_failed(NAME, budget.as_ref(), error)
}
