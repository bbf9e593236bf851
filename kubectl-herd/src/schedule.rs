//! `kubectl herd schedule`, `trigger` and `schedules`: Runs on a timetable. `schedule NAME
//! --cron EXPR [--tz ZONE] AGENT TASK` creates a Schedule (or `--at TIME` for one Run);
//! `trigger SCHEDULE` starts its Run now, as `kubectl create job --from=cronjob/...` does;
//! `schedules` lists them with their next slot.

use std::collections::BTreeMap;

use herd_crds::condition::find_condition;
use herd_crds::reason::condition_type;
use herd_crds::run::Run;
use herd_crds::schedule::Schedule;
use herd_crds::terminal_text::one_line;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::catalog::list as list_chosen;
use crate::cli::{CatalogArgs, ScheduleArgs};
use crate::connect::Cluster;
use crate::error::{CliError, api_error};
use crate::io::Io;
use crate::outcome::EXIT_ANSWERED;
use crate::table::{namespaced_header, namespaced_row, render};
use crate::tree::age;

/// The label naming a Run's Schedule (the operator counts the Run as the Schedule's).
pub const SCHEDULE_LABEL: &str = "herd.dev/schedule";
/// The label of a Run started by `trigger`.
pub const TRIGGER_LABEL: &str = "herd.dev/trigger";

/// The Schedule `schedule` asks for.
pub fn schedule_manifest(args: &ScheduleArgs) -> Result<Schedule, CliError> {
    let mut spec = json!({
        "runTemplate": {"spec": {"agentRef": {"name": args.agent}, "task": args.task}},
        "concurrencyPolicy": args.concurrency_policy,
        "suspend": args.suspend,
    });
    match (&args.cron, &args.at) {
        (Some(cron), None) => spec["schedule"] = json!(cron),
        (None, Some(at)) => spec["at"] = json!(at),
        _ => return Err(CliError::new("give --cron EXPR or --at TIME (one of them)")),
    }
    if let Some(zone) = &args.time_zone {
        spec["timeZone"] = json!(zone);
    }
    if let Some(seconds) = args.starting_deadline_seconds {
        spec["startingDeadlineSeconds"] = json!(seconds);
    }
    let object = json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Schedule",
        "metadata": {"name": args.name},
        "spec": spec,
    });
    serde_json::from_value(object).map_err(|e| CliError::new(format!("bad Schedule: {e}")))
}

/// `kubectl herd schedule`: creates the Schedule.
pub async fn create(
    cluster: &Cluster,
    args: &ScheduleArgs,
    io: &mut Io<'_>,
) -> Result<u8, CliError> {
    let schedule = schedule_manifest(args)?;
    let api: Api<Schedule> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let object = format!("Schedule {}", one_line(&args.name));
    let created = api
        .create(&PostParams::default(), &schedule)
        .await
        .map_err(|e| {
            api_error(
                &e,
                cluster.target("creating", &object, "Herd's CRDs may not be installed"),
            )
        })?;
    let _ = writeln!(
        io.stdout,
        "schedule.herd.dev/{} created; see its next slot with: kubectl herd schedules {}",
        one_line(&created.name_any()),
        one_line(&created.name_any())
    );
    Ok(EXIT_ANSWERED)
}

/// The Run `trigger` creates: the Schedule's template, labelled as the Schedule's (manual),
/// owned by it, named `<schedule>-manual-xxxxx`.
pub fn manual_run(schedule: &Schedule) -> Run {
    let template = &schedule.spec.run_template;
    let mut labels: BTreeMap<String, String> = template.metadata.labels.clone();
    labels.insert(SCHEDULE_LABEL.to_owned(), schedule.name_any());
    labels.insert(TRIGGER_LABEL.to_owned(), "manual".to_owned());
    let annotations = template.metadata.annotations.clone();
    Run {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-manual-", schedule.name_any())),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: kube::Resource::controller_owner_ref(schedule, &()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// `kubectl herd trigger`: starts the Schedule's Run now.
pub async fn trigger(cluster: &Cluster, name: &str, io: &mut Io<'_>) -> Result<u8, CliError> {
    let schedules: Api<Schedule> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let object = format!("Schedule {}", one_line(name));
    let schedule = schedules.get(name).await.map_err(|e| {
        api_error(
            &e,
            cluster.target("reading", &object, "kubectl herd schedules lists them"),
        )
    })?;
    let runs: Api<Run> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let created = runs
        .create(&PostParams::default(), &manual_run(&schedule))
        .await
        .map_err(|e| {
            api_error(
                &e,
                cluster.target(
                    "creating a Run of",
                    &object,
                    "Herd's CRDs may not be installed",
                ),
            )
        })?;
    let run = created.name_any();
    let _ = writeln!(
        io.stdout,
        "run.herd.dev/{} created; follow it with: kubectl herd follow {}",
        one_line(&run),
        one_line(&run)
    );
    Ok(EXIT_ANSWERED)
}

/// The Schedules table's header (`-A` adds NAMESPACE).
pub fn header(all_namespaces: bool) -> Vec<&'static str> {
    namespaced_header(
        all_namespaces,
        &[
            "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "NEXT", "READY", "AGE",
        ],
    )
}

/// A Schedule's row: its timetable, Runs going, when the last slot ran (ago) and the next
/// slot (its time), and whether it is ready (the reason when not).
pub fn row(schedule: &Schedule, all_namespaces: bool, now: Timestamp) -> Vec<String> {
    let status = schedule.status.clone().unwrap_or_default();
    let ready = find_condition(&status.conditions, condition_type::READY);
    let mut row = namespaced_row(all_namespaces, schedule);
    let timetable = match (&schedule.spec.schedule, &schedule.spec.at) {
        (Some(cron), _) => one_line(cron),
        (None, Some(at)) => format!("at {}", at.0),
        (None, None) => "-".to_owned(),
    };
    row.extend([
        one_line(&schedule.name_any()),
        timetable,
        one_line(schedule.spec.time_zone.as_deref().unwrap_or("UTC")),
        schedule.spec.suspend.to_string(),
        status.active_count.unwrap_or_default().to_string(),
        status
            .last_schedule_time
            .map_or("-".to_owned(), |t| age(t.0, now)),
        status
            .next_schedule_time
            .map_or("-".to_owned(), |t| t.0.to_string()),
        ready.map_or("Unknown".to_owned(), |c| {
            if c.status == herd_crds::condition::ConditionStatus::True {
                "True".to_owned()
            } else {
                format!("False ({})", one_line(&c.reason))
            }
        }),
        schedule
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or("-".to_owned(), |t| age(t.0, now)),
    ]);
    row
}

/// `kubectl herd schedules`.
pub async fn list(cluster: &Cluster, args: &CatalogArgs, io: &mut Io<'_>) -> Result<u8, CliError> {
    list_chosen(cluster, args, io, table).await
}

/// The Schedules as `kubectl herd schedules` prints them.
pub fn table(schedules: &[Schedule], all_namespaces: bool, now: Timestamp) -> String {
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|s| row(s, all_namespaces, now))
        .collect();
    render(&header(all_namespaces), &rows)
}

