//! Agents, Skills and Runs brought to each state the health checks tell apart, then read back
//! from the API server. Agents and Skills get there through the in-process operator (ready, a
//! missing Skill, a rejected SKILL.md, a disabled Skill), then with the operator stopped (a new
//! spec it has not observed, an object it never saw). What the operator cannot be brought to
//! cheaply here (an Agent spec it rejects, a Run's pod, answers and outcome) is the status the
//! operator's own decisions compute for those facts, written through the `status`
//! subresource, which the API server validates against the CRD schema.

use std::time::Duration;

use anyhow::{Context, bail};
use herd_crds::agent::AgentStatus;
use herd_crds::report::{Clarification, ClarificationType, StopReason, Usage};
use herd_crds::run::{RunReport, RunResult, RunStatus};
use herd_crds::schedule::{ScheduleSpec, ScheduleStatus};
use herd_e2e::TestEnv;
use herd_e2e::requests::{create_strict, get_object, merge_patch};
use herd_e2e::wait::wait_for;
use herd_operator::decide::agent_status::{self, AgentFindings};
use herd_operator::decide::pod_outcome::{AgentExit, PodOutcome};
use herd_operator::decide::run_status::{self, AgentState, PodState, RunFacts};
use herd_operator::decide::schedule_plan::{self, ScheduleFacts};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use serde_json::{Value, json};

use super::health::{Case, Flux, Verdict};
use crate::operator::support::{Rbac, operator_client, start_leader, test_config};

const WAIT: Duration = Duration::from_secs(60);

/// `(inProgress, failed, current)` for each verdict an object with a status can get.
pub(super) const CURRENT: Flux = Flux::Evaluated([false, false, true], Verdict::Current);
pub(super) const FAILED: Flux = Flux::Evaluated([false, true, false], Verdict::Failed);
const IN_PROGRESS: Flux = Flux::Evaluated([true, false, false], Verdict::InProgress);

fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n")
}

pub(super) fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn has(object: &Value, type_: &str, status: &str, reason: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == status && c["reason"] == reason)
}

pub(super) async fn create(
    client: &Client,
    namespace: &str,
    object: Value,
) -> anyhow::Result<Value> {
    create_strict(client, namespace, &object)
        .await?
        .map_err(anyhow::Error::msg)
}

/// The object once `check` holds for it.
async fn until(
    client: &Client,
    namespace: &str,
    kind: &str,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    wait_for(&format!("{kind} {name}: {what}"), WAIT, || async {
        let object = get_object(client, namespace, kind, name).await?;
        Ok(check(&object).then_some(object))
    })
    .await
}

fn agent(name: &str, skills: &[&str]) -> Value {
    json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": name},
        "spec": {"model": {"provider": "openai", "name": "m"}, "skills": skills, "soul": "Be brief."},
    })
}

fn skill(name: &str, content: &str, enabled: bool) -> Value {
    json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Skill",
        "metadata": {"name": name},
        "spec": {"content": content, "enabled": enabled},
    })
}

