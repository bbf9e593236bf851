//! Budgets and Runs as the budget decisions see them, read from the caches: a Run's usage for
//! the ledger, and a Budget's ledger brought up to now (its status stepped with the Runs the
//! cache holds, written nowhere) for admission and for a starting Run's token budget.

use std::collections::HashSet;

use herd_crds::budget::Budget;
use herd_crds::run::{Run, phase_of};
use jiff::Timestamp;
use kube::ResourceExt;

use crate::decide::admission::RunKey;
use crate::decide::budget_admission::BudgetView;
use crate::decide::budget_ledger::{Ledger, Reported, RunUsage};
use crate::decide::budget_window::Window;

/// A Run as the ledger of `budget` sees it; `started` also for a Run admission granted whose
/// Pod the cache does not show yet.
pub fn run_usage<'a>(budget: &Budget, run: &'a Run, granted: bool) -> Option<RunUsage<'a>> {
    let uid = run.metadata.uid.as_deref()?;
    let status = run.status.as_ref();
    let report = status.and_then(|s| s.report.as_ref());
    let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let finished_at = phase_of(conditions).is_finished().then(|| {
        status
            .and_then(|s| s.completion_time.as_ref())
            .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
    });
    let currency = budget.spec.currency();
    let started = granted
        || report.is_some()
        || status.is_some_and(|s| s.pod_name.is_some() || s.attempt.is_some_and(|a| a > 1));
    Some(RunUsage {
        uid,
        selected: budget.spec.selects(&run.spec.agent_ref.name, run.labels()),
        started,
        finished_at,
        report: report.map(|report| Reported {
            attempt: report.attempt,
            seq: report.seq,
            input_tokens: report.usage.input_tokens,
            output_tokens: report.usage.output_tokens,
            cost_micros: report
                .usage
                .cost
                .as_ref()
                .filter(|cost| Some(cost.currency.as_str()) == currency)
                .map_or(0, |cost| cost.micros),
        }),
    })
}

/// The Runs of `budget`'s namespace among `runs`.
pub fn in_namespace<'a>(
    budget: &'a Budget,
    runs: &'a [std::sync::Arc<Run>],
) -> impl Iterator<Item = &'a Run> + 'a {
    let namespace = budget.metadata.namespace.clone();
    runs.iter()
        .map(AsRef::as_ref)
        .filter(move |run| run.metadata.namespace == namespace)
}

/// `budget`'s ledger brought up to `now` with `runs` (all Runs of the cache; `granted` are
/// admitted without a Pod in the cache yet), as admission sees it, its reservations without
/// the Run of uid `except`'s; `None` for a Budget whose window cannot be read (it holds
/// nothing).
pub fn view(
    budget: &Budget,
    runs: &[std::sync::Arc<Run>],
    granted: &HashSet<&RunKey>,
    now: Timestamp,
    except: Option<&str>,
) -> Option<BudgetView> {
    let window = Window::of(&budget.spec.window).ok()?;
    let namespace = budget.metadata.namespace.clone()?;
    let status = budget.status.clone().unwrap_or_default();
    let mut ledger = Ledger::from_status(&status);
    let span = window.current(ledger.window.map(|w| w.start), now);
    let usages = in_namespace(budget, runs).filter_map(|run| {
        let key = RunKey::new(&namespace, run.metadata.name.as_deref()?);
        run_usage(budget, run, granted.contains(&key))
    });
    ledger.step(span, usages, now);
    let selector = budget.spec.selector.clone().unwrap_or_default();
    Some(BudgetView {
        name: budget.name_any(),
        namespace,
        agents: selector.agents,
        run_labels: selector.run_labels,
        limits: budget.spec.limits.clone(),
        on_exceeded: budget.spec.on_exceeded,
        used: ledger.used,
        reserved: ledger.reserved(except),
        marks: ledger.marks.len(),
        resets: span.end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::budget::{BudgetLimits, BudgetSpec, BudgetWindow, CostLimit, OnExceeded};
    use herd_crds::report::{Cost, Usage};
    use herd_crds::run::{RunReport, RunStatus};
    use std::sync::Arc;

    fn budget(currency: &str) -> Budget {
        let mut budget = Budget::new(
            "daily",
            BudgetSpec {
                window: BudgetWindow {
                    period: Some("24h".into()),
                    ..BudgetWindow::default()
                },
                limits: BudgetLimits {
                    tokens: Some(1000),
                    runs: Some(2),
                    cost: Some(CostLimit {
                        amount: "1".into(),
                        currency: currency.into(),
                    }),
                    ..BudgetLimits::default()
                },
                selector: None,
                on_exceeded: OnExceeded::Queue,
            },
        );
        budget.metadata.namespace = Some("ns".into());
        budget
    }

    fn run(name: &str, input: u64, cost: Option<(&str, u64)>, pod: bool) -> Arc<Run> {
        let mut run: Run = serde_json::from_value(serde_json::json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"agentRef": {"name": "researcher"}, "task": "t"},
        }))
        .unwrap();
        let usage = Usage {
            input_tokens: input,
            cost: cost.map(|(currency, micros)| Cost {
                currency: currency.into(),
                micros,
            }),
            ..Usage::default()
        };
        run.status = Some(RunStatus {
            pod_name: pod.then(|| format!("{name}-1")),
            report: (input > 0).then(|| RunReport {
                attempt: 1,
                seq: 1,
                usage,
                ..RunReport::default()
            }),
            ..RunStatus::default()
        });
        Arc::new(run)
    }

    #[test]
    fn a_view_counts_reports_grants_and_only_the_budgets_currency() {
        let runs = vec![
            run("a", 300, Some(("EUR", 400_000)), true),
            run("b", 200, Some(("USD", 900_000)), true),
            run("queued", 0, None, false),
            run("granted", 0, None, false),
        ];
        let granted_key = RunKey::new("ns", "granted");
        let granted = HashSet::from([&granted_key]);
        let now = Timestamp::from_second(1_000_000).unwrap();
        let view = view(&budget("EUR"), &runs, &granted, now, None).unwrap();
        assert_eq!(view.used.tokens, 500);
        assert_eq!(view.used.cost_micros, 400_000, "the USD Run does not count");
        assert_eq!(view.used.runs, 3, "a, b and the granted one");
        assert_eq!(view.marks, 3);
        assert_eq!(
            view.resets,
            Timestamp::from_second(1_000_000 + 86_400).unwrap()
        );
    }
}
