//! Budgets in admission: on every look, each Budget's ledger is brought up to now from the
//! Run caches, and the waiting Runs a reached limit holds are kept out of the queue
//! ([`crate::decide::budget_admission::holds`]); a Run whose hold changed is woken, so a Run
//! held until a window's end starts at the first look after it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use herd_crds::budget::Budget;
use herd_crds::run::Run;
use jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::Store;

use super::budget_views::view;
use crate::decide::admission::RunKey;
use crate::decide::admission_ledger::Ledger;
use crate::decide::budget_admission::{BudgetView, Candidate, holds};
use crate::metrics::Metrics;

/// The Budget caches of every scope.
#[derive(Default)]
pub struct BudgetFeed {
    stores: Mutex<Vec<Store<Budget>>>,
}

impl BudgetFeed {
    /// Adds a scope's Budget cache.
    pub fn register(&self, budgets: Store<Budget>) {
        self.stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(budgets);
    }

    /// Every Budget brought up to `now` with `runs` (the Runs of all caches); `granted` Runs
    /// count as started.
    pub fn views(
        &self,
        runs: &[Arc<Run>],
        granted: &HashSet<&RunKey>,
        now: Timestamp,
    ) -> Vec<BudgetView> {
        let stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        stores
            .iter()
            .flat_map(Store::state)
            .filter_map(|budget| view(&budget, runs, granted, now, None))
            .collect()
    }

    /// Holds the waiting Runs of `ledger` that a Budget holds now, and returns the Runs to
    /// wake (their hold changed and they do not wait in an ask); counts the held in the
    /// `herd_runs_queued_by_budget` gauge.
    pub fn hold(
        &self,
        runs: &[Arc<Run>],
        ledger: &mut Ledger,
        metrics: &Metrics,
        now: Timestamp,
    ) -> Vec<RunKey> {
        let granted: HashSet<&RunKey> = ledger.granted().collect();
        let budgets = self.views(runs, &granted, now);
        let held = if budgets.is_empty() {
            HashMap::new()
        } else {
            let by_key: HashMap<RunKey, &Run> = runs
                .iter()
                .filter_map(|run| {
                    Some((
                        RunKey::new(&run.namespace()?, run.metadata.name.as_deref()?),
                        run.as_ref(),
                    ))
                })
                .collect();
            let candidates: Vec<Candidate<'_>> = ledger
                .asked()
                .filter_map(|waiting| {
                    let run = by_key.get(&waiting.key)?;
                    Some(Candidate {
                        key: &waiting.key,
                        created: waiting.created,
                        agent: &run.spec.agent_ref.name,
                        labels: run.labels(),
                    })
                })
                .collect();
            holds(&budgets, &candidates)
        };
        metrics.budgets().set_queued(held.len());
        let mut woken = ledger.hold(held);
        woken.retain(|key| !ledger.is_asking(key));
        woken
    }
}