/// Agents and Skills in every state, as the API server returns them.
pub async fn agents_and_skills(env: &TestEnv) -> anyhow::Result<Vec<Case>> {
    let admin = env.client();
    let ns = env.namespace();
    let operator =
        operator_client(&admin, env.cluster().kubeconfig(), ns, Rbac::Namespaced).await?;
    let running = start_leader(test_config(&[ns], ns, "gitops")?, operator).await?;

    create(
        &admin,
        ns,
        skill("notes", &skill_md("notes", "Take notes."), true),
    )
    .await?;
    create(
        &admin,
        ns,
        skill("paused", &skill_md("paused", "Unused."), false),
    )
    .await?;
    create(
        &admin,
        ns,
        skill("broken", &skill_md("other", "Wrong name."), true),
    )
    .await?;
    create(&admin, ns, agent("ready", &["notes"])).await?;
    create(&admin, ns, agent("lost", &["missing"])).await?;

    let ready = until(&admin, ns, "Agent", "ready", "Ready", |o| {
        has(o, "Ready", "True", "Ready")
    })
    .await?;
    let lost = until(&admin, ns, "Agent", "lost", "SkillNotFound", |o| {
        has(o, "ResolvedRefs", "False", "SkillNotFound")
    })
    .await?;
    let notes = until(&admin, ns, "Skill", "notes", "Ready", |o| {
        has(o, "Ready", "True", "Ready")
    })
    .await?;
    let paused = until(&admin, ns, "Skill", "paused", "Disabled", |o| {
        has(o, "Ready", "False", "Disabled")
    })
    .await?;
    let broken = until(&admin, ns, "Skill", "broken", "NameMismatch", |o| {
        has(o, "Accepted", "False", "NameMismatch")
    })
    .await?;
    running.shutdown().await?;

    let digest = notes
        .pointer("/status/digest")
        .and_then(Value::as_str)
        .and_then(|d| d.get(..8))
        .context("the Skill's digest")?
        .to_owned();
    let mut cases = vec![
        Case::new("Agent ready", ready, ("Healthy", "Ready"), CURRENT),
        Case::new(
            "Agent with a missing Skill",
            lost,
            ("Degraded", "skill missing not found"),
            FAILED,
        ),
        Case::new(
            "Skill ready",
            notes,
            ("Healthy", format!("version {digest} rendered")),
            CURRENT,
        ),
        Case::new(
            "Skill disabled",
            paused,
            (
                "Suspended",
                "spec.enabled is false: no agent gets this skill",
            ),
            CURRENT,
        ),
        Case::new(
            "Skill rejected",
            broken,
            (
                "Degraded",
                "the frontmatter name `other` differs from metadata.name `broken`",
            ),
            FAILED,
        ),
    ];

    // The operator is stopped: a new spec stays unobserved, a new object without status.
    let soul = json!({"spec": {"soul": "Be briefer."}});
    merge_patch(&admin, ns, "Agent", "ready", &soul)
        .await?
        .map_err(anyhow::Error::msg)?;
    let content = json!({"spec": {"content": skill_md("notes", "Take short notes.")}});
    merge_patch(&admin, ns, "Skill", "notes", &content)
        .await?
        .map_err(anyhow::Error::msg)?;
    for (kind, name) in [("Agent", "ready"), ("Skill", "notes")] {
        let object = get_object(&admin, ns, kind, name).await?;
        if object.pointer("/metadata/generation") != Some(&json!(2))
            || object.pointer("/status/observedGeneration") != Some(&json!(1))
        {
            bail!("{kind} {name} should be at generation 2 with 1 observed: {object}");
        }
        cases.push(Case::new(
            format!("{kind} with a spec not observed yet"),
            object,
            (
                "Progressing",
                "waiting for the operator to observe generation 2",
            ),
            // Flux's own generation check decides before any expression, and inProgress
            // says the same.
            Flux::Evaluated([true, false, true], Verdict::InProgress),
        ));
    }
    let fresh = create(&admin, ns, agent("fresh", &[])).await?;
    cases.push(Case::new(
        "Agent the operator never saw",
        fresh,
        (
            "Progressing",
            "waiting for the operator to observe the Agent",
        ),
        Flux::Unevaluable,
    ));
    let fresh_skill = create(&admin, ns, skill("fresh", &skill_md("fresh", "New."), true)).await?;
    cases.push(Case::new(
        "Skill the operator never saw",
        fresh_skill,
        (
            "Progressing",
            "waiting for the operator to observe the Skill",
        ),
        Flux::Unevaluable,
    ));

    cases.push(rejected_agent(&admin, ns).await?);
    Ok(cases)
}

