//! The Run controller: accepts a Run once its Agent is ready (writing the immutable snapshot),
//! creates its NetworkPolicy and then its Pod, follows the Pod and the runner's report to the
//! Run's end, enforces cancel, timeout and TTL, and applies its part of the status.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use herd_crds::agent::Agent;
use herd_crds::condition::{ConditionStatus, changed_condition, find_condition};
use herd_crds::duration::parse_duration;
use herd_crds::reason::{condition_type, run as reason};
use herd_crds::run::{Run, RunPhase, RunReport, RunStatus, phase_of};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use super::lifecycle::{Lifecycle, log_failure, under_lease};
use super::prologue::{Reconcile, begin};
use super::run_accept::{accept, load_snapshot};
use super::run_answers::judge_answers;
use super::run_changes::RunChanges;
use super::run_children::{cancel_children, children_of, parent_alive, set_children, wake_parents};
use super::run_context::{Context, Ids, RunCaches, RunSetup};
use super::run_objects::{Ensured, delete_pod, owned_by, probe_namespace_terminating};
use super::run_start::{Started, start_pod};
use super::run_trace::start_trace;
use super::skill::SkillWake;
use super::superseded::Superseded;
use crate::apply::apply_status;
use crate::config::RunPodConfig;
use crate::controller_state::{Shared, key};
use crate::decide::budget_admission::Hold;
use crate::decide::budget_hold::hold_run;
use crate::decide::pod_outcome::{PodOutcome, is_start_failure, pod_outcome};
use crate::decide::run_clocks::{elapsed, working_time_left};
use crate::decide::run_deadlines::{Limits, next_requeue, ttl_expired};
use crate::decide::run_events::succeeded_event;
use crate::decide::run_network_policy::{NetworkConfig, RunApiPeer};
use crate::decide::run_pod::{PodConfig, pod_name};
use crate::decide::run_snapshot::Snapshot;
use crate::decide::run_status::{
    AgentState, DEFAULT_ACCEPT_TIMEOUT, PodState, RunDecision, RunFacts, caused_by_loss,
    controller_part, is_terminal, next_status, start_deadline,
};
use crate::error::Error;
use crate::labels;
use crate::metrics::{AgentLabels, OutcomeLabels};
use crate::scope::{Scope, Synced, cached_watch, watch_config};
use crate::slim::{slim_metadata, slim_pod, slim_run};

/// The controller's name in metrics and logs.
pub const NAME: &str = "run";

/// The network settings of Run pods from the operator's flags.
fn network_config(runs: &RunPodConfig, operator_namespace: &str) -> NetworkConfig {
    NetworkConfig {
        dns_labels: [("k8s-app".to_owned(), "kube-dns".to_owned())].into(),
        run_api: match &runs.run_api_cidr {
            Some(cidr) => RunApiPeer::Cidr(cidr.clone()),
            None => RunApiPeer::Pods {
                namespace: operator_namespace.to_owned(),
                labels: [
                    ("app.kubernetes.io/name".to_owned(), "herd".to_owned()),
                    (
                        "app.kubernetes.io/component".to_owned(),
                        "operator".to_owned(),
                    ),
                ]
                .into(),
            },
        },
        run_api_port: runs.run_api_port,
        otlp: runs
            .runner_otlp_cidr
            .clone()
            .map(|cidr| (cidr, runs.runner_otlp_port)),
    }
}

