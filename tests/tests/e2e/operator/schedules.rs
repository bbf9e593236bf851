//! Schedules on a real API server: `@every 5s` slots become Runs that finish, `Forbid` waits
//! while a Run goes, `Replace` cancels it, an operator killed across a slot creates that slot's
//! Run once, deleting the Schedule deletes its Runs, and bad inputs are refused or reported.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::condition::ConditionStatus;
use herd_crds::run::Run;
use herd_crds::schedule::Schedule;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use super::run_fixtures::{
    WAIT, complete, create_agent, enforce_restricted, reaches, run_until, succeeded,
};
use super::support::{Clients, Operated, has_condition, start_leader, test_config};
use herd_e2e::wait::wait_for;

/// A Schedule of Runs of Agent `helper`; `spec`'s fields replace the plain ones.
async fn create_schedule(
    admin: &Client,
    namespace: &str,
    name: &str,
    spec: Value,
) -> anyhow::Result<Schedule> {
    let mut body = json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Schedule",
        "metadata": {"name": name},
        "spec": {
            "schedule": "@every 5s",
            "runTemplate": {
                "metadata": {"labels": {"team": "research"}},
                "spec": {"agentRef": {"name": "helper"}, "task": "Brief me."},
            },
        },
    });
    if let (Some(base), Some(extra)) = (body["spec"].as_object_mut(), spec.as_object()) {
        for (key, value) in extra {
            base.insert(key.clone(), value.clone());
        }
    }
    let schedules: Api<Schedule> = Api::namespaced(admin.clone(), namespace);
    let schedule: Schedule = serde_json::from_value(body)?;
    Ok(schedules.create(&PostParams::default(), &schedule).await?)
}

/// The Schedule's Runs, by name.
async fn runs_of(runs: &Api<Run>, schedule: &str) -> anyhow::Result<Vec<Run>> {
    let list = runs
        .list(&ListParams::default().labels(&format!("herd.dev/schedule={schedule}")))
        .await?;
    let mut items = list.items;
    items.sort_by_key(|run| run.metadata.name.clone());
    Ok(items)
}

fn name(run: &Run) -> String {
    run.metadata.name.clone().unwrap_or_default()
}

/// Waits for the Schedule to have `count` Runs at least, and returns them.
async fn wait_for_runs(runs: &Api<Run>, schedule: &str, count: usize) -> anyhow::Result<Vec<Run>> {
    wait_for(&format!("{count} Runs of {schedule}"), WAIT, || async {
        let found = runs_of(runs, schedule).await?;
        Ok((found.len() >= count).then_some(found))
    })
    .await
}

/// Plays the runner and the kubelet: the Run's first Pod reports success and exits 0.
async fn finish(admin: &Client, namespace: &str, run: &str) -> anyhow::Result<()> {
    let runs: Api<Run> = Api::namespaced(admin.clone(), namespace);
    reaches(&runs, run, ConditionStatus::Unknown, "PodPending").await?;
    complete(admin, namespace, run, "brief").await?;
    reaches(&runs, run, ConditionStatus::True, "Succeeded").await?;
    Ok(())
}

fn condition_is(schedule: &Schedule, type_: &str, status: ConditionStatus, reason: &str) -> bool {
    schedule
        .status
        .as_ref()
        .is_some_and(|s| has_condition(&s.conditions, type_, status, reason))
}

