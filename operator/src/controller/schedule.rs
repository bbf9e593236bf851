//! The Schedule controller: creates each slot's Run (named after the slot, owned by the
//! Schedule, labelled `herd.dev/schedule`), cancels or deletes Runs as the concurrency policy
//! and history limits say, and writes the Schedule's status. Woken by its Runs' changes and at
//! the next slot.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use herd_crds::condition::{ConditionStatus, changed_condition, find_condition};
use herd_crds::reason::{condition_type, schedule as reason};
use herd_crds::run::{Run, RunSpec};
use herd_crds::schedule::Schedule;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Resource, ResourceExt};
use tracing::{debug, info};

use super::lifecycle::{Lifecycle, log_failure, under_lease};
use super::prologue::begin;
use super::run_objects::{namespace_terminating, owned_by};
use crate::apply::apply_status;
use crate::controller_state::{FIELD_MANAGER, Shared, key};
use crate::decide::schedule_plan::{
    Outcome, ScheduleFacts, SchedulePlan, ScheduleRun, plan, refused,
};
use crate::error::Error;
use crate::labels;
use crate::scope::{Scope, Synced, cached_watch, watch_config};
use crate::slim::slim_metadata;

/// The controller's name in metrics and logs.
pub const NAME: &str = "schedule";

/// What the Schedule controller reads.
pub struct Context {
    /// Shared operator state.
    pub shared: Arc<Shared>,
    /// The Runs of the scope labelled `herd.dev/schedule`.
    pub runs: Store<Run>,
}

/// Builds the controller for `scope`; the returned stream runs it until the operator stops
/// (`lifecycle`).
pub fn controller(
    scope: Scope,
    shared: Arc<Shared>,
    lifecycle: Lifecycle,
) -> (impl Stream<Item = ()> + Send, Vec<Synced>) {
    let synced: Vec<Synced> = (0..2).map(|_| Synced::default()).collect();
    let client = &shared.client;
    let (schedules, schedule_stream) =
        scope.cached::<Schedule>(client, synced[0].clone(), slim_metadata);
    let (runs, run_stream) = cached_watch(
        scope.api::<Run>(client),
        watch_config().labels(labels::SCHEDULE),
        synced[1].clone(),
        slim_metadata,
    );
    let context = Arc::new(Context {
        shared,
        runs: runs.clone(),
    });
    let controller = Controller::for_stream(schedule_stream.applied_objects(), schedules)
        .watches_stream(run_stream.touched_objects(), |run: Run| schedule_of(&run));
    let stream = under_lease(controller, &lifecycle)
        .run(reconcile, error_policy, context)
        .map(log_failure("schedule"));
    (stream, synced)
}

/// The Schedule a Run's label names.
fn schedule_of(run: &Run) -> Option<ObjectRef<Schedule>> {
    let schedule = run.labels().get(labels::SCHEDULE)?;
    Some(ObjectRef::new(schedule).within(&run.namespace()?))
}

