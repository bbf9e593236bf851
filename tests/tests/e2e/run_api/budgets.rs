//! A Budget on the real API server, with simulated runners reporting through the run API:
//! Runs spend a Budget of N tokens, the rest wait `Queued` with `BudgetExceeded`, an operator
//! restart mid-way loses and double-counts nothing, and the window's reset lets them start.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::budget::Budget;
use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::reason::{condition_type, run as run_reason};
use herd_crds::report::{StopReason, Usage};
use herd_crds::run::Run;
use herd_crds::wire::{ProgressReport, ResultReport, RunConfig};
use herd_e2e::TestEnv;
use herd_e2e::runner::runner_token;
use herd_e2e::wait::wait_for;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::support::{AUDIENCE, run_api_config, run_url, send};
use crate::operator::run_fixtures::{
    WAIT, create_agent_spec, create_run, message, terminate_agent,
};
use crate::operator::support::{Clients, Rbac, http_get, start_leader};

/// The Budget's limit.
const LIMIT: u64 = 1000;
/// Tokens of one simulated model call (80 input, 20 output).
const CALL: u64 = 100;
/// Most calls a simulated Run makes before answering.
const CALLS: u64 = 4;
/// Runs created.
const RUNS: usize = 30;

/// One simulated runner: its Run, token, allowance from `config`, and what it reported.
struct Runner {
    name: String,
    token: String,
    allowance: Option<u64>,
    used: u64,
    seq: u64,
}

fn usage(tokens: u64) -> Usage {
    Usage {
        input_tokens: tokens * 4 / 5,
        output_tokens: tokens / 5,
        model_calls: u32::try_from(tokens / CALL).unwrap_or(u32::MAX),
        ..Usage::default()
    }
}

fn held(run: &Run) -> bool {
    run.status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, condition_type::SUCCEEDED))
        .is_some_and(|c| {
            c.status == ConditionStatus::Unknown && c.reason == run_reason::BUDGET_EXCEEDED
        })
}

fn reported(run: &Run) -> u64 {
    run.status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .map_or(0, |r| r.usage.total_tokens())
}