/// An Agent whose spec the operator rejects (`Accepted=False`, `InvalidSpec`): the status the
/// Agent controller computes for that finding.
async fn rejected_agent(admin: &Client, ns: &str) -> anyhow::Result<Case> {
    let created = create(admin, ns, agent("rejected", &[])).await?;
    let why = "spec.model.baseURL: \"http://x\" is not reachable: use https";
    let findings = AgentFindings {
        spec_error: Some(why.to_owned()),
        ..AgentFindings::default()
    };
    let generation = created
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let status = agent_status::next_status(&AgentStatus::default(), generation, &findings, &now());
    let patch = json!({"status": serde_json::to_value(&status)?});
    let object = merge_patch(admin, ns, "Agent", "rejected", &patch)
        .await?
        .map_err(anyhow::Error::msg)?;
    if !has(&object, "Accepted", "False", "InvalidSpec") {
        bail!("the Agent's status was not stored: {object}");
    }
    Ok(Case::new(
        "Agent rejected",
        object,
        ("Degraded", why),
        FAILED,
    ))
}

pub(super) fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// A Run's facts as its controller would find them, for [`run_status::next_status`].
struct RunState {
    name: &'static str,
    cancel: bool,
    agent: AgentState,
    pod: PodState,
    blocked: Option<&'static str>,
    report: Option<RunReport>,
}

impl RunState {
    fn new(name: &'static str, pod: PodState) -> RunState {
        RunState {
            name,
            cancel: false,
            agent: AgentState::Ready,
            pod,
            blocked: None,
            report: None,
        }
    }
}

fn report(stop_reason: Option<StopReason>) -> RunReport {
    RunReport {
        attempt: 1,
        seq: 3,
        title: Some("Release notes".into()),
        todos: vec![],
        usage: Usage::default(),
        clarification: None,
        approvals: Vec::new(),
        result: None,
        stop_reason,
        sandbox: None,
    }
}

/// The question of the Run waiting for input: quotes, a newline and non-ASCII, as a model may
/// write them, reach Argo CD's message unchanged.
const QUESTION: &str = "Which release: \"v1.2\" or \"v2.0\"?\nPick one ✓";

/// The failed Run's exit message, likewise.
const EXIT_MESSAGE: &str = "model said \"no\"\n→ stopped";

/// Runs in every state, as the API server returns them.
pub async fn runs(env: &TestEnv) -> anyhow::Result<Vec<Case>> {
    let admin = env.client();
    let ns = env.namespace();
    let running = PodState::Observed(PodOutcome::Running);
    let asking = RunState {
        report: Some(RunReport {
            clarification: Some(Clarification {
                id: "q1".into(),
                question: QUESTION.into(),
                kind: ClarificationType::ApproachChoice,
                context: None,
                options: vec!["v1.2".into(), "v2.0".into()],
                asked_at: None,
            }),
            ..report(Some(StopReason::InputRequired))
        }),
        ..RunState::new("asking", running.clone())
    };
    let succeeded = RunState {
        report: Some(RunReport {
            result: Some(RunResult {
                text: "## Fixed\n- Runs no longer wait.".into(),
                truncated: false,
                artifacts: vec![],
            }),
            ..report(Some(StopReason::Completed))
        }),
        ..RunState::new("succeeded", running.clone())
    };
    let states = [
        RunState {
            agent: AgentState::NotFound,
            ..RunState::new("pending", PodState::NotCreated)
        },
        RunState {
            blocked: Some("namespace at 1/1"),
            ..RunState::new("queued", PodState::NotCreated)
        },
        RunState::new("running", running.clone()),
        asking,
        succeeded,
        RunState::new(
            "failed",
            PodState::Observed(PodOutcome::AgentExited(AgentExit {
                exit_code: 1,
                oom_killed: false,
                message: EXIT_MESSAGE.into(),
            })),
        ),
        RunState {
            cancel: true,
            ..RunState::new("cancelled", running)
        },
    ];
    let mut objects = Vec::new();
    for state in &states {
        objects.push(run_in(&admin, ns, state).await?);
    }
    let [
        pending,
        queued,
        working,
        asking,
        succeeded,
        failed,
        cancelled,
    ] = <[Value; 7]>::try_from(objects).map_err(|_| anyhow::anyhow!("seven Runs"))?;
    let fresh = create(&admin, ns, run_object("fresh", false)).await?;
    Ok(vec![
        Case::new(
            "Run the operator never saw",
            fresh,
            ("Progressing", "waiting for the operator to admit the Run"),
            Flux::Unevaluable,
        ),
        Case::new(
            "Run whose Agent does not exist",
            pending,
            ("Progressing", "Agent release-writer not found"),
            IN_PROGRESS,
        ),
        Case::new(
            "Run queued",
            queued,
            ("Progressing", "namespace at 1/1"),
            IN_PROGRESS,
        ),
        Case::new(
            "Run working",
            working,
            ("Progressing", "the agent is working"),
            IN_PROGRESS,
        ),
        Case::new(
            "Run waiting for an answer",
            asking,
            ("Suspended", QUESTION),
            IN_PROGRESS,
        ),
        Case::new(
            "Run succeeded",
            succeeded,
            ("Healthy", "the agent answered"),
            CURRENT,
        ),
        Case::new(
            "Run failed",
            failed,
            (
                "Degraded",
                format!("the agent exited with code 1: {EXIT_MESSAGE}"),
            ),
            FAILED,
        ),
        Case::new(
            "Run cancelled",
            cancelled,
            ("Degraded", "cancelled by spec.cancel"),
            FAILED,
        ),
    ])
}

