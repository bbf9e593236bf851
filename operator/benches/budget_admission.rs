//! Admission under Budgets with 10,000 queued Runs: `cargo bench -p herd-operator --bench
//! budget_admission`.
//!
//! Ten Budgets of one namespace (by Agent, by label, the whole namespace; tokens, runs and
//! cost limits; some reached) over 10,000 queued Runs and 500 going ones with reports: each
//! Budget's ledger brought up to now from the Run cache (what admission does per look, per
//! Budget), then the holds of all 10,000 waiting Runs. Target: the whole look ≤ 1 ms per
//! decision, i.e. ≤ 10 s for 10,000 Runs (it takes a few milliseconds).
//!
//! Not part of CI: timings need a quiet machine and a release build.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use herd_crds::budget::{
    Budget, BudgetLimits, BudgetSelector, BudgetSpec, BudgetStatus, BudgetWindow, CostLimit,
    OnExceeded,
};
use herd_crds::report::Usage;
use herd_crds::run::{Run, RunReport, RunSpec, RunStatus};
use herd_operator::controller::budget_views::view;
use herd_operator::decide::admission::RunKey;
use herd_operator::decide::budget_admission::{BudgetView, Candidate, holds};
use jiff::Timestamp;
use kube::api::ObjectMeta;

const QUEUED: usize = 10_000;
const GOING: usize = 500;
const BUDGETS: usize = 10;
const AGENTS: [&str; 4] = ["researcher", "coder", "writer", "triage"];

fn now() -> Timestamp {
    Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn run(i: usize) -> Arc<Run> {
    let labels = BTreeMap::from([("team".to_owned(), format!("t{}", i % 5))]);
    let spec: RunSpec = serde_json::from_value(serde_json::json!({
        "agentRef": {"name": AGENTS[i % AGENTS.len()]}, "task": "t"
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let going = i < GOING;
    Arc::new(Run {
        metadata: ObjectMeta {
            name: Some(format!("run-{i:05}")),
            namespace: Some("team".into()),
            uid: Some(format!("uid-{i}")),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec,
        status: going.then(|| RunStatus {
            pod_name: Some(format!("run-{i:05}-1")),
            report: Some(RunReport {
                attempt: 1,
                seq: 7,
                usage: Usage {
                    input_tokens: 900,
                    output_tokens: 100,
                    ..Usage::default()
                },
                ..RunReport::default()
            }),
            ..RunStatus::default()
        }),
    })
}

fn budget(i: usize) -> Budget {
    let selector = match i % 3 {
        0 => None,
        1 => Some(BudgetSelector {
            agents: vec![AGENTS[i % AGENTS.len()].to_owned()],
            ..BudgetSelector::default()
        }),
        _ => Some(BudgetSelector {
            run_labels: BTreeMap::from([("team".to_owned(), format!("t{}", i % 5))]),
            ..BudgetSelector::default()
        }),
    };
    let mut budget = Budget::new(
        &format!("budget-{i}"),
        BudgetSpec {
            window: BudgetWindow {
                period: Some("24h".into()),
                ..BudgetWindow::default()
            },
            limits: BudgetLimits {
                // Some reached by the going Runs' 500,000 tokens, some not.
                tokens: Some(if i.is_multiple_of(2) {
                    100_000
                } else {
                    10_000_000
                }),
                runs: Some(5_000),
                cost: Some(CostLimit {
                    amount: "50".into(),
                    currency: "EUR".into(),
                }),
                ..BudgetLimits::default()
            },
            selector,
            on_exceeded: OnExceeded::Queue,
        },
    );
    budget.metadata.namespace = Some("team".into());
    budget.status = Some(BudgetStatus::default());
    budget
}

fn bench_look(c: &mut Criterion) {
    let runs: Vec<Arc<Run>> = (0..GOING + QUEUED).map(run).collect();
    let budgets: Vec<Budget> = (0..BUDGETS).map(budget).collect();
    let keys: Vec<RunKey> = (0..GOING + QUEUED)
        .map(|i| RunKey::new("team", &format!("run-{i:05}")))
        .collect();
    let granted: HashSet<&RunKey> = HashSet::new();
    let now = now();
    c.bench_function("budget_views_10_budgets_10500_runs", |b| {
        b.iter(|| {
            budgets
                .iter()
                .filter_map(|budget| view(budget, &runs, &granted, now, None))
                .count()
        })
    });
    let views: Vec<BudgetView> = budgets
        .iter()
        .filter_map(|budget| view(budget, &runs, &granted, now, None))
        .collect();
    let candidates: Vec<Candidate<'_>> = (GOING..GOING + QUEUED)
        .map(|i| Candidate {
            key: &keys[i],
            created: now,
            agent: &runs[i].spec.agent_ref.name,
            labels: runs[i]
                .metadata
                .labels
                .as_ref()
                .unwrap_or_else(|| unreachable!()),
        })
        .collect();
    c.bench_function("budget_holds_10_budgets_10000_queued", |b| {
        b.iter(|| holds(&views, &candidates).len())
    });
}

criterion_group!(benches, bench_look);
criterion_main!(benches);
