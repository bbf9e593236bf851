//! Memory in a cluster: each Run's runner reads the Agent's memory through the run API and
//! sends its operations back; the run API applies them to ConfigMap `<agent>-memory` with
//! compare-and-swap, so Runs that end together lose nothing.

use std::time::Duration;

use anyhow::ensure;
use herd_crds::condition::ConditionStatus;
use herd_e2e::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;

use super::cluster::Scenario;
use super::script::{script_config_map, scripted_agent};
use crate::operator::run_fixtures::{message, succeeded};

/// Runs that end together.
const RUNS: usize = 10;

/// Ten Pods starting at once on two cores.
const MEMORY_TIME: Duration = Duration::from_secs(180);

/// The token Run `n`'s task names: the memory call recognizes its Run by it. It never appears
/// in a stored fact (the memory call sees those too) and no token contains another.
fn token(n: usize) -> String {
    format!("tok{n}x")
}

/// The fact Run `n` adds.
fn fact(n: usize) -> String {
    format!("Remembers item number {n} of ten")
}

/// Each Run answers at once; its memory call adds the fact its task named.
fn memory_script() -> String {
    let mut rules = vec![
        json!({"match": {"purpose": "title"}, "respond": {"content": "A fact"}}),
        // `call` counts per purpose: without `purpose`, the memory call would match too.
        json!({"match": {"role": "lead", "purpose": "main", "call": 1},
            "respond": {"content": "Noted."}}),
    ];
    for n in 1..=RUNS {
        let operations = json!({"operations": [{"op": "add",
            "content": fact(n),
            "category": "context", "confidence": 0.9}]});
        rules.push(
            json!({"match": {"purpose": "memory", "anyMessage": {"contains": token(n)}},
            "respond": {"content": operations.to_string()}}),
        );
    }
    json!({ "rules": rules }).to_string()
}

/// Ten Runs of one Agent end together, each adding a fact: all ten are in its memory.
pub async fn runs_ending_together_lose_no_memory(env: TestEnv) -> anyhow::Result<()> {
    let agent = scripted_agent(json!({"memory": {"enabled": true}}));
    let mut scenario = Scenario::start(&env, agent).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &memory_script()).await?;
    for n in 1..=RUNS {
        let task = format!("Remember {}.", token(n));
        scenario.create_run(&format!("remember-{n}"), &task).await?;
    }
    for n in 1..=RUNS {
        let run = scenario
            .finished(&format!("remember-{n}"), MEMORY_TIME)
            .await?;
        ensure!(
            succeeded(&run, ConditionStatus::True, "Succeeded"),
            "Run {n} ended otherwise: {}",
            message(&run)
        );
    }
    let memory = Api::<ConfigMap>::namespaced(scenario.admin.clone(), &scenario.namespace)
        .get("helper-memory")
        .await?;
    let stored: String = memory.data.unwrap_or_default().into_values().collect();
    let missing: Vec<String> = (1..=RUNS)
        .map(fact)
        .filter(|fact| !stored.contains(fact.as_str()))
        .collect();
    ensure!(missing.is_empty(), "facts lost: {missing:?} in {stored}");
    Ok(())
}