fn run_object(name: &str, cancel: bool) -> Value {
    json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
        "metadata": {"name": name},
        "spec": {"agentRef": {"name": "release-writer"}, "task": "Write the release notes.",
            "cancel": cancel},
    })
}

/// Creates the Run, writes the status the Run controller computes for `state` (and the
/// runner's report, as the run API would), and returns the stored Run, checked to be in the
/// phase that status means.
async fn run_in(admin: &Client, ns: &str, state: &RunState) -> anyhow::Result<Value> {
    let created = create(admin, ns, run_object(state.name, state.cancel)).await?;
    let creation: Time = serde_json::from_value(created["metadata"]["creationTimestamp"].clone())?;
    let facts = RunFacts {
        name: state.name,
        generation: created
            .pointer("/metadata/generation")
            .and_then(Value::as_i64),
        created: creation,
        agent_name: "release-writer",
        cancel: state.cancel,
        agent: state.agent.clone(),
        timeout: Duration::from_secs(3600),
        input_timeout: Duration::from_secs(3600),
        retries: 0,
        report: state.report.as_ref(),
        answered: Vec::new(),
        pod: state.pod.clone(),
        pod_name: matches!(state.pod, PodState::Observed(_)).then(|| format!("{}-1", state.name)),
        blocked: state.blocked.map(str::to_owned),
        invalid: None,
        snapshot_lost: false,
        pod_created: None,
        pod_start_timeout: Duration::from_secs(300),
        now: now(),
    };
    let decision = run_status::next_status(&RunStatus::default(), &facts);
    let status = RunStatus {
        report: state.report.clone(),
        ..decision.status
    };
    let phase = status.phase;
    let patch = json!({"status": serde_json::to_value(&status)?});
    let stored = merge_patch(admin, ns, "Run", state.name, &patch)
        .await?
        .map_err(anyhow::Error::msg)?;
    if stored.pointer("/status/phase") != Some(&serde_json::to_value(phase)?) {
        bail!("Run {}: the status was not stored: {stored}", state.name);
    }
    Ok(stored)
}