/// The Schedules `kubectl herd get` lists after the Runs (the same namespace and labels), or
/// nothing when there are none or they cannot be listed: they are an addition to the Runs,
/// and a cluster without the Schedule kind, or a user without `list` on it, still gets its Runs.
pub async fn beside_runs(
    cluster: &Cluster,
    all_namespaces: bool,
    selector: Option<&str>,
) -> Vec<Schedule> {
    let api: Api<Schedule> = if all_namespaces {
        Api::all(cluster.client.clone())
    } else {
        Api::namespaced(cluster.client.clone(), &cluster.namespace)
    };
    let params = ListParams {
        label_selector: selector.map(str::to_owned),
        ..ListParams::default()
    };
    api.list(&params).await.map(|l| l.items).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parsed(args: &[&str]) -> ScheduleArgs {
        let mut all = vec!["kubectl-herd", "schedule"];
        all.extend(args);
        match crate::cli::Cli::parse_from(all).command {
            crate::cli::Command::Schedule(args) => *args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_weekday_schedule_in_a_time_zone() {
        let args = parsed(&[
            "brief",
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Europe/Berlin",
            "researcher",
            "Brief me",
        ]);
        let schedule = schedule_manifest(&args).unwrap();
        assert_eq!(schedule.name_any(), "brief");
        assert_eq!(schedule.spec.schedule.as_deref(), Some("0 9 * * 1-5"));
        assert_eq!(schedule.spec.time_zone.as_deref(), Some("Europe/Berlin"));
        assert_eq!(schedule.spec.run_template.spec.agent_ref.name, "researcher");
        assert_eq!(schedule.spec.run_template.spec.task, "Brief me");
        assert!(!schedule.spec.suspend);
    }

    #[test]
    fn one_time_and_policy() {
        let args = parsed(&[
            "once",
            "--at",
            "2026-03-01T09:00:00+01:00",
            "--concurrency-policy",
            "Forbid",
            "researcher",
            "Brief me",
        ]);
        let schedule = schedule_manifest(&args).unwrap();
        assert_eq!(
            schedule.spec.at.map(|t| t.0.to_string()),
            Some("2026-03-01T08:00:00Z".to_owned())
        );
        assert_eq!(
            schedule.spec.concurrency_policy,
            herd_crds::schedule::ConcurrencyPolicy::Forbid
        );
        let neither = parsed(&["none", "researcher", "Brief me"]);
        assert!(schedule_manifest(&neither).is_err());
    }

    #[test]
    fn a_manual_run_is_the_schedules_own() {
        let args = parsed(&["brief", "--cron", "@daily", "researcher", "Brief me"]);
        let mut schedule = schedule_manifest(&args).unwrap();
        schedule.metadata.uid = Some("u1".to_owned());
        let run = manual_run(&schedule);
        assert_eq!(run.metadata.generate_name.as_deref(), Some("brief-manual-"));
        let labels = run.metadata.labels.unwrap();
        assert_eq!(labels[SCHEDULE_LABEL], "brief");
        assert_eq!(labels[TRIGGER_LABEL], "manual");
        let owner = &run.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.uid.as_str(), owner.controller), ("u1", Some(true)));
        assert_eq!(run.spec.task, "Brief me");
    }
}