/// `@every 5s`: each slot's Run is named after it, owned and labelled; finished Runs are kept
/// to the history limit; deleting the Schedule deletes its Runs.
pub async fn every_five_seconds(op: Operated) -> anyhow::Result<()> {
    create_agent(&op.admin, &op.namespace).await?;
    let schedule = create_schedule(
        &op.admin,
        &op.namespace,
        "brief",
        json!({"successfulRunsHistoryLimit": 1}),
    )
    .await?;
    let uid = schedule.metadata.uid.clone().context("no uid")?;
    let runs: Api<Run> = op.api();
    let first = wait_for_runs(&runs, "brief", 1).await?.remove(0);
    let slot: i64 = name(&first)
        .strip_prefix("brief-")
        .and_then(|s| s.parse().ok())
        .context(name(&first))?;
    ensure!(slot % 5 == 0, "{} is not on a 5 s slot", name(&first));
    let owner = first.metadata.owner_references.clone().unwrap_or_default();
    ensure!(
        owner.len() == 1 && owner[0].uid == uid && owner[0].controller == Some(true),
        "{owner:?}"
    );
    ensure!(
        first.metadata.labels.as_ref().and_then(|l| l.get("team")) == Some(&"research".into()),
        "the template's labels"
    );
    finish(&op.admin, &op.namespace, &name(&first)).await?;
    let second = wait_for("a later slot's Run", WAIT, || async {
        let found = runs_of(&runs, "brief").await?;
        Ok(found.into_iter().find(|r| name(r) > name(&first)))
    })
    .await?;
    finish(&op.admin, &op.namespace, &name(&second)).await?;
    let schedules: Api<Schedule> = op.api();
    wait_for(
        "the history limit to delete the first Run",
        WAIT,
        || async { Ok(runs.get_opt(&name(&first)).await?.is_none().then_some(())) },
    )
    .await?;
    let status = wait_for("lastSuccessfulTime", WAIT, || async {
        let status = schedules
            .get_status("brief")
            .await?
            .status
            .unwrap_or_default();
        Ok(status.last_successful_time.is_some().then_some(status))
    })
    .await?;
    ensure!(
        status.next_schedule_time.is_some() && status.last_schedule_time.is_some(),
        "{status:?}"
    );
    let ready = schedules.get("brief").await?;
    ensure!(
        condition_is(&ready, "Ready", ConditionStatus::True, "Scheduled")
            && condition_is(&ready, "Accepted", ConditionStatus::True, "Accepted"),
        "{:?}",
        ready.status
    );

    schedules
        .delete("brief", &DeleteParams::background())
        .await?;
    wait_for("the Schedule's Runs to be collected", WAIT, || async {
        Ok(runs_of(&runs, "brief").await?.is_empty().then_some(()))
    })
    .await?;
    Ok(())
}

/// `Forbid` creates no Run while one goes, and the waiting slot's after it ends; `Replace`
/// cancels the going Run for the new one.
pub async fn forbid_and_replace(op: Operated) -> anyhow::Result<()> {
    create_agent(&op.admin, &op.namespace).await?;
    let runs: Api<Run> = op.api();

    create_schedule(
        &op.admin,
        &op.namespace,
        "only-one",
        json!({"concurrencyPolicy": "Forbid"}),
    )
    .await?;
    let first = wait_for_runs(&runs, "only-one", 1).await?.remove(0);
    tokio::time::sleep(Duration::from_secs(12)).await;
    let while_going = runs_of(&runs, "only-one").await?;
    ensure!(
        while_going.len() == 1,
        "Forbid created {:?}",
        while_going.iter().map(name).collect::<Vec<_>>()
    );
    finish(&op.admin, &op.namespace, &name(&first)).await?;
    wait_for_runs(&runs, "only-one", 2).await?;

    create_schedule(
        &op.admin,
        &op.namespace,
        "newest",
        json!({"concurrencyPolicy": "Replace"}),
    )
    .await?;
    let replaced = wait_for_runs(&runs, "newest", 1).await?.remove(0);
    wait_for_runs(&runs, "newest", 2).await?;
    run_until(&runs, &name(&replaced), "Cancelled by Replace", |r| {
        r.spec.cancel && succeeded(r, ConditionStatus::False, "Cancelled")
    })
    .await?;
    Ok(())
}

/// An operator killed before a slot, and another started after it: the slot's Run is created
/// once, and every Run is a distinct slot.
pub async fn killed_across_a_slot(clients: Clients) -> anyhow::Result<()> {
    enforce_restricted(&clients.admin, &clients.namespace).await?;
    let first = start_leader(
        test_config(&[&clients.namespace], &clients.namespace, "first")?,
        clients.operator.clone(),
    )
    .await?;
    create_agent(&clients.admin, &clients.namespace).await?;
    create_schedule(
        &clients.admin,
        &clients.namespace,
        "steady",
        json!({"schedule": "@every 10s"}),
    )
    .await?;
    let runs: Api<Run> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let before = wait_for_runs(&runs, "steady", 1).await?;
    first.abort();
    drop(first);
    // At least one slot passes while no operator runs.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let during = runs_of(&runs, "steady").await?;
    ensure!(during.len() == before.len(), "no clients.operator, no Run");
    let second = start_leader(
        test_config(&[&clients.namespace], &clients.namespace, "second")?,
        clients.operator,
    )
    .await?;
    let after = wait_for_runs(&runs, "steady", before.len() + 1).await?;
    // Several reconciles of the same slot (Run events, a requeue) create nothing more.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let settled = runs_of(&runs, "steady").await?;
    let slots: BTreeSet<String> = settled
        .iter()
        .filter_map(|r| {
            r.metadata
                .annotations
                .as_ref()?
                .get("herd.dev/scheduled-at")
                .cloned()
        })
        .collect();
    ensure!(
        slots.len() == settled.len(),
        "one Run per slot: {:?}",
        settled.iter().map(name).collect::<Vec<_>>()
    );
    ensure!(
        settled.len() <= after.len() + 1,
        "only the latest missed slot runs: {:?}",
        settled.iter().map(name).collect::<Vec<_>>()
    );
    second.shutdown().await?;
    Ok(())
}