/// Builds the controller for `scope` and registers its caches with admission; the returned
/// stream runs it until the operator stops (`lifecycle`). Long because every watch that wakes
/// a Run is set up here, each with why it wakes it.
pub fn controller(
    scope: Scope,
    shared: Arc<Shared>,
    setup: RunSetup,
    skills: SkillWake,
    lifecycle: Lifecycle,
) -> (impl Stream<Item = ()> + Send, Vec<Synced>, RunCaches) {
    let synced: Vec<Synced> = (0..4).map(|_| Synced::default()).collect();
    let (runs_synced, agents_synced, pods_synced, cms_synced) = (
        synced[0].clone(),
        synced[1].clone(),
        synced[2].clone(),
        synced[3].clone(),
    );
    let client = &shared.client;
    let admission = setup.admission.clone();
    let (config_maps, cm_stream) = cached_watch(
        scope.api::<ConfigMap>(client),
        watch_config().labels(labels::MANAGED_SELECTOR),
        cms_synced,
        slim_metadata,
    );
    let cm_skills = skills.clone();
    let cm_stream = cm_stream
        .inspect(move |event| cm_skills.config_map(event))
        .touched_objects();
    let (run_store, run_stream) = cached_watch(
        scope.api::<Run>(client),
        watch_config(),
        runs_synced,
        slim_run,
    );
    let (wake, woken) = futures::channel::mpsc::unbounded();
    let notify = admission.clone();
    let parents = wake.clone();
    let snapshots = config_maps.clone();
    let changes = RunChanges::default();
    let observer = changes.clone();
    let run_stream = run_stream
        .inspect(move |event| {
            observer.observe(event);
            notify.notify();
            wake_parents(&parents, event);
            skills.run(&snapshots, event);
        })
        .applied_objects();
    let (agents, agent_stream) = scope.cached::<Agent>(client, agents_synced, slim_metadata);
    let agent_stream = agent_stream.touched_objects();
    let (pods, pod_stream) = cached_watch(
        scope.api::<Pod>(client),
        watch_config().labels(labels::MANAGED_SELECTOR),
        pods_synced,
        slim_pod,
    );
    let notify = admission.clone();
    let pod_stream = pod_stream
        .inspect(move |_| notify.notify())
        .touched_objects();
    admission.register(
        scope,
        run_store.clone(),
        pods.clone(),
        vec![synced[0].clone(), synced[2].clone()],
        wake,
    );
    let runs = setup.runs;
    let pod_config = PodConfig {
        run_api_url: runs.run_api_url.clone(),
        runner_resources: runs.runner_resources.clone(),
        otlp_endpoint: runs.runner_otlp_endpoint.clone(),
    };
    let caches = RunCaches {
        runs: run_store.clone(),
        pods: pods.clone(),
        config_maps: config_maps.clone(),
        changes,
    };
    let context = Arc::new(Context {
        shared,
        runs: run_store.clone(),
        agents,
        pods,
        config_maps,
        pod_config,
        network: network_config(&runs, &setup.operator_namespace),
        tls: setup.tls,
        prepared: Ensured::default(),
        admission,
        superseded: Superseded::default(),
        images: runs,
    });
    let waiting = run_store.clone();
    let controller = Controller::for_stream(run_stream, run_store)
        .owns_stream(pod_stream)
        .owns_stream(cm_stream)
        .watches_stream(agent_stream, move |agent: Agent| {
            runs_waiting_for(&waiting, &agent)
        })
        .reconcile_on(woken);
    let stream = under_lease(controller, &lifecycle)
        .run(reconcile, error_policy, context)
        .map(log_failure("run"));
    (stream, synced, caches)
}

/// Runs not accepted yet that name `agent`.
fn runs_waiting_for(runs: &Store<Run>, agent: &Agent) -> Vec<ObjectRef<Run>> {
    let name = agent.name_any();
    let namespace = agent.namespace();
    runs.state()
        .into_iter()
        .filter(|run| run.namespace() == namespace && run.spec.agent_ref.name == name)
        .filter(|run| run.status.as_ref().is_none_or(|s| s.start_time.is_none()))
        .map(|run| ObjectRef::from_obj(run.as_ref()))
        .collect()
}