/// Reads the Schedule's Runs, decides, creates, cancels and deletes Runs, and writes the
/// status when it changed.
pub async fn reconcile(schedule: Arc<Schedule>, ctx: Arc<Context>) -> Result<Action, Error> {
    let shared = &ctx.shared;
    let Some(start) = begin(shared, NAME, schedule.as_ref())? else {
        return Ok(Action::await_change());
    };
    let current = start.mark_reconciling(schedule.as_ref()).await?;
    let uid = schedule
        .metadata
        .uid
        .as_deref()
        .ok_or(Error::MissingField("metadata.uid"))?;
    let now = start.now.0;
    let runs: Vec<ScheduleRun> = ctx
        .runs
        .state()
        .iter()
        .filter(|run| run.metadata.namespace.as_deref() == Some(start.namespace))
        .filter(|run| owned_by(run.as_ref(), uid))
        .map(|run| view(run, now))
        .collect();
    let facts = ScheduleFacts {
        name: start.name,
        spec: &schedule.spec,
        generation: schedule.metadata.generation,
        created: schedule
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0),
        previous: &start.previous,
        runs: &runs,
        now,
    };
    let plan = plan(&facts);

    let run_api: Api<Run> = Api::namespaced(shared.client.clone(), start.namespace);
    retire(shared, &run_api, &schedule, &plan).await?;
    if let Some(slot) = plan.forbidden {
        debug!(schedule = %start.name, %slot, "slot waits: a Run goes and the policy is Forbid");
    }
    let mut status = plan.status.clone();
    if let Some((slot, name)) = &plan.create {
        let created = create_slot_run(shared, &run_api, &schedule, &plan, *slot, name).await?;
        match &created {
            Created::Refused(message) => status = refused(&facts, &plan, message),
            Created::NamespaceTerminating => return Ok(Action::await_change()),
            Created::Yes | Created::Existed => {}
        }
        if plan.suspend_after_create && !matches!(created, Created::Refused(_)) {
            suspend(&start.api, start.name).await?;
        }
    }
    if status != start.previous {
        apply_status(&start.api, current.as_ref(), &status).await?;
        announce(&schedule, &start.previous, &status);
    }
    shared.succeeded(&key(NAME, schedule.as_ref()));
    Ok(plan
        .requeue
        .map_or_else(Action::await_change, Action::requeue))
}

/// Cancels the Runs the plan replaces (each with an Event) and deletes those past history.
async fn retire(
    shared: &Shared,
    run_api: &Api<Run>,
    schedule: &Schedule,
    plan: &SchedulePlan,
) -> Result<(), Error> {
    for name in &plan.cancel {
        cancel(run_api, name).await?;
        shared.event(
            schedule,
            false,
            reason::RUN_REPLACED,
            format!("cancelled Run {name} for a new slot (concurrencyPolicy Replace)"),
        );
    }
    for name in &plan.delete {
        delete(run_api, name).await?;
    }
    Ok(())
}

/// Creates the Run of the slot at `slot`, and says so in Events: created (and whether slots
/// were missed), or refused.
async fn create_slot_run(
    shared: &Shared,
    run_api: &Api<Run>,
    schedule: &Arc<Schedule>,
    plan: &SchedulePlan,
    slot: Timestamp,
    name: &str,
) -> Result<Created, Error> {
    let created = create(run_api, schedule, slot, name).await?;
    let schedule_name = schedule.name_any();
    match &created {
        Created::Yes => {
            info!(schedule = %schedule_name, run = %name, %slot, "created the slot's Run");
            shared.event(
                schedule.as_ref(),
                false,
                reason::RUN_CREATED,
                format!("created Run {name} for the slot at {slot}"),
            );
            if let Some(missed) = plan.too_many_missed {
                shared.event(
                    schedule.as_ref(),
                    true,
                    reason::TOO_MANY_MISSED,
                    format!(
                        "more than {} slots were missed ({missed} counted); only the latest, {slot}, was run",
                        crate::decide::schedule_plan::TOO_MANY_MISSED
                    ),
                );
            }
        }
        Created::Existed => {
            debug!(schedule = %schedule_name, run = %name, "the slot's Run exists")
        }
        Created::Refused(message) => shared.event(
            schedule.as_ref(),
            true,
            reason::RUN_REJECTED,
            format!("the Run {name} was refused: {message}"),
        ),
        Created::NamespaceTerminating => {}
    }
    Ok(created)
}

/// A Run as the decision sees it.
fn view(run: &Run, now: Timestamp) -> ScheduleRun {
    let conditions = run
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let outcome = match find_condition(conditions, condition_type::SUCCEEDED).map(|c| c.status) {
        Some(ConditionStatus::True) => Outcome::Succeeded,
        Some(ConditionStatus::False) => Outcome::Failed,
        Some(ConditionStatus::Unknown) | None => Outcome::Going,
    };
    let completed = run.status.as_ref().and_then(|s| s.completion_time.as_ref());
    let created = run.metadata.creation_timestamp.as_ref();
    ScheduleRun {
        name: run.name_any(),
        slot: run
            .annotations()
            .get(labels::SCHEDULED_AT)
            .and_then(|slot| slot.parse().ok()),
        outcome,
        cancelled: run.spec.cancel,
        finished_or_created: completed.or(created).map_or(now, |t| t.0),
    }
}

