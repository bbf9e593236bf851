//! `kubectl herd schedule`, `trigger` and `schedules` against the real API server (no operator:
//! the Schedule as created, the manual Run as the Schedule's own).

use anyhow::{Context, ensure};
use herd_crds::run::Run;
use herd_crds::schedule::Schedule;
use herd_e2e::TestEnv;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::kubectl_herd;

pub async fn schedule_trigger_and_list(env: TestEnv) -> anyhow::Result<()> {
    let created = kubectl_herd(
        &env,
        &[
            "schedule",
            "brief",
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Europe/Berlin",
            "--concurrency-policy",
            "Forbid",
            "helper",
            "Brief me.",
        ],
    )
    .await?
    .expect_code(0)?;
    ensure!(
        created
            .stdout
            .starts_with("schedule.herd.dev/brief created"),
        "{created:?}"
    );
    let schedules: Api<Schedule> = Api::namespaced(env.client(), env.namespace());
    let schedule = schedules.get("brief").await?;
    ensure!(
        schedule.spec.schedule.as_deref() == Some("0 9 * * 1-5")
            && schedule.spec.time_zone.as_deref() == Some("Europe/Berlin")
            && schedule.spec.run_template.spec.agent_ref.name == "helper"
            && schedule.spec.run_template.spec.task == "Brief me."
            && schedule.spec.successful_runs_history_limit == 3,
        "{:?}",
        schedule.spec
    );

    let triggered = kubectl_herd(&env, &["trigger", "brief"])
        .await?
        .expect_code(0)?;
    let runs: Api<Run> = Api::namespaced(env.client(), env.namespace());
    let manual = runs
        .list(&ListParams::default().labels("herd.dev/schedule=brief,herd.dev/trigger=manual"))
        .await?
        .items;
    ensure!(manual.len() == 1, "{manual:?}");
    let run = &manual[0];
    ensure!(
        run.name_any().starts_with("brief-manual-") && triggered.stdout.contains(&run.name_any()),
        "{triggered:?}"
    );
    let owner = run
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default()
        .into_iter()
        .next()
        .context("no owner")?;
    ensure!(
        owner.kind == "Schedule"
            && Some(owner.uid) == schedule.metadata.uid
            && owner.controller == Some(true),
        "the manual Run belongs to the Schedule"
    );

    let table = kubectl_herd(&env, &["schedules"]).await?.expect_code(0)?;
    let header = table.header();
    ensure!(
        header
            == [
                "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "NEXT", "READY", "AGE"
            ],
        "{table:?}"
    );
    ensure!(
        table
            .stdout
            .lines()
            .nth(1)
            .is_some_and(|row| row.starts_with("brief")
                && row.contains("0 9 * * 1-5")
                && row.contains("Europe/Berlin")),
        "{table:?}"
    );

    // `get` lists the Schedules after the Runs; its other formats stay Runs only.
    let listed = kubectl_herd(&env, &["get"]).await?.expect_code(0)?;
    let (runs, schedules_part) = listed
        .stdout
        .split_once("\n\n")
        .context("get prints the Schedules after a blank line")?;
    ensure!(
        runs.starts_with("NAME") && runs.contains(&run.name_any()),
        "{listed:?}"
    );
    ensure!(
        schedules_part.starts_with("NAME") && schedules_part.contains("NEXT"),
        "{listed:?}"
    );
    ensure!(
        schedules_part
            .lines()
            .nth(1)
            .is_some_and(|row| row.starts_with("brief") && row.contains("0 9 * * 1-5")),
        "{listed:?}"
    );
    let json = kubectl_herd(&env, &["get", "-o", "json"])
        .await?
        .expect_code(0)?;
    let list: serde_json::Value = serde_json::from_str(&json.stdout)?;
    let kinds: Vec<&str> = list["items"]
        .as_array()
        .context("a List")?
        .iter()
        .filter_map(|item| item["kind"].as_str())
        .collect();
    ensure!(kinds == ["Run"], "-o json holds the Runs only: {kinds:?}");

    let refused = kubectl_herd(&env, &["schedule", "bad", "--cron", "* * *", "helper", "x"])
        .await?
        .expect_code(1)?;
    ensure!(refused.stderr.contains("is not a schedule"), "{refused:?}");
    let neither = kubectl_herd(&env, &["schedule", "none", "helper", "x"])
        .await?
        .expect_code(1)?;
    ensure!(
        neither.stderr.contains("--cron EXPR or --at TIME"),
        "{neither:?}"
    );
    Ok(())
}
