//! A starting Run's token budget under the Budgets that select it: asked by the run API when
//! a Run's Pod reads its configuration, so the runner's token-budget middleware stops the Run
//! (`stopReason: TokenBudgetExceeded`) before it spends more than its Budgets have left. Its
//! children are given at most what it has left, so they share it.

use std::collections::HashSet;
use std::sync::Arc;

use herd_crds::budget::Budget;
use herd_crds::pricing::parse_micros;
use herd_crds::run::Run;
use kube::api::ListParams;
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};

use super::budget_views::view;
use crate::decide::admission::RunKey;
use crate::decide::budget_admission::{Candidate, TokenPrice, effective_token_budget};
use crate::decide::run_snapshot::Snapshot;

/// `own` (the Run's snapshot's token budget) narrowed to what the Budgets of `run`'s namespace
/// that select it have left now (read live: a Pod reads its configuration once).
pub async fn token_budget(
    client: &Client,
    runs: &Store<Run>,
    run: &Run,
    snapshot: &Snapshot,
    own: Option<u64>,
) -> Result<Option<u64>, kube::Error> {
    let (Some(namespace), Some(name)) = (run.namespace(), run.metadata.name.as_deref()) else {
        return Ok(own);
    };
    let api: Api<Budget> = Api::namespaced(client.clone(), &namespace);
    let budgets = api.list(&ListParams::default()).await?.items;
    if budgets.is_empty() {
        return Ok(own);
    }
    let now = jiff::Timestamp::now();
    let cached: Vec<Arc<Run>> = runs
        .state()
        .into_iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .collect();
    let views: Vec<_> = budgets
        .iter()
        .filter_map(|budget| view(budget, &cached, &HashSet::new(), now))
        .collect();
    let key = RunKey::new(&namespace, name);
    let candidate = Candidate {
        key: &key,
        created: now,
        agent: &run.spec.agent_ref.name,
        labels: run.labels(),
    };
    Ok(effective_token_budget(
        own,
        &views,
        &candidate,
        dearest_price(snapshot),
    ))
}

/// The highest per-million price of the Run's model, with its currency.
fn dearest_price(snapshot: &Snapshot) -> Option<TokenPrice<'_>> {
    let pricing = snapshot.agent.model.as_ref()?.pricing.as_ref()?;
    let dearest = [
        Some(pricing.input_per_million.as_str()),
        Some(pricing.output_per_million.as_str()),
        pricing.cached_input_per_million.as_deref(),
    ]
    .into_iter()
    .flatten()
    .filter_map(parse_micros)
    .max()?;
    Some(TokenPrice {
        currency: &pricing.currency,
        dearest_per_million: dearest,
    })
}
