//! Budgets brought to each state the health checks tell apart: the status the Budget
//! controller's own decision ([`budget_status::next_status`]) computes for the facts, written
//! through the `status` subresource (which the API server validates against the CRD schema),
//! then read back.

use anyhow::bail;
use herd_crds::budget::{BudgetSpec, BudgetStatus};
use herd_e2e::TestEnv;
use herd_e2e::requests::{get_object, merge_patch};
use herd_operator::decide::budget_ledger::{Reported, RunUsage};
use herd_operator::decide::budget_status;
use kube::Client;
use serde_json::{Value, json};

use super::health::{Case, Flux, Verdict};
use super::states::{CURRENT, FAILED, condition, create, now};

/// The Budget's token limit.
const LIMIT: u64 = 1000;

fn budget_object(name: &str, window: Value) -> Value {
    json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Budget",
        "metadata": {"name": name},
        "spec": {"window": window, "limits": {"tokens": LIMIT}},
    })
}

/// Creates the Budget and writes the status the Budget controller computes with one going
/// Run that reported `tokens`.
async fn budget_in(
    admin: &Client,
    ns: &str,
    name: &str,
    window: Value,
    tokens: u64,
) -> anyhow::Result<Value> {
    let created = create(admin, ns, budget_object(name, window)).await?;
    let spec: BudgetSpec = serde_json::from_value(created["spec"].clone())?;
    let run = RunUsage {
        uid: "run-uid",
        selected: true,
        started: true,
        finished_at: None,
        report: Some(Reported {
            attempt: 1,
            seq: 1,
            input_tokens: tokens,
            output_tokens: 0,
            cost_micros: 0,
        }),
    };
    let decision = budget_status::next_status(
        &spec,
        created
            .pointer("/metadata/generation")
            .and_then(Value::as_i64),
        &BudgetStatus::default(),
        [run],
        &now(),
    );
    let patch = json!({"status": serde_json::to_value(&decision.status)?});
    merge_patch(admin, ns, "Budget", name, &patch)
        .await?
        .map_err(anyhow::Error::msg)
}

/// The message of the object's condition `type_`, which must have `reason`.
fn message(object: &Value, type_: &str, reason: &str) -> anyhow::Result<String> {
    match condition(object, type_) {
        Some(c) if c["reason"] == reason => {
            Ok(c["message"].as_str().unwrap_or_default().to_owned())
        }
        other => bail!("{type_} is not {reason}: {other:?}"),
    }
}

/// Budget: counting within its limits is Healthy/Current, a limit reached Suspended/Current
/// (new Runs wait: the Budget works), a window it cannot read Degraded/Failed, a spec not
/// observed yet or no status Progressing.
pub async fn budgets(env: &TestEnv) -> anyhow::Result<Vec<Case>> {
    let admin = env.client();
    let ns = env.namespace();
    let day = json!({"calendar": "Day", "timeZone": "Europe/Berlin"});
    let within = budget_in(&admin, ns, "within", day.clone(), LIMIT / 2).await?;
    let counting = message(&within, "Ready", "Counting")?;
    let reached = budget_in(&admin, ns, "reached", json!({"period": "24h"}), LIMIT).await?;
    let exceeded = message(&reached, "Exceeded", "LimitReached")?;
    let lost = budget_in(
        &admin,
        ns,
        "nowhere",
        json!({"calendar": "Day", "timeZone": "Mars/Olympus_Mons"}),
        0,
    )
    .await?;
    let unknown = message(&lost, "Ready", "UnknownTimeZone")?;
    let mut cases = vec![
        Case::new(
            "Budget within its limits",
            within,
            ("Healthy", counting),
            CURRENT,
        ),
        Case::new(
            "Budget with a limit reached",
            reached,
            ("Suspended", exceeded),
            CURRENT,
        ),
        Case::new(
            "Budget with an unknown time zone",
            lost,
            ("Degraded", unknown),
            FAILED,
        ),
    ];
    merge_patch(
        &admin,
        ns,
        "Budget",
        "within",
        &json!({"spec": {"limits": {"tokens": LIMIT * 2}}}),
    )
    .await?
    .map_err(anyhow::Error::msg)?;
    cases.push(Case::new(
        "Budget with a spec not observed yet",
        get_object(&admin, ns, "Budget", "within").await?,
        (
            "Progressing",
            "waiting for the operator to observe generation 2",
        ),
        Flux::Evaluated([true, false, true], Verdict::InProgress),
    ));
    cases.push(Case::new(
        "Budget the operator never saw",
        create(&admin, ns, budget_object("fresh", day)).await?,
        (
            "Progressing",
            "waiting for the operator to count the Budget",
        ),
        Flux::Unevaluable,
    ));
    Ok(cases)
}