/// What creating a slot's Run came to.
enum Created {
    Yes,
    /// It was created before (a restart, a second leader): the slot is done.
    Existed,
    /// The API server refused it (validation, quota, admission), with its message.
    Refused(String),
    NamespaceTerminating,
}

/// The Run of `slot`: the template, labelled and annotated, owned by the Schedule.
pub fn slot_run(schedule: &Schedule, slot: Option<Timestamp>, name: &str) -> Run {
    let template = &schedule.spec.run_template;
    let mut labels = template.metadata.labels.clone();
    labels.insert(labels::SCHEDULE.to_owned(), schedule.name_any());
    let mut annotations = template.metadata.annotations.clone();
    match slot {
        Some(slot) => {
            annotations.insert(labels::SCHEDULED_AT.to_owned(), slot.to_string());
        }
        None => {
            labels.insert(labels::TRIGGER.to_owned(), "manual".to_owned());
        }
    }
    Run {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: schedule.namespace(),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: schedule.controller_owner_ref(&()).map(|owner| vec![owner]),
            ..ObjectMeta::default()
        },
        spec: RunSpec {
            responses: Vec::new(),
            cancel: false,
            parent_ref: None,
            subagent_type: None,
            ..template.spec.clone()
        },
        status: None,
    }
}

async fn create(
    runs: &Api<Run>,
    schedule: &Schedule,
    slot: Timestamp,
    name: &str,
) -> Result<Created, Error> {
    let run = slot_run(schedule, Some(slot), name);
    match runs.create(&PostParams::default(), &run).await {
        Ok(_) => Ok(Created::Yes),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(Created::Existed),
        Err(kube::Error::Api(status)) if namespace_terminating(&status) => {
            Ok(Created::NamespaceTerminating)
        }
        Err(kube::Error::Api(status))
            if (400..500).contains(&status.code) && status.code != 429 =>
        {
            Ok(Created::Refused(status.message.clone()))
        }
        Err(error) => Err(error.into()),
    }
}

/// A merge patch of the operator's (its field manager named in managedFields).
fn merge_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Sets `spec.cancel` on a going Run; one already gone is fine.
async fn cancel(runs: &Api<Run>, name: &str) -> Result<(), Error> {
    let patch = serde_json::json!({"spec": {"cancel": true}});
    match runs
        .patch(name, &merge_params(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Deletes a finished Run past the history limit, with what it owns.
async fn delete(runs: &Api<Run>, name: &str) -> Result<(), Error> {
    match runs.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// A one-shot `at` Schedule suspends itself once its Run is created.
async fn suspend(schedules: &Api<Schedule>, name: &str) -> Result<(), Error> {
    let patch = serde_json::json!({"spec": {"suspend": true}});
    schedules
        .patch(name, &merge_params(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// A log line when `Ready` changes.
fn announce(
    schedule: &Schedule,
    before: &herd_crds::schedule::ScheduleStatus,
    after: &herd_crds::schedule::ScheduleStatus,
) {
    let Some((_, new)) =
        changed_condition(&before.conditions, &after.conditions, condition_type::READY)
    else {
        return;
    };
    info!(schedule = %schedule.name_any(), namespace = ?schedule.namespace(), ready = ?new.status, reason = %new.reason, message = %new.message, "schedule status changed");
}

/// Backs off per Schedule: 1 s doubling to 5 min.
pub fn error_policy(schedule: Arc<Schedule>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.shared.reconcile_failed(NAME, schedule.as_ref(), error)
}