/// Reads, decides, creates what is missing, and applies the Run's status; a Run that is being
/// deleted, or whose namespace is, is not decided at all: what goes away with it (its Pod, its
/// snapshot) is no failure of the Run, so it gets no status, no Event and no metric.
pub async fn reconcile(run: Arc<Run>, ctx: Arc<Context>) -> Result<Action, Error> {
    if run.metadata.deletion_timestamp.is_some() {
        debug!(run = %run.name_any(), "being deleted: not decided");
        return Ok(Action::await_change());
    }
    match decide_run(run.clone(), ctx.clone()).await {
        Err(Error::NamespaceTerminating(namespace)) => {
            debug!(run = %run.name_any(), %namespace, "namespace being deleted: not decided");
            ctx.shared.succeeded(&key(NAME, run.as_ref()));
            Ok(Action::await_change())
        }
        other => other,
    }
}

/// One reconcile of a Run, in three steps: read (the snapshot, the Pod, the report), decide
/// ([`next_status`], pure), apply (the Pod the decision lacks, then the status, the Pod's
/// deletion and the Events). Before them, writes that bring a new version of the Run (its trace
/// context, the judged answers) are made alone; a finished Run only keeps its children and TTL.
async fn decide_run(run: Arc<Run>, ctx: Arc<Context>) -> Result<Action, Error> {
    let shared = &ctx.shared;
    let Some(start) = begin(shared, NAME, run.as_ref())? else {
        return Ok(Action::await_change());
    };
    let ids = Ids {
        name: start.name,
        namespace: start.namespace,
        uid: run.uid().ok_or(Error::MissingField("metadata.uid"))?,
    };
    if let Some(action) = write_before_deciding(&ctx, &start, &run, &ids).await? {
        return Ok(action);
    }
    let Reconcile {
        api, previous, now, ..
    } = &start;

    // Read.
    let read = read_run(&ctx, &run, &ids, previous, now).await?;
    if phase_of(&previous.conditions).is_finished() {
        return keep_finished(&ctx, &start, &run, &ids, read).await;
    }
    let observed = read_attempt(&ctx, api, &ids, previous).await?;
    let mut facts = facts(&ctx, &run, previous, &read, &observed, now);

    // Decide.
    let mut decision = next_status(previous, &facts);

    // Apply: the Pod the decision lacks, whose outcome (created, queued, refused...) is decided
    // again; then the status.
    let mut back_off = false;
    if lacks_pod(&decision, &facts, observed.attempt)
        && let Some(snap) = &read.snapshot
    {
        let time_left = working_time_left(&decision.status, read.limits.timeout, now);
        let started = start_pod(
            &ctx,
            &run,
            &ids,
            snap,
            read.written_now,
            observed.attempt,
            time_left,
        )
        .await?;
        let (blocked, over_budget) = note_start(&mut facts, started, &observed.pod_name);
        back_off = blocked;
        decision = next_status(previous, &facts);
        if let Some(hold) = &over_budget {
            hold_run(&mut decision.status, hold, run.metadata.generation, now);
        }
    }
    set_children(&mut decision.status, previous, &read.children);
    apply_decision(
        &ctx,
        &start,
        &run,
        &ids,
        &facts,
        &decision,
        observed.pod.as_ref(),
    )
    .await?;
    if back_off {
        // A quota or a missing input: nothing is watched that would wake us, so back off.
        return Ok(shared.failed(NAME, key(NAME, run.as_ref())));
    }
    shared.succeeded(&key(NAME, run.as_ref()));
    let mut wait = next_requeue(&decision.status, &read.created, read.limits, now);
    if !decision.stop_pod
        && decision.status.completion_time.is_none()
        && let Some(start_deadline) = start_deadline(&facts)
    {
        // Nothing else may happen to a Pod stuck pulling or unschedulable: wake for its timeout.
        wait = wait.min(start_deadline);
    }
    Ok(Action::requeue(wait.max(Duration::from_secs(1))))
}

