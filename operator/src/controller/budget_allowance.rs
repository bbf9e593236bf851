//! A starting Run's token budget under the Budgets that select it: asked by the run API when
//! a Run's Pod reads its configuration, so the runner's token-budget middleware stops the Run
//! (`stopReason: TokenBudgetExceeded`) after the call that reaches it. What it is given is
//! reserved in each of those Budgets' ledgers (written with the Budget's resourceVersion as a
//! precondition, so two Runs starting at once on any replicas never reserve the same tokens),
//! and the next Run gets only what is left unreserved. Its children are given at most what it
//! has left, so they share it.

use std::collections::HashSet;
use std::sync::Arc;

use herd_crds::budget::Budget;
use herd_crds::micros::parse_micros;
use herd_crds::run::{Run, phase_of};
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};
use tracing::warn;

use super::budget_views::view;
use crate::controller_state::FIELD_MANAGER;
use crate::decide::admission::RunKey;
use crate::decide::budget_admission::{Candidate, Starting, TokenPrice, allowance, reserved_cost};
use crate::decide::budget_ledger::Ledger;
use crate::decide::run_snapshot::Snapshot;

/// How often a reservation is tried again after another writer changed a Budget first.
const ROUNDS: usize = 8;

/// `own` (the Run's snapshot's token budget) narrowed to the Run's share of what the Budgets
/// of its namespace that select it have left unreserved now, reserved in each of them (read
/// live: a Pod reads its configuration once).
pub async fn token_budget(
    client: &Client,
    runs: &Store<Run>,
    run: &Run,
    snapshot: &Snapshot,
    own: Option<u64>,
) -> Result<Option<u64>, kube::Error> {
    let (Some(namespace), Some(name), Some(uid)) = (
        run.namespace(),
        run.metadata.name.as_deref(),
        run.metadata.uid.as_deref(),
    ) else {
        return Ok(own);
    };
    let api: Api<Budget> = Api::namespaced(client.clone(), &namespace);
    let key = RunKey::new(&namespace, name);
    let price = dearest_price(snapshot);
    let reported = run
        .status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .map_or(0, |report| report.usage.total_tokens());
    let mut round = 0;
    loop {
        round += 1;
        let budgets = api.list(&ListParams::default()).await?.items;
        let selecting: Vec<&Budget> = budgets
            .iter()
            .filter(|budget| budget.spec.selects(&run.spec.agent_ref.name, run.labels()))
            .collect();
        if selecting.is_empty() {
            return Ok(own);
        }
        let now = jiff::Timestamp::now();
        let cached: Vec<Arc<Run>> = runs
            .state()
            .into_iter()
            .filter(|r| r.metadata.namespace.as_deref() == Some(namespace.as_str()))
            .collect();
        let views: Vec<_> = selecting
            .iter()
            .filter_map(|budget| view(budget, &cached, &HashSet::new(), now, Some(uid)))
            .collect();
        let candidate = Candidate {
            key: &key,
            created: now,
            agent: &run.spec.agent_ref.name,
            labels: run.labels(),
        };
        let starting = Starting {
            own,
            reported,
            price,
            sharing: sharing(&selecting, &cached, uid),
        };
        let Some(tokens) = allowance(&views, &candidate, &starting) else {
            return Ok(own);
        };
        match reserve(&api, &selecting, uid, tokens, price).await {
            Ok(()) => return Ok(Some(tokens)),
            Err(kube::Error::Api(response)) if response.code == 409 && round < ROUNDS => {}
            Err(error) => return Err(error),
        }
    }
}

/// Records `tokens` as the Run `uid`'s reservation in each of `budgets` (skipping those that
/// hold it already); a 409 when another writer changed one first.
async fn reserve(
    api: &Api<Budget>,
    budgets: &[&Budget],
    uid: &str,
    tokens: u64,
    price: Option<TokenPrice<'_>>,
) -> Result<(), kube::Error> {
    for budget in budgets {
        let currency = budget.spec.currency();
        let cost = reserved_cost(tokens, price, currency);
        let mut status = budget.status.clone().unwrap_or_default();
        let held = status
            .marks
            .iter()
            .any(|m| m.uid == uid && m.reserved_tokens == tokens && m.reserved_cost_micros == cost);
        if held {
            continue;
        }
        let mut ledger = Ledger::from_status(&status);
        if !ledger.reserve(uid, tokens, cost) {
            warn!(
                budget = %budget.name_any(),
                "a Run's token budget is not reserved: the Budget follows as many Runs as it can"
            );
            continue;
        }
        ledger.write_to(&mut status);
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": budget.resource_version()},
            "status": {"marks": status.marks, "used": status.used},
        });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        api.patch_status(&budget.name_any(), &params, &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// The going Runs of `runs` that `budgets` select and that reserved nothing yet, the Run
/// `uid` included: what is unreserved is shared among them.
fn sharing(budgets: &[&Budget], runs: &[Arc<Run>], uid: &str) -> u64 {
    let reserved: HashSet<&str> = budgets
        .iter()
        .filter_map(|budget| budget.status.as_ref())
        .flat_map(|status| status.marks.iter())
        .filter(|mark| mark.reserved_tokens > 0)
        .map(|mark| mark.uid.as_str())
        .collect();
    let others = runs
        .iter()
        .filter(|run| {
            let status = run.status.as_ref();
            let going = status.is_some_and(|s| s.pod_name.is_some())
                && !phase_of(status.map(|s| s.conditions.as_slice()).unwrap_or_default())
                    .is_finished();
            let other = run
                .metadata
                .uid
                .as_deref()
                .is_some_and(|other| other != uid && !reserved.contains(other));
            going
                && other
                && budgets
                    .iter()
                    .any(|b| b.spec.selects(&run.spec.agent_ref.name, run.labels()))
        })
        .count();
    u64::try_from(others).unwrap_or(u64::MAX).saturating_add(1)
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