/// A bad cron shape or too long a name is refused by the schema; a cron field out of range or
/// an unknown time zone is `Accepted=False`; a Run the API server refuses makes the Schedule
/// `Ready=False`; a template naming a missing Agent gives Runs that say so, the Schedule stays
/// Accepted.
pub async fn bad_inputs(op: Operated) -> anyhow::Result<()> {
    for (name, spec, accepted, words) in [
        (
            "shape",
            json!({"schedule": "* * *"}),
            "a three-field schedule was accepted",
            "is not a schedule",
        ),
        (
            "both",
            json!({"at": "2026-01-01T00:00:00Z"}),
            "schedule and at were accepted together",
            "exactly one",
        ),
    ] {
        let refused = create_schedule(&op.admin, &op.namespace, name, spec)
            .await
            .err()
            .context(accepted)?;
        ensure!(refused.to_string().contains(words), "{refused}");
    }

    let schedules: Api<Schedule> = op.api();
    create_schedule(
        &op.admin,
        &op.namespace,
        "minute-61",
        json!({"schedule": "61 * * * *"}),
    )
    .await?;
    create_schedule(
        &op.admin,
        &op.namespace,
        "atlantis",
        json!({"timeZone": "Europe/Atlantis"}),
    )
    .await?;
    for (schedule, reason, words) in [
        ("minute-61", "InvalidSchedule", "61 * * * *"),
        ("atlantis", "UnknownTimeZone", "Europe/Atlantis"),
    ] {
        let found = wait_for(&format!("{schedule} not accepted"), WAIT, || async {
            let found = schedules.get(schedule).await?;
            Ok(condition_is(&found, "Accepted", ConditionStatus::False, reason).then_some(found))
        })
        .await?;
        ensure!(
            condition_is(&found, "Stalled", ConditionStatus::True, reason),
            "{:?}",
            found.status
        );
        let message = found
            .status
            .iter()
            .flat_map(|s| s.conditions.iter())
            .find(|c| c.type_ == "Accepted")
            .map(|c| c.message.clone())
            .unwrap_or_default();
        ensure!(message.contains(words), "{message}");
    }

    create_schedule(
        &op.admin,
        &op.namespace,
        "bad-label",
        json!({"runTemplate": {
            "metadata": {"labels": {"team": "not a label value!"}},
            "spec": {"agentRef": {"name": "helper"}, "task": "Brief me."},
        }}),
    )
    .await?;
    let rejected = wait_for("bad-label RunRejected", WAIT, || async {
        let found = schedules.get("bad-label").await?;
        Ok(condition_is(&found, "Ready", ConditionStatus::False, "RunRejected").then_some(found))
    })
    .await?;
    ensure!(
        format!("{:?}", rejected.status).contains("not a label value!"),
        "{:?}",
        rejected.status
    );

    create_schedule(
        &op.admin,
        &op.namespace,
        "nobody",
        json!({"runTemplate": {"spec": {"agentRef": {"name": "missing"}, "task": "Brief me."}}}),
    )
    .await?;
    let runs: Api<Run> = op.api();
    let orphan = wait_for_runs(&runs, "nobody", 1).await?.remove(0);
    reaches(
        &runs,
        &name(&orphan),
        ConditionStatus::Unknown,
        "AgentNotFound",
    )
    .await?;
    let nobody = schedules.get("nobody").await?;
    ensure!(
        condition_is(&nobody, "Accepted", ConditionStatus::True, "Accepted")
            && condition_is(&nobody, "Ready", ConditionStatus::True, "Scheduled"),
        "{:?}",
        nobody.status
    );
    Ok(())
}