/// Notes in `facts` what starting the Pod came to; returns whether the reconcile backs off (a
/// quota or a missing input: nothing watched would wake it) and the Budget's hold, if any.
fn note_start(facts: &mut RunFacts<'_>, started: Started, this_pod: &str) -> (bool, Option<Hold>) {
    match started {
        Started::Created => {
            facts.pod = PodState::Observed(PodOutcome::Pending);
            facts.pod_name = Some(this_pod.to_owned());
        }
        Started::Blocked(why) => {
            facts.blocked = Some(why);
            return (true, None);
        }
        Started::Queued(why) => facts.blocked = Some(why),
        Started::OverBudget(hold) => {
            facts.blocked = Some(hold.message.clone());
            return (false, Some(hold));
        }
        Started::Refused(why) => facts.invalid = Some(why),
        Started::SnapshotLost => facts.snapshot_lost = true,
    }
    (false, None)
}

/// What a reconcile read of the Run before looking at its Pod.
struct RunRead {
    /// Whether the Agent is ready (always, once the Run was accepted).
    agent: AgentState,
    /// What the Run was accepted with; `None` before, or when it was lost.
    snapshot: Option<Snapshot>,
    /// Whether the snapshot was written by this reconcile.
    written_now: bool,
    /// Why the Run cannot be accepted, if it cannot.
    invalid: Option<String>,
    /// Whether an accepted Run's snapshot is gone.
    snapshot_lost: bool,
    /// The limits in force.
    limits: Limits,
    /// The Run's children.
    children: Vec<Arc<Run>>,
    /// When the Run was created.
    created: Time,
}

/// What a reconcile read of the current attempt.
struct AttemptRead {
    /// The attempt, from 1.
    attempt: u32,
    /// Its Pod's name.
    pod_name: String,
    /// Whether the status names that Pod (it was created).
    named: bool,
    /// The Pod, when it exists and is the Run's.
    pod: Option<Pod>,
    /// The attempt's report, read live when it ends the attempt.
    report: Option<RunReport>,
}

/// Reads the current attempt's Pod and, when it ended the attempt, its report.
async fn read_attempt(
    ctx: &Context,
    api: &Api<Run>,
    ids: &Ids<'_>,
    previous: &RunStatus,
) -> Result<AttemptRead, Error> {
    let attempt = previous.attempt.unwrap_or(1);
    let pod_name = pod_name(ids.name, attempt);
    let named = previous.pod_name.as_deref() == Some(pod_name.as_str());
    Ok(AttemptRead {
        pod: current_pod(ctx, ids, &pod_name, named).await?,
        report: terminal_report(api, ids.name, previous, attempt).await?,
        attempt,
        pod_name,
        named,
    })
}

/// The facts the decision is taken on, from what was read.
fn facts<'a>(
    ctx: &Context,
    run: &'a Run,
    previous: &'a RunStatus,
    read: &RunRead,
    observed: &'a AttemptRead,
    now: &Time,
) -> RunFacts<'a> {
    let pod = observed.pod.as_ref();
    RunFacts {
        name: run.metadata.name.as_deref().unwrap_or_default(),
        generation: run.metadata.generation,
        created: read.created.clone(),
        agent_name: &run.spec.agent_ref.name,
        cancel: run.spec.cancel,
        agent: read.agent.clone(),
        timeout: read.limits.timeout,
        input_timeout: read.limits.input_timeout,
        retries: read.snapshot.as_ref().map_or(0, |s| s.run.retries),
        report: observed.report.as_ref().or(previous.report.as_ref()),
        answered: run.spec.responses.iter().map(|r| r.id.clone()).collect(),
        pod: match pod {
            Some(pod) => PodState::Observed(pod_outcome(pod)),
            None if observed.named => PodState::Gone,
            None => PodState::NotCreated,
        },
        pod_name: pod.map(|_| observed.pod_name.clone()),
        blocked: None,
        invalid: read.invalid.clone(),
        snapshot_lost: read.snapshot_lost,
        pod_created: pod.and_then(|pod| pod.metadata.creation_timestamp.clone()),
        pod_start_timeout: ctx.images.pod_start_timeout,
        now: now.clone(),
    }
}