/// Runs of `helper` spend a Budget of 1000 tokens (period 100s) ten at a time
/// (`--max-active-per-namespace=10`), each runner honouring the token budget its `config`
/// gives (its share of what the Budget has left unreserved) and stopping after the call that
/// reaches it, as the token-budget middleware does. The sum reported stays within the limit
/// plus one call per Run going at the crossing; the other
/// Runs wait `Queued` with reason `BudgetExceeded` naming the Budget; after an operator restart
/// the Budget's `used` equals the sum of the Runs' reported usage; at the window's end a held
/// Run starts.
pub async fn budgets_hold_runs_count_once_and_release_at_the_reset(
    env: TestEnv,
) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Clients {
        operator,
        admin,
        namespace,
    } = Clients::new(&env, Rbac::Namespaced).await?;
    let mut config = run_api_config(&namespace)?;
    config.admission.max_active_per_namespace = 10;
    let mut running = start_leader(config.clone(), operator.clone()).await?;
    create_agent_spec(
        &admin,
        &namespace,
        json!({"runDefaults": {"timeout": "10m"}, "sandbox": {}}),
    )
    .await?;
    let budgets: Api<Budget> = Api::namespaced(admin.clone(), &namespace);
    let budget: Budget = serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Budget",
        "metadata": {"name": "daily"},
        "spec": {"window": {"period": "100s"}, "limits": {"tokens": LIMIT}},
    }))?;
    budgets.create(&PostParams::default(), &budget).await?;
    wait_for("the Budget's first window", WAIT, || async {
        Ok(budgets
            .get("daily")
            .await?
            .status
            .and_then(|s| s.window_end))
    })
    .await?;
    for i in 0..RUNS {
        create_run(&admin, &namespace, &format!("r{i:02}")).await?;
    }
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &namespace);
    let bundle = wait_for("the run API's CA bundle", WAIT, || async {
        Ok(cms
            .get_opt("herd-run-api-ca")
            .await?
            .and_then(|cm| cm.data)
            .and_then(|d| d.get("ca.crt").cloned()))
    })
    .await?;
    let https = reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(bundle.as_bytes())?)
        .build()?;
    let runs: Api<Run> = Api::namespaced(admin.clone(), &namespace);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &namespace);

    // Simulate: admitted Runs read their config, then take turns making calls.
    let mut going: BTreeMap<String, Runner> = BTreeMap::new();
    let mut done: Vec<String> = Vec::new();
    let mut total = 0;
    let mut active_at_crossing = None;
    // Runs admitted after the crossing, before admission saw it (their config gives them
    // nothing left: they stop after one call, as the runner's middleware does).
    let mut late = 0u64;
    let mut restarted = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the simulation did not settle"
        );
        for pod in pods.list(&Default::default()).await?.items {
            let Some(run) = pod.labels().get("herd.dev/run").cloned() else {
                continue;
            };
            if going.contains_key(&run) || done.contains(&run) {
                continue;
            }
            let token = runner_token(&admin, &namespace, &pod, Some(AUDIENCE), 600).await?;
            let url = run_url(&running, &namespace, &run, "config");
            let config: RunConfig = send(https.get(url).bearer_auth(&token))
                .await?
                .expect(200)?;
            if active_at_crossing.is_some() {
                late += 1;
            }
            going.insert(
                run.clone(),
                Runner {
                    name: run,
                    token,
                    allowance: config.token_budget,
                    used: 0,
                    seq: 0,
                },
            );
        }
        if going.is_empty() {
            let all = runs.list(&Default::default()).await?.items;
            let waiting = all.iter().filter(|r| held(r)).count();
            if done.len() + waiting == RUNS && !done.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        // One call each, in turn.
        let names: Vec<String> = going.keys().cloned().collect();
        for name in names {
            let Some(runner) = going.get_mut(&name) else {
                continue;
            };
            runner.used += CALL;
            runner.seq += 1;
            total += CALL;
            if total >= LIMIT && active_at_crossing.is_none() {
                active_at_crossing = Some(going.len() as u64);
            }
            let Some(runner) = going.get_mut(&name) else {
                continue;
            };
            let progress = ProgressReport {
                attempt: 1,
                seq: runner.seq,
                usage: usage(runner.used),
                ..ProgressReport::default()
            };
            let url = run_url(&running, &namespace, &runner.name, "progress");
            send(https.post(url).bearer_auth(&runner.token).json(&progress))
                .await?
                .expect::<serde_json::Value>(202)?;
            let spent = runner.allowance.is_some_and(|a| runner.used >= a);
            if spent || runner.used >= CALLS * CALL {
                let result = ResultReport {
                    attempt: 1,
                    seq: runner.seq + 1,
                    stop_reason: if spent {
                        StopReason::TokenBudgetExceeded
                    } else {
                        StopReason::Completed
                    },
                    text: "done".into(),
                    title: None,
                    todos: vec![],
                    usage: usage(runner.used),
                    files: vec![],
                    error: None,
                };
                let url = run_url(&running, &namespace, &runner.name, "result");
                let answer = send(https.post(url).bearer_auth(&runner.token).json(&result)).await?;
                ensure!(answer.status == 200, "result: {}", answer.body);
                // Play the kubelet: the Pod ends, freeing its slot under the cap.
                terminate_agent(
                    &admin,
                    &namespace,
                    &format!("{name}-1"),
                    json!({"exitCode": 0, "reason": "Completed"}),
                )
                .await?;
                done.push(name.clone());
                going.remove(&name);
            }
        }
        // Restart the operator once, mid-way, after the crossing.
        if active_at_crossing.is_some() && !restarted {
            running.shutdown().await?;
            running = start_leader(config.clone(), operator.clone()).await?;
            restarted = true;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    let crossing = active_at_crossing.context("the limit was never reached")?;
    ensure!(
        total <= LIMIT + (crossing + late) * CALL,
        "{total} tokens reported: more than {LIMIT} plus one call of {CALL} for each of the {crossing} Runs going at the crossing and the {late} admitted just after it"
    );
    println!(
        "budget e2e: {total} tokens reported against a limit of {LIMIT}; {crossing} Runs going at the crossing, {late} admitted after it, {} Runs ran",
        done.len()
    );
    let all = runs.list(&Default::default()).await?.items;
    let waiting: Vec<&Run> = all.iter().filter(|r| held(r)).collect();
    ensure!(!waiting.is_empty(), "some Runs wait for the Budget");
    ensure!(
        waiting
            .iter()
            .all(|r| message(r).starts_with("Budget daily reached its limit of 1000 tokens")),
        "{:?}",
        waiting.iter().map(|r| message(r)).collect::<Vec<_>>()
    );
    // Nothing lost or counted twice across the restart.
    let sum: u64 = all.iter().map(reported).sum();
    ensure!(
        sum == total,
        "the Runs show {sum}, the runners sent {total}"
    );
    let counted = wait_for("the Budget to count every report", WAIT, || async {
        let status = budgets.get("daily").await?.status.unwrap_or_default();
        Ok((status.used.tokens == sum).then_some(status))
    })
    .await?;
    ensure!(
        find_condition(&counted.conditions, condition_type::EXCEEDED)
            .is_some_and(|c| c.status == ConditionStatus::True),
        "Exceeded: {:?}",
        counted.conditions
    );
    ensure!(counted.used.runs == done.len() as u64);

    // The window resets: a held Run starts.
    let end = counted.window_end.context("a window end")?.0;
    let first_held = waiting[0].name_any();
    let give_up = end
        .checked_add(jiff::SignedDuration::from_secs(60))
        .context("a window end")?;
    loop {
        if pods.get_opt(&format!("{first_held}-1")).await?.is_some() {
            break;
        }
        ensure!(
            jiff::Timestamp::now() < give_up,
            "no Pod for {first_held} within a minute of the window's end at {end}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // The gauges follow the Budget, and go when it is deleted.
    let series =
        format!(r#"herd_budget_used{{namespace="{namespace}",budget="daily",limit="tokens"}}"#);
    let (_, metrics) = http_get(running.http_addr, "/metrics").await?;
    ensure!(metrics.contains(&series), "no {series} in:\n{metrics}");
    budgets.delete("daily", &Default::default()).await?;
    wait_for("the deleted Budget's gauges to go", WAIT, || async {
        let (_, metrics) = http_get(running.http_addr, "/metrics").await?;
        Ok((!metrics.contains(r#"budget="daily""#)).then_some(()))
    })
    .await?;
    running.shutdown().await?;
    Ok(())
}