fn schedule_object(name: &str, spec: Value) -> Value {
    let mut object = json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Schedule",
        "metadata": {"name": name},
        "spec": {"schedule": "0 9 * * 1-5", "timeZone": "Europe/Berlin",
            "runTemplate": {"spec": {"agentRef": {"name": "release-writer"},
                "task": "Write the release notes."}}},
    });
    if let (Some(base), Some(extra)) = (object["spec"].as_object_mut(), spec.as_object()) {
        for (key, value) in extra {
            base.insert(key.clone(), value.clone());
        }
    }
    object
}

/// Creates the Schedule and writes the status the Schedule controller computes for it (or,
/// with `refused`, after the API server refused its Run with that message).
async fn schedule_in(
    admin: &Client,
    ns: &str,
    name: &str,
    spec: Value,
    refused: Option<&str>,
) -> anyhow::Result<Value> {
    let created = create(admin, ns, schedule_object(name, spec)).await?;
    let schedule_spec: ScheduleSpec = serde_json::from_value(created["spec"].clone())?;
    let creation: Time = serde_json::from_value(created["metadata"]["creationTimestamp"].clone())?;
    let previous = ScheduleStatus::default();
    let facts = ScheduleFacts {
        name,
        spec: &schedule_spec,
        generation: created
            .pointer("/metadata/generation")
            .and_then(Value::as_i64),
        created: creation.0,
        previous: &previous,
        runs: &[],
        now: now().0,
    };
    let plan = schedule_plan::plan(&facts);
    let status = match refused {
        Some(message) => schedule_plan::refused(&facts, &plan, message),
        None => plan.status,
    };
    let patch = json!({"status": serde_json::to_value(&status)?});
    merge_patch(admin, ns, "Schedule", name, &patch)
        .await?
        .map_err(anyhow::Error::msg)
}

/// Schedule: scheduling is Healthy/Current, suspended Suspended/Current, a bad cron expression
/// or a refused Run Degraded/Failed, a spec not observed yet or no status Progressing.
pub async fn schedules(env: &TestEnv) -> anyhow::Result<Vec<Case>> {
    let admin = env.client();
    let ns = env.namespace();
    let mut cases = vec![
        Case::new(
            "Schedule scheduling",
            schedule_in(&admin, ns, "weekdays", json!({}), None).await?,
            ("Healthy", "Runs are created at their slots"),
            CURRENT,
        ),
        Case::new(
            "Schedule suspended",
            schedule_in(&admin, ns, "paused", json!({"suspend": true}), None).await?,
            ("Suspended", "suspended: no Run is created"),
            CURRENT,
        ),
        Case::new(
            "Schedule whose Run was refused",
            schedule_in(&admin, ns, "refused", json!({}), Some("exceeded quota")).await?,
            ("Degraded", "the Run was refused: exceeded quota"),
            FAILED,
        ),
    ];
    let bad = schedule_in(
        &admin,
        ns,
        "minute-61",
        json!({"schedule": "61 * * * *"}),
        None,
    )
    .await?;
    let why = condition(&bad, "Accepted")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    if !why.starts_with("schedule \"61 * * * *\" is invalid: ") {
        bail!("the Accepted message: {why}");
    }
    cases.push(Case::new(
        "Schedule with a bad cron expression",
        bad,
        ("Degraded", why),
        FAILED,
    ));
    merge_patch(
        &admin,
        ns,
        "Schedule",
        "weekdays",
        &json!({"spec": {"suspend": true}}),
    )
    .await?
    .map_err(anyhow::Error::msg)?;
    cases.push(Case::new(
        "Schedule with a spec not observed yet",
        get_object(&admin, ns, "Schedule", "weekdays").await?,
        (
            "Progressing",
            "waiting for the operator to observe generation 2",
        ),
        Flux::Evaluated([true, false, true], Verdict::InProgress),
    ));
    cases.push(Case::new(
        "Schedule the operator never saw",
        create(&admin, ns, schedule_object("fresh", json!({}))).await?,
        (
            "Progressing",
            "waiting for the operator to observe the Schedule",
        ),
        Flux::Unevaluable,
    ));
    Ok(cases)
}