/// Writes that must come before any decision, each alone: `Some` ends the reconcile. A cached
/// version this controller already wrote over waits for its successor; a missing trace context
/// or newly judged answers are written, and their watch event brings the next version (a
/// status write from this one would only conflict).
async fn write_before_deciding(
    ctx: &Context,
    start: &Reconcile<'_, Run>,
    run: &Arc<Run>,
    ids: &Ids<'_>,
) -> Result<Option<Action>, Error> {
    let version = run.resource_version();
    let done = || ctx.shared.succeeded(&key(NAME, run.as_ref()));
    if let Some(left) = ctx
        .superseded
        .stale_for(&ids.uid, version.as_deref(), Instant::now())
    {
        done();
        return Ok(Some(Action::requeue(left)));
    }
    if start_trace(&start.api, run, ids, &start.previous).await?
        || judge_answers(ctx, &start.api, run, ids, &start.previous).await?
    {
        ctx.superseded
            .wrote_over(&ids.uid, version.as_deref(), Instant::now());
        done();
        return Ok(Some(Action::await_change()));
    }
    Ok(None)
}

/// Reads what every Run's decision needs: the snapshot (taken now when the Run is not accepted
/// yet: every attempt must use exactly what the Run was accepted with, never a live Agent that
/// may have changed since), the limits and the children.
async fn read_run(
    ctx: &Context,
    run: &Run,
    ids: &Ids<'_>,
    previous: &RunStatus,
    now: &Time,
) -> Result<RunRead, Error> {
    let mut invalid = None;
    let (agent, snapshot, written_now, snapshot_lost) = if previous.start_time.is_some() {
        let snapshot = load_snapshot(ctx, ids).await?;
        let lost = snapshot.is_none();
        (AgentState::Ready, snapshot, false, lost)
    } else {
        let taken = accept(ctx, run, ids, &mut invalid).await?;
        (taken.agent, taken.snapshot, taken.written, false)
    };
    Ok(RunRead {
        limits: limits(run, snapshot.as_ref(), ctx, ids),
        children: children_of(ctx, ids, previous),
        created: run
            .metadata
            .creation_timestamp
            .clone()
            .unwrap_or_else(|| now.clone()),
        agent,
        snapshot,
        written_now,
        invalid,
        snapshot_lost,
    })
}

/// Whether the decision leaves the current attempt without the Pod it needs: not for a new
/// attempt (retried or resumed: its Pod is created on the next reconcile, under its own name),
/// nor a finished or suspended Run, which holds no Pod until answered.
fn lacks_pod(decision: &RunDecision, facts: &RunFacts<'_>, attempt: u32) -> bool {
    decision.status.completion_time.is_none()
        && decision.status.attempt.unwrap_or(1) == attempt
        && decision.status.phase != Some(RunPhase::Suspended)
        && facts.pod == PodState::NotCreated
}

/// Applies a going Run's decision: a namespace being deleted is told apart from a failure of
/// the Run first (it takes the Run's Pod, snapshot and Agent before the Run); then the Pod the
/// decision stops is deleted, and a changed status written, counted and announced.
async fn apply_decision(
    ctx: &Context,
    start: &Reconcile<'_, Run>,
    run: &Run,
    ids: &Ids<'_>,
    facts: &RunFacts<'_>,
    decision: &RunDecision,
    pod: Option<&Pod>,
) -> Result<(), Error> {
    let shared = &ctx.shared;
    let Reconcile { api, previous, .. } = start;
    let changed = decision.status != controller_part(previous);
    if changed
        && caused_by_loss(facts)
        && probe_namespace_terminating(&shared.client, ids.namespace).await?
    {
        return Err(Error::NamespaceTerminating(ids.namespace.to_owned()));
    }
    if (decision.stop_pod || operator_stopped(&decision.status))
        && let Some(pod) = pod
    {
        delete_pod(&shared.client, ids.namespace, &pod.name_any()).await?;
    }
    if changed {
        apply_status(api, run, &decision.status).await?;
        ctx.superseded
            .wrote_over(&ids.uid, run.resource_version().as_deref(), Instant::now());
        record_finish(shared, run, previous, &decision.status);
        announce(
            shared,
            run,
            previous,
            &decision.status,
            decision.retried.as_deref(),
        );
    }
    Ok(())
}

/// A finished Run: deleted once its TTL passed (unless its parent still runs); else the Pod
/// the operator stopped is deleted when it shows up, its children are ended, and its status
/// keeps following them. Only a TTL is still to come: its children and its Pod wake a finished
/// Run themselves (thousands of finished Runs hold no timers).
async fn keep_finished(
    ctx: &Context,
    start: &Reconcile<'_, Run>,
    run: &Run,
    ids: &Ids<'_>,
    read: RunRead,
) -> Result<Action, Error> {
    let shared = &ctx.shared;
    let Reconcile {
        api, previous, now, ..
    } = start;
    if ttl_expired(previous, read.limits.ttl_after_finished, now) && !parent_alive(ctx, run) {
        info!(
            run = ids.name,
            namespace = ids.namespace,
            "TTL passed: deleting the Run"
        );
        match api.delete(ids.name, &Default::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
        return Ok(Action::await_change());
    }
    if operator_stopped(previous) {
        // Level-based: a Pod that reached the cache only after the Run was ended (its event
        // reconciles the Run again) is stopped too.
        let this_pod = pod_name(ids.name, previous.attempt.unwrap_or(1));
        let cached = ctx
            .pods
            .get(&ObjectRef::new(&this_pod).within(ids.namespace));
        if cached.is_some_and(|pod| owned_by(pod.as_ref(), &ids.uid)) {
            delete_pod(&shared.client, ids.namespace, &this_pod).await?;
        }
    }
    // Any end of a parent ends its children; its status keeps following them.
    cancel_children(&shared.client, ids.namespace, &read.children).await?;
    let before = controller_part(previous);
    let mut status = before.clone();
    set_children(&mut status, previous, &read.children);
    if status != before {
        apply_status(api, run, &status).await?;
        ctx.superseded
            .wrote_over(&ids.uid, run.resource_version().as_deref(), Instant::now());
    }
    shared.succeeded(&key(NAME, run));
    Ok(match read.limits.ttl_after_finished {
        Some(_) => Action::requeue(next_requeue(previous, &read.created, read.limits, now)),
        None => Action::await_change(),
    })
}

/// The current attempt's report read live when it ends the attempt: the cache keeps no result,
/// and the Run's message carries its text.
async fn terminal_report(
    api: &Api<Run>,
    name: &str,
    previous: &RunStatus,
    attempt: u32,
) -> Result<Option<RunReport>, Error> {
    let ends = previous
        .report
        .as_ref()
        .is_some_and(|r| r.attempt == attempt && r.stop_reason.is_some_and(is_terminal));
    if !ends {
        return Ok(None);
    }
    Ok(api
        .get_opt(name)
        .await?
        .and_then(|run| run.status)
        .and_then(|status| status.report))
}

/// Whether the Run ended by the operator's decision (cancel, a deadline, an invalid spec, a
/// lost snapshot, a Pod that did not start in time), so its Pod, maybe still working or
/// waiting, is deleted; a Run the runner's report or exit ended lets its Pod finish.
fn operator_stopped(status: &RunStatus) -> bool {
    find_condition(&status.conditions, condition_type::SUCCEEDED).is_some_and(|c| {
        c.status == ConditionStatus::False
            && ([
                reason::CANCELLED,
                reason::TIMED_OUT,
                reason::INPUT_TIMED_OUT,
                reason::INVALID_SPEC,
                reason::SNAPSHOT_LOST,
            ]
            .contains(&c.reason.as_str())
                || is_start_failure(&c.reason))
    })
}

/// The limits in force: the snapshot's once accepted, else the Run's or its Agent's.
fn limits(run: &Run, snap: Option<&Snapshot>, ctx: &Context, ids: &Ids<'_>) -> Limits {
    if let Some(snap) = snap {
        return Limits {
            timeout: snap.run.timeout(),
            input_timeout: snap.run.input_timeout(),
            ttl_after_finished: snap
                .run
                .ttl_seconds_after_finished
                .map(|s| Duration::from_secs(u64::from(s))),
        };
    }
    let agent = ctx
        .agents
        .get(&ObjectRef::new(&run.spec.agent_ref.name).within(ids.namespace));
    let parse = |text: Option<&str>| text.and_then(|t| parse_duration(t).ok());
    let timeout = parse(run.spec.timeout.as_deref())
        .or_else(|| parse(agent.as_ref().map(|a| a.spec.run_defaults.timeout.as_str())))
        .unwrap_or(DEFAULT_ACCEPT_TIMEOUT);
    Limits {
        timeout,
        input_timeout: parse(run.spec.input_timeout.as_deref()).unwrap_or(DEFAULT_ACCEPT_TIMEOUT),
        ttl_after_finished: run
            .spec
            .ttl_seconds_after_finished
            .map(|s| Duration::from_secs(u64::from(s))),
    }
}

/// The Pod of the current attempt, when it is the Run's: from the cache, else live when the
/// status names it (created a moment ago, it may not be cached yet, and must not count as
/// deleted). One the status does not name and the cache lacks is taken as not created: creating
/// it finds it if it exists.
async fn current_pod(
    ctx: &Context,
    ids: &Ids<'_>,
    name: &str,
    named: bool,
) -> Result<Option<Pod>, Error> {
    if let Some(pod) = ctx.pods.get(&ObjectRef::new(name).within(ids.namespace)) {
        return Ok(owned_by(pod.as_ref(), &ids.uid).then(|| pod.as_ref().clone()));
    }
    if !named {
        return Ok(None);
    }
    let api: Api<Pod> = Api::namespaced(ctx.shared.client.clone(), ids.namespace);
    Ok(api
        .get_opt(name)
        .await?
        .filter(|pod| owned_by(pod, &ids.uid)))
}

/// Metrics of a Run that just finished.
fn record_finish(shared: &Shared, run: &Run, before: &RunStatus, after: &RunStatus) {
    let (Some(end), None) = (&after.completion_time, &before.completion_time) else {
        return;
    };
    let Some(succeeded) = find_condition(&after.conditions, condition_type::SUCCEEDED) else {
        return;
    };
    let start = after
        .start_time
        .as_ref()
        .or(run.metadata.creation_timestamp.as_ref())
        .unwrap_or(end);
    let usage = before
        .report
        .as_ref()
        .map(|r| r.usage.clone())
        .unwrap_or_default();
    shared.metrics.run_finished(
        OutcomeLabels {
            succeeded: format!("{:?}", succeeded.status),
            reason: succeeded.reason.clone(),
        },
        elapsed(start, end).as_secs_f64(),
        AgentLabels {
            namespace: run.namespace().unwrap_or_default(),
            agent: run.spec.agent_ref.name.clone(),
        },
        usage.input_tokens.saturating_add(usage.output_tokens),
    );
}

/// An Event and a log line on each retry and each change of `Succeeded` a person needs
/// ([`succeeded_event`]); a log line on every other change.
fn announce(
    shared: &Shared,
    run: &Run,
    before: &RunStatus,
    after: &RunStatus,
    retried: Option<&str>,
) {
    if let Some(why) = retried {
        shared.event(run, true, "Retrying", why.to_owned());
    }
    let Some((old, new)) = changed_condition(
        &before.conditions,
        &after.conditions,
        condition_type::SUCCEEDED,
    ) else {
        return;
    };
    info!(run = %run.name_any(), namespace = ?run.namespace(), reason = %new.reason, "run status changed");
    if let Some(event) = succeeded_event(old, new) {
        shared.event(run, event.warning, &event.reason, event.message);
    }
}

/// Backs off per Run: 1 s doubling to 5 min.
pub fn error_policy(run: Arc<Run>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.shared.reconcile_failed(NAME, run.as_ref(), error)
}
