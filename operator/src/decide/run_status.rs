//! A Run's controller-owned status from what its controller found: the Agent before
//! acceptance, then the runner's report, the operator's own deadlines and cancel, and the
//! Pod. A terminal report of the current attempt decides; the Pod decides only when there is
//! none (docs/operator.md, "How a Run ends").

use std::time::Duration;

use herd_crds::condition::{Condition, ConditionStatus, find_condition};
use herd_crds::reason::{condition_type, run as reason};
use herd_crds::report::StopReason;
use herd_crds::run::{RunPhase, RunReport, RunStatus, phase_of};
use herd_crds::wire::{FALLBACK_EXIT_CODE, FallbackReport};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::awaited::{Awaited, awaited};
use super::conditions::merge;
use super::pod_outcome::{AgentExit, PodOutcome, StartFailure};
use super::run_clocks::{elapsed, next_clocks, working_time};

/// How long a Run waits for its Agent when no timeout is known yet.
pub const DEFAULT_ACCEPT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The Agent as seen by a Run not accepted yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentState {
    /// Ready: the Run can be accepted (its snapshot is written).
    Ready,
    /// No Agent of that name.
    NotFound,
    /// The Agent exists but is not ready; its `Ready` message.
    NotReady(String),
}

/// The current attempt's Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Not created yet (queued, or waiting for an input ConfigMap).
    NotCreated,
    /// Created and observed.
    Observed(PodOutcome),
    /// Created, then deleted by someone other than the operator.
    Gone,
}

/// Everything the Run controller found, for [`next_status`].
#[derive(Clone, Debug, PartialEq)]
pub struct RunFacts<'a> {
    /// The Run's `metadata.name`.
    pub name: &'a str,
    /// The Run's `metadata.generation`.
    pub generation: Option<i64>,
    /// The Run's `metadata.creationTimestamp`.
    pub created: Time,
    /// `spec.agentRef.name`.
    pub agent_name: &'a str,
    /// `spec.cancel`.
    pub cancel: bool,
    /// The Agent, for a Run not accepted yet.
    pub agent: AgentState,
    /// The Run's timeout (spec, else the Agent's default; [`DEFAULT_ACCEPT_TIMEOUT`] when the
    /// Agent is unknown).
    pub timeout: Duration,
    /// The Run's input timeout.
    pub input_timeout: Duration,
    /// `runDefaults.retries` of the snapshot.
    pub retries: u32,
    /// `status.report`, as the run API wrote it.
    pub report: Option<&'a RunReport>,
    /// The ids `spec.responses` answers: a suspended Run resumes once its question's is here.
    pub answered: Vec<String>,
    /// The current attempt's Pod.
    pub pod: PodState,
    /// The name of the current attempt's Pod, once created.
    pub pod_name: Option<String>,
    /// Why the Pod cannot be created yet (an input ConfigMap missing, a quota), if so.
    pub blocked: Option<String>,
    /// Why the Run can never start (the API server refused its Pod, PVC or NetworkPolicy, or
    /// its snapshot cannot be taken), if so: `InvalidSpec`.
    pub invalid: Option<String>,
    /// The accepted Run's snapshot ConfigMap is gone (or replaced by another object's):
    /// `SnapshotLost`, since no attempt may run without what the Run was accepted with.
    pub snapshot_lost: bool,
    /// The current attempt's Pod's `metadata.creationTimestamp`, once observed.
    pub pod_created: Option<Time>,
    /// How long a Pod that shows it will not start may take from its creation
    /// (`--pod-start-timeout`) before the attempt fails.
    pub pod_start_timeout: Duration,
    /// The reconcile's clock.
    pub now: Time,
}

/// What the Run controller writes: its whole part of the status (never `report`).
#[derive(Clone, Debug, PartialEq)]
pub struct RunDecision {
    /// The controller's part of the status.
    pub status: RunStatus,
    /// Why a new attempt starts, when an infrastructure failure is retried.
    pub retried: Option<String>,
    /// The operator gave up on the attempt's Pod (it did not start in time): delete it, else
    /// it would keep pulling or waiting for a node.
    pub stop_pod: bool,
}

/// `Succeeded` at the end: status, reason and message.
struct Outcome {
    status: ConditionStatus,
    reason: &'static str,
    message: String,
}

impl Outcome {
    fn going(reason: &'static str, message: impl Into<String>) -> Self {
        Outcome {
            status: ConditionStatus::Unknown,
            reason,
            message: message.into(),
        }
    }

    fn failed(reason: &'static str, message: impl Into<String>) -> Self {
        Outcome {
            status: ConditionStatus::False,
            reason,
            message: message.into(),
        }
    }
}

/// The controller's part of the status after a reconcile: a finished Run keeps its status;
/// else what the attempt shows ([`AttemptView`]) decides the outcome ([`outcome`]), from which
/// the conditions, clocks and attempt counters follow ([`status_after`]).
pub fn next_status(previous: &RunStatus, facts: &RunFacts<'_>) -> RunDecision {
    if let Some(done) = find_condition(&previous.conditions, condition_type::SUCCEEDED)
        && done.status != ConditionStatus::Unknown
    {
        let mut status = controller_part(previous);
        status.phase = Some(phase_of(&status.conditions));
        return RunDecision {
            status,
            retried: None,
            stop_pod: false,
        };
    }
    let view = AttemptView::of(previous, facts);
    let step = outcome(previous, facts, &view);
    status_after(previous, facts, &view, step)
}

/// What the previous status and the facts show of the current attempt.
struct AttemptView<'a> {
    /// Whether the Run is (or is now) accepted.
    accepted: bool,
    /// When it was accepted.
    start_time: Option<Time>,
    /// The current attempt, from 1.
    attempt: u32,
    /// The current attempt's report.
    report: Option<&'a RunReport>,
    /// The question, or the tool calls held for approval: both wait for `spec.responses`.
    question: Option<Awaited>,
    /// Attempts that resumed from a checkpoint.
    resumptions: u32,
    /// Retries allowed: resumed attempts are no retries, so the budget grows by them.
    retries: u32,
    /// Whether the Run is suspended (no Pod until answered).
    suspended: bool,
    /// Since when the open question waits.
    asked_since: Option<Time>,
}

impl<'a> AttemptView<'a> {
    fn of(previous: &RunStatus, facts: &RunFacts<'a>) -> Self {
        let accepted = previous.start_time.is_some() || facts.agent == AgentState::Ready;
        let attempt = previous.attempt.unwrap_or(1);
        let report = facts.report.filter(|r| r.attempt == attempt);
        let question = report.and_then(awaited);
        let resumptions = previous.resumptions.unwrap_or(0);
        let asked_since = find_condition(&previous.conditions, condition_type::INPUT_REQUIRED)
            .filter(|c| c.status == ConditionStatus::True && question.is_some())
            .map(|c| c.last_transition_time.clone());
        AttemptView {
            accepted,
            start_time: previous
                .start_time
                .clone()
                .or_else(|| accepted.then(|| facts.now.clone())),
            attempt,
            report,
            question,
            resumptions,
            retries: facts.retries.saturating_add(resumptions),
            suspended: phase_of(&previous.conditions) == RunPhase::Suspended,
            asked_since,
        }
    }
}

/// An outcome and what it does to the attempt.
struct Step {
    /// `Succeeded` after this reconcile.
    outcome: Outcome,
    /// Why a new attempt starts, when one does after a failure.
    retried: Option<String>,
    /// Whether a new attempt resumes from the checkpoint with the answer.
    resumed: bool,
    /// Whether the current Pod is deleted (one stuck starting).
    stop_pod: bool,
}

impl From<Outcome> for Step {
    fn from(outcome: Outcome) -> Self {
        Step {
            outcome,
            retried: None,
            resumed: false,
            stop_pod: false,
        }
    }
}

/// The outcome, first match wins: not accepted, the runner's terminal report, a lost snapshot,
/// an invalid spec, cancel, the timeout, the input timeout, a suspended Run's answer, and last
/// what the Pod shows.
fn outcome(previous: &RunStatus, facts: &RunFacts<'_>, view: &AttemptView<'_>) -> Step {
    if !view.accepted {
        return not_accepted(facts).into();
    }
    if let Some(stop) = view
        .report
        .and_then(|r| r.stop_reason)
        .filter(|s| is_terminal(*s))
    {
        let text = view
            .report
            .and_then(|r| r.result.as_ref())
            .map(|r| r.text.as_str());
        return stopped(stop, text).into();
    }
    if facts.snapshot_lost {
        return Outcome::failed(
            reason::SNAPSHOT_LOST,
            format!(
                "snapshot ConfigMap {} was deleted while the Run was active",
                snapshot_name(facts.name)
            ),
        )
        .into();
    }
    if let Some(why) = &facts.invalid {
        return Outcome::failed(reason::INVALID_SPEC, why.clone()).into();
    }
    if facts.cancel {
        return Outcome::failed(reason::CANCELLED, "cancelled by spec.cancel").into();
    }
    if view.start_time.is_some() && working_time(previous, &facts.now) >= facts.timeout {
        return Outcome::failed(
            reason::TIMED_OUT,
            format!("the timeout of {} passed", human(facts.timeout)),
        )
        .into();
    }
    if view
        .asked_since
        .as_ref()
        .is_some_and(|asked| passed(asked, facts.input_timeout, &facts.now))
    {
        return input_timed_out(facts.input_timeout).into();
    }
    if view.suspended {
        // No Pod runs: whatever is left of the suspended attempt's Pod does not matter.
        return match view
            .question
            .as_ref()
            .filter(|q| !q.answered_in(&facts.answered))
        {
            Some(q) => Outcome::going(reason::SUSPENDED, suspended_message(&q.question)).into(),
            None => Step {
                resumed: true,
                ..Outcome::going(
                    reason::QUEUED,
                    format!(
                        "attempt {} resumes from the checkpoint with the answer",
                        view.attempt + 1
                    ),
                )
                .into()
            },
        };
    }
    pod_step(facts, view)
}

/// The outcome of a going attempt from what its Pod shows.
fn pod_step(facts: &RunFacts<'_>, view: &AttemptView<'_>) -> Step {
    let (attempt, retries) = (view.attempt, view.retries);
    let question = view.question.as_ref();
    let mut retried = None;
    let mut stop_pod = false;
    let outcome = match &facts.pod {
        PodState::NotCreated => {
            Outcome::going(reason::QUEUED, facts.blocked.clone().unwrap_or_default())
        }
        PodState::Observed(PodOutcome::Pending) => Outcome::going(
            reason::POD_PENDING,
            facts.pod_name.as_deref().map_or_else(
                || "the pod is starting".to_owned(),
                |pod| format!("pod {pod} is starting"),
            ),
        ),
        PodState::Observed(PodOutcome::NotStarting(failure)) => {
            if start_timed_out(facts) {
                stop_pod = true;
                start_failed(attempt, retries, facts, failure, &mut retried)
            } else {
                Outcome::going(failure.reason, failure.message.clone())
            }
        }
        PodState::Observed(PodOutcome::Running) => match question {
            Some(q) => Outcome::going(q.reason, q.question.clone()),
            None => Outcome::going(reason::RUNNING, "the agent is working"),
        },
        PodState::Observed(PodOutcome::AgentExited(exit)) => match question {
            // The runner suspended: its checkpoint is posted, it ended without a result.
            // Its Pod, ended, holds nothing and is kept like an earlier attempt's: deleting
            // it would race a reconcile that has not seen the suspension yet.
            Some(q) if exit.exit_code == 0 => {
                Outcome::going(reason::SUSPENDED, suspended_message(&q.question))
            }
            _ => exited(exit),
        },
        PodState::Observed(PodOutcome::DeadlineExceeded) => {
            if view.asked_since.is_some() {
                input_timed_out(facts.input_timeout)
            } else {
                Outcome::failed(
                    reason::TIMED_OUT,
                    "the pod reached its activeDeadlineSeconds",
                )
            }
        }
        PodState::Observed(PodOutcome::Evicted(cause)) => {
            infrastructure(attempt, retries, reason::EVICTED, cause, &mut retried)
        }
        PodState::Observed(PodOutcome::Infrastructure(cause)) => {
            infrastructure(attempt, retries, reason::POD_FAILED, cause, &mut retried)
        }
        PodState::Observed(PodOutcome::Deleted) | PodState::Gone => infrastructure(
            attempt,
            retries,
            reason::POD_FAILED,
            "the pod was deleted",
            &mut retried,
        ),
    };
    Step {
        outcome,
        retried,
        resumed: false,
        stop_pod,
    }
}

/// The status an outcome leads to: `Succeeded` and `InputRequired`, the clocks, the attempt
/// (the next one after a retry or a resumption) and the Pod it holds.
fn status_after(
    previous: &RunStatus,
    facts: &RunFacts<'_>,
    view: &AttemptView<'_>,
    step: Step,
) -> RunDecision {
    let Step {
        outcome,
        retried,
        resumed,
        stop_pod,
    } = step;
    let next_attempt = if retried.is_some() || resumed {
        view.attempt + 1
    } else {
        view.attempt
    };
    let finished = outcome.status != ConditionStatus::Unknown;
    let open_question = (!finished && retried.is_none() && !resumed)
        .then_some(view.question.as_ref())
        .flatten();
    let input_required = input_required(previous, facts, open_question, finished);
    let succeeded = Condition::new(
        condition_type::SUCCEEDED,
        outcome.status,
        outcome.reason,
        outcome.message,
        facts.generation,
        facts.now.clone(),
    );
    let conditions = merge(&previous.conditions, vec![succeeded, input_required]);
    let waiting = find_condition(&conditions, condition_type::INPUT_REQUIRED)
        .filter(|c| c.status == ConditionStatus::True)
        .map(|c| c.last_transition_time.clone());
    let clocks = next_clocks(previous, waiting.as_ref(), &facts.now);
    let leaves_pod = retried.is_some() || resumed || outcome_suspended(&conditions);
    let status = RunStatus {
        report: None,
        observed_generation: facts.generation,
        phase: Some(phase_of(&conditions)),
        conditions,
        pod_name: if leaves_pod {
            None
        } else {
            facts.pod_name.clone().or_else(|| previous.pod_name.clone())
        },
        attempt: view.accepted.then_some(next_attempt),
        resumptions: if resumed {
            Some(view.resumptions + 1)
        } else {
            previous.resumptions
        },
        waited_seconds: clocks.waited_seconds,
        waiting_since: clocks.waiting_since,
        completion_time: finished.then(|| facts.now.clone()),
        start_time: view.start_time.clone(),
        children: previous.children.clone(),
        child_counts: previous.child_counts,
        snapshot: view.accepted.then(|| snapshot_name(facts.name)),
    };
    RunDecision {
        status,
        retried,
        stop_pod,
    }
}

/// `InputRequired`: true with the open question; else false, `Answered` when a question was
/// open and the Run goes on, `NoQuestion` otherwise.
fn input_required(
    previous: &RunStatus,
    facts: &RunFacts<'_>,
    open_question: Option<&Awaited>,
    finished: bool,
) -> Condition {
    if let Some(q) = open_question {
        return Condition::new(
            condition_type::INPUT_REQUIRED,
            ConditionStatus::True,
            q.reason,
            q.question.clone(),
            facts.generation,
            facts.now.clone(),
        );
    }
    let was_open = find_condition(&previous.conditions, condition_type::INPUT_REQUIRED)
        .is_some_and(|c| c.status == ConditionStatus::True);
    let why = if was_open && !finished {
        reason::ANSWERED
    } else {
        reason::NO_QUESTION
    };
    Condition::new(
        condition_type::INPUT_REQUIRED,
        ConditionStatus::False,
        why,
        "",
        facts.generation,
        facts.now.clone(),
    )
}

/// What a suspended Run's `Succeeded` says.
fn suspended_message(question: &str) -> String {
    format!("suspended without a Pod until the answer comes: {question}")
}

/// Whether these conditions show a suspended Run.
fn outcome_suspended(conditions: &[Condition]) -> bool {
    phase_of(conditions) == RunPhase::Suspended
}

/// Whether the current attempt's Pod, which shows it will not start, has had its
/// `--pod-start-timeout` since its creation.
fn start_timed_out(facts: &RunFacts<'_>) -> bool {
    facts
        .pod_created
        .as_ref()
        .is_some_and(|created| passed(created, facts.pod_start_timeout, &facts.now))
}

/// How long until the current attempt's Pod, which shows it will not start, reaches its
/// `--pod-start-timeout`; `None` for any other Pod (nothing to wake up for).
pub fn start_deadline(facts: &RunFacts<'_>) -> Option<Duration> {
    let PodState::Observed(PodOutcome::NotStarting(_)) = &facts.pod else {
        return None;
    };
    let created = facts.pod_created.as_ref()?;
    Some(
        facts
            .pod_start_timeout
            .saturating_sub(elapsed(created, &facts.now)),
    )
}

/// A Pod that did not start in time: an infrastructure failure, retried while `retries` allow
/// (a node may free up, a registry come back, a Secret appear), but never for an image name
/// that does not parse: the snapshot fixes it, so every attempt would fail the same way.
fn start_failed(
    attempt: u32,
    retries: u32,
    facts: &RunFacts<'_>,
    failure: &StartFailure,
    retried: &mut Option<String>,
) -> Outcome {
    let cause = format!(
        "the pod did not start within {}: {}",
        human(facts.pod_start_timeout),
        failure.message
    );
    if failure.reason == reason::INVALID_IMAGE_NAME {
        return Outcome::failed(failure.reason, cause);
    }
    infrastructure(attempt, retries, failure.reason, &cause, retried)
}

/// Whether the facts include something deleted under the Run (its snapshot, its Pod, the Agent
/// it waits for), as a namespace being deleted does: the controller then checks the namespace
/// before deciding.
pub fn caused_by_loss(facts: &RunFacts<'_>) -> bool {
    facts.snapshot_lost
        || facts.agent == AgentState::NotFound
        || matches!(
            facts.pod,
            PodState::Gone | PodState::Observed(PodOutcome::Deleted)
        )
}

/// The name of a Run's snapshot ConfigMap.
pub fn snapshot_name(run: &str) -> String {
    format!("{run}-snapshot")
}

/// The part of a status the controller writes: all but `report`, which the runner sends.
pub fn controller_part(status: &RunStatus) -> RunStatus {
    RunStatus {
        report: None,
        ..status.clone()
    }
}

fn not_accepted(facts: &RunFacts<'_>) -> Outcome {
    if passed(&facts.created, facts.timeout, &facts.now) {
        return Outcome::failed(
            reason::TIMED_OUT,
            format!("Agent {} never appeared", facts.agent_name),
        );
    }
    match &facts.agent {
        AgentState::NotReady(message) => Outcome::going(
            reason::AGENT_NOT_READY,
            format!("Agent {} is not ready: {message}", facts.agent_name),
        ),
        AgentState::NotFound | AgentState::Ready => Outcome::going(
            reason::AGENT_NOT_FOUND,
            format!("Agent {} not found", facts.agent_name),
        ),
    }
}

/// Whether a report with this stop reason ends the attempt.
pub fn is_terminal(stop: StopReason) -> bool {
    stop != StopReason::InputRequired
}

/// docs/operator.md, "How a Run ends".
fn stopped(stop: StopReason, text: Option<&str>) -> Outcome {
    let with_text = |head: &str| match text.filter(|t| !t.is_empty()) {
        Some(t) => format!("{head}: {t}"),
        None => head.to_owned(),
    };
    match stop {
        StopReason::Completed => Outcome {
            status: ConditionStatus::True,
            reason: reason::SUCCEEDED,
            message: "the agent answered".to_owned(),
        },
        StopReason::ModelCallLimit
        | StopReason::LoopDetected
        | StopReason::TokenBudgetExceeded
        | StopReason::SubagentLimitReached
        | StopReason::ModelLengthLimit
        | StopReason::SafetyStop => Outcome {
            status: ConditionStatus::True,
            reason: reason::SUCCEEDED,
            // The table names limits as the Rust variants are spelled (PascalCase, like reasons).
            message: format!("stopped by {stop:?}"),
        },
        StopReason::ModelError => Outcome::failed(reason::MODEL_ERROR, with_text("model error")),
        StopReason::SandboxUnavailable => {
            Outcome::failed(reason::POD_FAILED, with_text("the sandbox was unavailable"))
        }
        StopReason::ResultTooLarge => Outcome::failed(
            reason::RESULT_TOO_LARGE,
            with_text("the result was too large"),
        ),
        StopReason::CheckpointTooLarge => Outcome::failed(
            reason::CHECKPOINT_TOO_LARGE,
            with_text("the checkpoint was too large"),
        ),
        // The run API refuses such a result: an interrupted pod posts its checkpoint.
        StopReason::Interrupted => {
            Outcome::failed(reason::POD_FAILED, with_text("the runner was interrupted"))
        }
        StopReason::Cancelled => Outcome::failed(reason::CANCELLED, "cancelled by spec.cancel"),
        StopReason::TimedOut => Outcome::failed(reason::TIMED_OUT, with_text("the timeout passed")),
        StopReason::InputRequired => Outcome::going(reason::WAITING_FOR_INPUT, ""),
        StopReason::ApprovalTimedOut => Outcome::failed(
            reason::APPROVAL_TIMED_OUT,
            with_text("a tool call waited too long for approval"),
        ),
    }
}

/// The `agent` container ended without a terminal report of its attempt.
fn exited(exit: &AgentExit) -> Outcome {
    if exit.oom_killed {
        return Outcome::failed(reason::OOM_KILLED, "the agent container ran out of memory");
    }
    if exit.exit_code == i32::from(FALLBACK_EXIT_CODE)
        && let Ok(fallback) = serde_json::from_str::<FallbackReport>(&exit.message)
    {
        return stopped(fallback.stop_reason, Some(&fallback.text));
    }
    let message = match (exit.exit_code, exit.message.trim()) {
        (0, _) => "the agent exited without reporting a result".to_owned(),
        (code, "") => format!("the agent exited with code {code}"),
        (code, text) => format!("the agent exited with code {code}: {text}"),
    };
    Outcome::failed(reason::FAILED, message)
}

fn input_timed_out(input_timeout: Duration) -> Outcome {
    Outcome::failed(
        reason::INPUT_TIMED_OUT,
        format!("no answer within {}", human(input_timeout)),
    )
}

/// An infrastructure failure: a new attempt while `retries` allow, else the final reason.
fn infrastructure(
    attempt: u32,
    retries: u32,
    final_reason: &'static str,
    cause: &str,
    retried: &mut Option<String>,
) -> Outcome {
    if attempt <= retries {
        let why = format!(
            "attempt {} after attempt {attempt} failed: {cause}",
            attempt + 1
        );
        *retried = Some(why.clone());
        return Outcome::going(reason::QUEUED, why);
    }
    Outcome::failed(final_reason, cause)
}

/// Whether `limit` has passed since `since`.
pub fn passed(since: &Time, limit: Duration, now: &Time) -> bool {
    elapsed(since, now) >= limit
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::report::{Clarification, ClarificationType};
    use herd_crds::run::RunResult;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn facts(pod: PodState) -> RunFacts<'static> {
        RunFacts {
            name: "r",
            generation: Some(1),
            created: at(0),
            agent_name: "a",
            cancel: false,
            agent: AgentState::Ready,
            timeout: Duration::from_secs(1800),
            input_timeout: Duration::from_secs(3600),
            retries: 0,
            report: None,
            answered: Vec::new(),
            pod,
            pod_name: None,
            blocked: None,
            invalid: None,
            snapshot_lost: false,
            pod_created: None,
            pod_start_timeout: Duration::from_secs(300),
            now: at(10),
        }
    }

    /// The facts of a running Pod whose attempt has reported `report`.
    fn reported(report: &RunReport) -> RunFacts<'_> {
        RunFacts {
            report: Some(report),
            ..facts(PodState::Observed(PodOutcome::Running))
        }
    }

    fn report(stop: Option<StopReason>) -> RunReport {
        RunReport {
            attempt: 1,
            seq: 3,
            stop_reason: stop,
            result: Some(RunResult {
                text: "the answer".into(),
                ..RunResult::default()
            }),
            ..RunReport::default()
        }
    }

    fn question() -> RunReport {
        RunReport {
            attempt: 1,
            seq: 2,
            stop_reason: Some(StopReason::InputRequired),
            clarification: Some(Clarification {
                id: "q1".into(),
                question: "which one?".into(),
                kind: ClarificationType::MissingInfo,
                context: None,
                options: vec![],
                asked_at: None,
            }),
            ..RunReport::default()
        }
    }

    fn running() -> RunStatus {
        next_status(
            &RunStatus::default(),
            &RunFacts {
                now: at(1),
                pod_name: Some("r-1".into()),
                ..facts(PodState::Observed(PodOutcome::Running))
            },
        )
        .status
    }

    fn succeeded(status: &RunStatus) -> (&ConditionStatus, &str, &str) {
        let c = find_condition(&status.conditions, condition_type::SUCCEEDED).unwrap();
        (&c.status, c.reason.as_str(), c.message.as_str())
    }

    fn decide(previous: &RunStatus, facts: &RunFacts<'_>) -> RunStatus {
        next_status(previous, facts).status
    }

    #[test]
    fn outcome_table_completed() {
        let r = report(Some(StopReason::Completed));
        let f = reported(&r);
        let s = decide(&running(), &f);
        assert_eq!(
            succeeded(&s),
            (&ConditionStatus::True, "Succeeded", "the agent answered")
        );
        assert_eq!(s.phase, Some(herd_crds::run::RunPhase::Succeeded));
        assert_eq!(s.completion_time, Some(at(10)));
        assert_eq!(s.report, None, "the controller never writes report");
    }

    #[test]
    fn outcome_table_limits_succeed_with_their_name() {
        let cases = [
            (StopReason::ModelCallLimit, "stopped by ModelCallLimit"),
            (StopReason::LoopDetected, "stopped by LoopDetected"),
            (
                StopReason::TokenBudgetExceeded,
                "stopped by TokenBudgetExceeded",
            ),
            (
                StopReason::SubagentLimitReached,
                "stopped by SubagentLimitReached",
            ),
            (StopReason::ModelLengthLimit, "stopped by ModelLengthLimit"),
            (StopReason::SafetyStop, "stopped by SafetyStop"),
        ];
        for (stop, message) in cases {
            let r = report(Some(stop));
            let f = reported(&r);
            assert_eq!(
                succeeded(&decide(&running(), &f)),
                (&ConditionStatus::True, "Succeeded", message),
                "{stop:?}"
            );
        }
    }

    #[test]
    fn outcome_table_failures() {
        let cases = [
            (
                StopReason::ModelError,
                "ModelError",
                "model error: the answer",
            ),
            (
                StopReason::SandboxUnavailable,
                "PodFailed",
                "the sandbox was unavailable: the answer",
            ),
            (
                StopReason::ResultTooLarge,
                "ResultTooLarge",
                "the result was too large: the answer",
            ),
            (
                StopReason::CheckpointTooLarge,
                "CheckpointTooLarge",
                "the checkpoint was too large: the answer",
            ),
        ];
        for (stop, why, message) in cases {
            let r = report(Some(stop));
            let f = reported(&r);
            assert_eq!(
                succeeded(&decide(&running(), &f)),
                (&ConditionStatus::False, why, message),
                "{stop:?}"
            );
        }
    }

    #[test]
    fn outcome_table_cancel_and_deadlines_are_the_operators() {
        let f = RunFacts {
            cancel: true,
            ..facts(PodState::Observed(PodOutcome::Running))
        };
        let s = decide(&running(), &f);
        assert_eq!(
            succeeded(&s),
            (
                &ConditionStatus::False,
                "Cancelled",
                "cancelled by spec.cancel"
            )
        );
        assert_eq!(s.phase, Some(herd_crds::run::RunPhase::Cancelled));
        let queued = decide(&RunStatus::default(), &facts(PodState::NotCreated));
        let f = RunFacts {
            cancel: true,
            ..facts(PodState::NotCreated)
        };
        assert_eq!(succeeded(&decide(&queued, &f)).1, "Cancelled");

        // running() started at 1: the 30m deadline is 1801.
        let f = RunFacts {
            now: at(1801),
            ..facts(PodState::Observed(PodOutcome::Running))
        };
        assert_eq!(
            succeeded(&decide(&running(), &f)),
            (
                &ConditionStatus::False,
                "TimedOut",
                "the timeout of 30m passed"
            )
        );
        let f = RunFacts {
            now: at(1800),
            ..facts(PodState::Observed(PodOutcome::Running))
        };
        assert_eq!(succeeded(&decide(&running(), &f)).1, "Running");
    }

    #[test]
    fn a_terminal_report_wins_over_cancel_and_a_stale_attempts_report_does_not_count() {
        let r = report(Some(StopReason::Completed));
        let f = RunFacts {
            cancel: true,
            ..reported(&r)
        };
        assert_eq!(succeeded(&decide(&running(), &f)).1, "Succeeded");
        let mut second = running();
        second.attempt = Some(2);
        let f = reported(&r);
        assert_eq!(succeeded(&decide(&second, &f)).1, "Running");
    }

    #[test]
    fn a_refused_pod_fails_the_run_invalid_spec() {
        let f = RunFacts {
            invalid: Some("pods \"r-1\" is forbidden: violates PodSecurity".into()),
            ..facts(PodState::NotCreated)
        };
        let s = decide(&RunStatus::default(), &f);
        assert_eq!(
            succeeded(&s),
            (
                &ConditionStatus::False,
                "InvalidSpec",
                "pods \"r-1\" is forbidden: violates PodSecurity"
            )
        );
        assert_eq!(s.completion_time, Some(at(10)));
    }

    #[test]
    fn a_finished_run_never_changes() {
        let r = report(Some(StopReason::ModelError));
        let f = reported(&r);
        let done = decide(&running(), &f);
        let later = RunFacts {
            cancel: true,
            now: at(99_999),
            ..facts(PodState::Gone)
        };
        assert_eq!(decide(&done, &later), done);
    }

    #[test]
    fn accept_waits_for_the_agent_until_the_timeout() {
        let f = RunFacts {
            agent: AgentState::NotFound,
            ..facts(PodState::NotCreated)
        };
        let s = decide(&RunStatus::default(), &f);
        assert_eq!(
            succeeded(&s),
            (
                &ConditionStatus::Unknown,
                "AgentNotFound",
                "Agent a not found"
            )
        );
        assert_eq!(s.start_time, None);
        assert_eq!(s.snapshot, None);
        assert_eq!(s.attempt, None);
        assert_eq!(s.phase, Some(herd_crds::run::RunPhase::Pending));
        let f = RunFacts {
            agent: AgentState::NotReady("skill x not found".into()),
            ..facts(PodState::NotCreated)
        };
        assert_eq!(
            succeeded(&decide(&s, &f)),
            (
                &ConditionStatus::Unknown,
                "AgentNotReady",
                "Agent a is not ready: skill x not found"
            )
        );
        let f = RunFacts {
            agent: AgentState::NotFound,
            now: at(1800),
            ..facts(PodState::NotCreated)
        };
        assert_eq!(
            succeeded(&decide(&s, &f)),
            (
                &ConditionStatus::False,
                "TimedOut",
                "Agent a never appeared"
            )
        );
        let accepted = decide(&s, &facts(PodState::NotCreated));
        assert_eq!(succeeded(&accepted).1, "Queued");
        assert_eq!(accepted.start_time, Some(at(10)));
        assert_eq!(accepted.snapshot.as_deref(), Some("r-snapshot"));
        assert_eq!(accepted.attempt, Some(1));
        let later = RunFacts {
            now: at(20),
            agent: AgentState::NotFound,
            ..facts(PodState::NotCreated)
        };
        let still = decide(&accepted, &later);
        assert_eq!(
            still.start_time,
            Some(at(10)),
            "an accepted Run keeps its start"
        );
        assert_eq!(succeeded(&still).1, "Queued", "the Agent no longer matters");
    }

    #[test]
    fn queued_carries_why_the_pod_waits_then_pod_pending_and_running() {
        let f = RunFacts {
            blocked: Some("input ConfigMap data not found".into()),
            ..facts(PodState::NotCreated)
        };
        let s = decide(&RunStatus::default(), &f);
        assert_eq!(
            succeeded(&s),
            (
                &ConditionStatus::Unknown,
                "Queued",
                "input ConfigMap data not found"
            )
        );
        assert_eq!(s.phase, Some(herd_crds::run::RunPhase::Queued));
        let f = RunFacts {
            pod_name: Some("r-1".into()),
            ..facts(PodState::Observed(PodOutcome::Pending))
        };
        let s = decide(&s, &f);
        assert_eq!(succeeded(&s).1, "PodPending");
        assert_eq!(s.pod_name.as_deref(), Some("r-1"));
        let s = decide(&s, &facts(PodState::Observed(PodOutcome::Running)));
        assert_eq!(succeeded(&s).1, "Running");
        assert_eq!(s.pod_name.as_deref(), Some("r-1"), "kept");
        assert_eq!(s.phase, Some(herd_crds::run::RunPhase::Running));
    }

    #[test]
    fn a_question_opens_input_required_and_times_out_from_its_transition() {
        let q = question();
        let f = RunFacts {
            now: at(100),
            ..reported(&q)
        };
        let s = decide(&running(), &f);
        assert_eq!(
            succeeded(&s),
            (&ConditionStatus::Unknown, "WaitingForInput", "which one?")
        );
        let input = find_condition(&s.conditions, condition_type::INPUT_REQUIRED).unwrap();
        assert_eq!(input.status, ConditionStatus::True);
        assert_eq!(input.last_transition_time, at(100));
        assert_eq!(s.phase, Some(herd_crds::run::RunPhase::InputRequired));

        let f = RunFacts {
            now: at(1000),
            timeout: Duration::from_secs(100_000),
            ..reported(&q)
        };
        let s = decide(&s, &f);
        let input = find_condition(&s.conditions, condition_type::INPUT_REQUIRED).unwrap();
        assert_eq!(input.last_transition_time, at(100), "asked at 100");
        let f = RunFacts {
            now: at(3700),
            timeout: Duration::from_secs(100_000),
            ..reported(&q)
        };
        let timed_out = decide(&s, &f);
        assert_eq!(
            succeeded(&timed_out),
            (
                &ConditionStatus::False,
                "InputTimedOut",
                "no answer within 1h"
            )
        );
        let input = find_condition(&timed_out.conditions, condition_type::INPUT_REQUIRED).unwrap();
        assert_eq!(
            (input.status, input.reason.as_str()),
            (ConditionStatus::False, "NoQuestion")
        );

        let answered = RunReport {
            seq: 5,
            ..report(None)
        };
        let f = RunFacts {
            now: at(200),
            ..reported(&answered)
        };
        let s = decide(&s, &f);
        let input = find_condition(&s.conditions, condition_type::INPUT_REQUIRED).unwrap();
        assert_eq!(
            (input.status, input.reason.as_str()),
            (ConditionStatus::False, "Answered")
        );
        assert_eq!(succeeded(&s).1, "Running");
    }

    fn exit(code: i32, oom: bool, message: &str) -> PodState {
        PodState::Observed(PodOutcome::AgentExited(AgentExit {
            exit_code: code,
            oom_killed: oom,
            message: message.into(),
        }))
    }

    #[test]
    fn the_agent_exit_decides_without_a_terminal_report() {
        let cases = [
            (
                exit(1, false, "panic: boom\n"),
                "Failed",
                "the agent exited with code 1: panic: boom",
            ),
            (exit(2, false, ""), "Failed", "the agent exited with code 2"),
            (
                exit(0, false, ""),
                "Failed",
                "the agent exited without reporting a result",
            ),
            (
                exit(137, true, ""),
                "OOMKilled",
                "the agent container ran out of memory",
            ),
            (
                exit(75, false, "not json"),
                "Failed",
                "the agent exited with code 75: not json",
            ),
        ];
        for (pod, why, message) in cases {
            let f = facts(pod);
            assert_eq!(
                succeeded(&decide(&running(), &f)),
                (&ConditionStatus::False, why, message)
            );
        }
    }

    #[test]
    fn exit_75_with_the_fallback_report_goes_through_the_outcome_table() {
        let f = facts(exit(
            75,
            false,
            r#"{"stopReason":"completed","text":"partial answer"}"#,
        ));
        assert_eq!(
            succeeded(&decide(&running(), &f)),
            (&ConditionStatus::True, "Succeeded", "the agent answered")
        );
        let f = facts(exit(
            75,
            false,
            r#"{"stopReason":"modelError","text":"503 from upstream"}"#,
        ));
        assert_eq!(
            succeeded(&decide(&running(), &f)),
            (
                &ConditionStatus::False,
                "ModelError",
                "model error: 503 from upstream"
            )
        );
        let f = facts(exit(75, false, r#"{"stopReason":"loopDetected"}"#));
        assert_eq!(
            succeeded(&decide(&running(), &f)),
            (
                &ConditionStatus::True,
                "Succeeded",
                "stopped by LoopDetected"
            )
        );
    }

    #[test]
    fn the_deadline_backstop_is_an_input_timeout_only_with_an_open_question() {
        let f = facts(PodState::Observed(PodOutcome::DeadlineExceeded));
        assert_eq!(
            succeeded(&decide(&running(), &f)),
            (
                &ConditionStatus::False,
                "TimedOut",
                "the pod reached its activeDeadlineSeconds"
            )
        );
        let q = question();
        let asking = decide(&running(), &reported(&q));
        let f = RunFacts {
            report: Some(&q),
            ..facts(PodState::Observed(PodOutcome::DeadlineExceeded))
        };
        assert_eq!(succeeded(&decide(&asking, &f)).1, "InputTimedOut");
    }

    #[test]
    fn infrastructure_failures_retry_while_retries_allow() {
        let failures = [
            (
                PodState::Observed(PodOutcome::Evicted("the pod was evicted".into())),
                "Evicted",
                "the pod was evicted",
            ),
            (
                PodState::Observed(PodOutcome::Infrastructure("disrupted".into())),
                "PodFailed",
                "disrupted",
            ),
            (PodState::Gone, "PodFailed", "the pod was deleted"),
        ];
        for (pod, final_reason, cause) in failures {
            let f = RunFacts {
                retries: 1,
                ..facts(pod.clone())
            };
            let decision = next_status(&running(), &f);
            let s = &decision.status;
            assert_eq!(s.attempt, Some(2));
            assert_eq!(
                s.pod_name, None,
                "the next attempt's pod is not created yet"
            );
            assert_eq!(
                succeeded(s),
                (
                    &ConditionStatus::Unknown,
                    "Queued",
                    format!("attempt 2 after attempt 1 failed: {cause}").as_str()
                )
            );
            assert!(decision.retried.is_some());
            let f = RunFacts {
                retries: 1,
                ..facts(pod)
            };
            let decision = next_status(s, &f);
            assert_eq!(
                succeeded(&decision.status),
                (&ConditionStatus::False, final_reason, cause),
                "no retries left"
            );
            assert_eq!(decision.retried, None);
            assert_eq!(decision.status.attempt, Some(2));
        }
    }

    fn not_starting(why: &'static str) -> PodState {
        PodState::Observed(PodOutcome::NotStarting(StartFailure {
            reason: why,
            message: format!("container sandbox: {why} says the kubelet"),
        }))
    }

    /// A Pod created at 1 that shows `why`, looked at `now` with `retries`.
    fn start_facts(why: &'static str, now: i64, retries: u32) -> RunFacts<'static> {
        RunFacts {
            pod_created: Some(at(1)),
            pod_name: Some("r-1".into()),
            retries,
            now: at(now),
            ..facts(not_starting(why))
        }
    }

    #[test]
    fn a_pod_that_will_not_start_shows_why_at_once_for_every_reason() {
        let reasons = crate::decide::pod_outcome::WAITING_FAILURES
            .into_iter()
            .chain([reason::UNSCHEDULABLE]);
        for why in reasons {
            let decision = next_status(&running(), &start_facts(why, 5, 0));
            let message = format!("container sandbox: {why} says the kubelet");
            assert_eq!(
                succeeded(&decision.status),
                (&ConditionStatus::Unknown, why, message.as_str()),
                "{why}"
            );
            assert!(!decision.stop_pod, "{why}");
            assert_eq!(decision.status.completion_time, None);
            assert_eq!(
                decision.status.phase,
                Some(herd_crds::run::RunPhase::Running)
            );
        }
    }

    #[test]
    fn a_pod_that_did_not_start_within_the_timeout_fails_with_its_reason() {
        let reasons = crate::decide::pod_outcome::WAITING_FAILURES
            .into_iter()
            .chain([reason::UNSCHEDULABLE]);
        for why in reasons {
            // Created at 1, a 5m timeout: still waiting at 300, failed at 301.
            let waiting = next_status(&running(), &start_facts(why, 300, 0));
            assert_eq!(succeeded(&waiting.status).0, &ConditionStatus::Unknown);
            let failed = next_status(&running(), &start_facts(why, 301, 0));
            let message = format!(
                "the pod did not start within 5m: container sandbox: {why} says the kubelet"
            );
            assert_eq!(
                succeeded(&failed.status),
                (&ConditionStatus::False, why, message.as_str()),
                "{why}"
            );
            assert!(
                failed.stop_pod,
                "{why}: the operator deletes the Pod it gave up on"
            );
            assert_eq!(failed.status.completion_time, Some(at(301)));
            assert_eq!(failed.retried, None);
        }
    }

    #[test]
    fn start_failures_retry_while_retries_allow_except_an_invalid_image_name() {
        let retried = next_status(
            &running(),
            &start_facts(reason::IMAGE_PULL_BACK_OFF, 400, 1),
        );
        assert_eq!(
            succeeded(&retried.status),
            (
                &ConditionStatus::Unknown,
                "Queued",
                "attempt 2 after attempt 1 failed: the pod did not start within 5m: \
                 container sandbox: ImagePullBackOff says the kubelet"
            )
        );
        assert_eq!(retried.status.attempt, Some(2));
        assert_eq!(retried.status.pod_name, None);
        assert!(retried.stop_pod);
        assert!(retried.retried.is_some());
        let unschedulable = next_status(&running(), &start_facts(reason::UNSCHEDULABLE, 400, 1));
        assert_eq!(unschedulable.status.attempt, Some(2));

        let invalid = next_status(&running(), &start_facts(reason::INVALID_IMAGE_NAME, 400, 3));
        assert_eq!(invalid.retried, None);
        assert_eq!(
            succeeded(&invalid.status).1,
            "InvalidImageName",
            "the snapshot's image name can never parse"
        );
        assert!(invalid.stop_pod);
    }

    #[test]
    fn the_run_timeout_still_wins_over_a_start_failure() {
        let f = start_facts(reason::UNSCHEDULABLE, 1801, 0);
        assert_eq!(succeeded(&decide(&running(), &f)).1, "TimedOut");
    }

    #[test]
    fn the_start_deadline_counts_from_the_pods_creation() {
        assert_eq!(
            start_deadline(&start_facts(reason::ERR_IMAGE_PULL, 101, 0)),
            Some(Duration::from_secs(200))
        );
        assert_eq!(
            start_deadline(&start_facts(reason::ERR_IMAGE_PULL, 999, 0)),
            Some(Duration::ZERO)
        );
        let pending = RunFacts {
            pod_created: Some(at(1)),
            ..facts(PodState::Observed(PodOutcome::Pending))
        };
        assert_eq!(start_deadline(&pending), None, "slow is not failing");
        let unknown_creation = RunFacts {
            pod_created: None,
            ..start_facts(reason::ERR_IMAGE_PULL, 999, 0)
        };
        assert_eq!(start_deadline(&unknown_creation), None);
        assert_eq!(
            succeeded(&decide(&running(), &unknown_creation)).0,
            &ConditionStatus::Unknown,
            "no creation time: never timed out"
        );
    }

    #[test]
    fn a_lost_snapshot_fails_snapshot_lost_never_invalid_spec() {
        let f = RunFacts {
            snapshot_lost: true,
            invalid: Some("also refused".into()),
            ..facts(PodState::Observed(PodOutcome::Running))
        };
        assert_eq!(
            succeeded(&decide(&running(), &f)),
            (
                &ConditionStatus::False,
                "SnapshotLost",
                "snapshot ConfigMap r-snapshot was deleted while the Run was active"
            )
        );
        assert!(caused_by_loss(&f));
    }

    #[test]
    fn losses_are_a_lost_snapshot_a_deleted_pod_or_a_missing_agent() {
        for pod in [PodState::Gone, PodState::Observed(PodOutcome::Deleted)] {
            assert!(caused_by_loss(&facts(pod.clone())), "{pod:?}");
            let decision = next_status(&running(), &facts(pod));
            assert_eq!(
                succeeded(&decision.status),
                (&ConditionStatus::False, "PodFailed", "the pod was deleted")
            );
        }
        let waiting_for_agent = RunFacts {
            agent: AgentState::NotFound,
            ..facts(PodState::NotCreated)
        };
        assert!(caused_by_loss(&waiting_for_agent));
        let agent_not_ready = RunFacts {
            agent: AgentState::NotReady("skill x not found".into()),
            ..facts(PodState::NotCreated)
        };
        assert!(!caused_by_loss(&agent_not_ready));
        for pod in [
            PodState::NotCreated,
            PodState::Observed(PodOutcome::Running),
            PodState::Observed(PodOutcome::Evicted("e".into())),
            PodState::Observed(PodOutcome::Infrastructure("i".into())),
            exit(1, false, ""),
        ] {
            assert!(!caused_by_loss(&facts(pod.clone())), "{pod:?}");
        }
    }

    #[test]
    fn an_evicted_pod_fails_evicted_with_the_kubelets_message() {
        let cause = "the pod was evicted: Pod ephemeral local storage usage exceeds the total \
                     limit of containers 1Gi.";
        let f = facts(PodState::Observed(PodOutcome::Evicted(cause.into())));
        let decision = next_status(&running(), &f);
        assert_eq!(
            succeeded(&decision.status),
            (&ConditionStatus::False, "Evicted", cause)
        );
        assert!(
            !decision.stop_pod,
            "an evicted Pod is kept, Failed, until the Run goes"
        );
    }

    #[test]
    fn a_non_zero_exit_or_oom_is_never_retried() {
        for pod in [exit(1, false, ""), exit(137, true, "")] {
            let f = RunFacts {
                retries: 3,
                ..facts(pod)
            };
            let decision = next_status(&running(), &f);
            assert_eq!(decision.retried, None);
            assert_eq!(succeeded(&decision.status).0, &ConditionStatus::False);
        }
    }

    /// A Run that asked at 100 and whose Pod exited 0 at `now`: suspended.
    fn suspended_at(now: i64) -> RunStatus {
        let q = question();
        let asking = decide(
            &running(),
            &RunFacts {
                now: at(100),
                ..reported(&q)
            },
        );
        let decision = next_status(
            &asking,
            &RunFacts {
                report: Some(&q),
                now: at(now),
                ..facts(exit(0, false, "suspended"))
            },
        );
        assert!(
            !decision.stop_pod,
            "the ended Pod is kept, as earlier attempts' are"
        );
        assert_eq!(decision.retried, None);
        decision.status
    }

    #[test]
    fn a_pod_that_exits_0_while_its_question_waits_suspends_the_run() {
        let s = suspended_at(250);
        assert_eq!(
            succeeded(&s),
            (
                &ConditionStatus::Unknown,
                "Suspended",
                "suspended without a Pod until the answer comes: which one?"
            )
        );
        assert_eq!(s.phase, Some(herd_crds::run::RunPhase::Suspended));
        let input = find_condition(&s.conditions, condition_type::INPUT_REQUIRED).unwrap();
        assert_eq!(
            (input.status, input.last_transition_time.clone()),
            (ConditionStatus::True, at(100))
        );
        assert_eq!(s.pod_name, None, "no Pod");
        assert_eq!(s.attempt, Some(1), "no new attempt yet");
        assert_eq!(s.waiting_since, Some(at(100)));
        assert_eq!(s.completion_time, None);
        // Without a question, exit 0 stays what it was: a failure.
        assert_eq!(
            succeeded(&decide(&running(), &facts(exit(0, false, "")))).1,
            "Failed"
        );
    }

    #[test]
    fn a_suspended_run_ignores_its_old_pod_and_waits_for_the_answer() {
        let s = suspended_at(250);
        let q = question();
        for pod in [
            PodState::Gone,
            PodState::NotCreated,
            PodState::Observed(PodOutcome::Deleted),
            exit(0, false, "suspended"),
        ] {
            let decision = next_status(
                &s,
                &RunFacts {
                    report: Some(&q),
                    answered: vec!["other".into()],
                    now: at(2000),
                    ..facts(pod.clone())
                },
            );
            assert_eq!(succeeded(&decision.status).1, "Suspended", "{pod:?}");
            assert_eq!(decision.retried, None, "{pod:?}");
            assert_eq!(decision.status.attempt, Some(1));
            assert_eq!(decision.status, s, "{pod:?}: nothing changes");
        }
    }

    #[test]
    fn the_answer_resumes_a_suspended_run_in_a_new_attempt_that_is_no_retry() {
        let s = suspended_at(250);
        let q = question();
        let decision = next_status(
            &s,
            &RunFacts {
                report: Some(&q),
                answered: vec!["q1".into()],
                now: at(1000),
                ..facts(PodState::NotCreated)
            },
        );
        let resumed = &decision.status;
        assert_eq!(
            succeeded(resumed),
            (
                &ConditionStatus::Unknown,
                "Queued",
                "attempt 2 resumes from the checkpoint with the answer"
            )
        );
        assert_eq!(decision.retried, None, "not a retry");
        assert_eq!((resumed.attempt, resumed.resumptions), (Some(2), Some(1)));
        assert_eq!(resumed.pod_name, None);
        let input = find_condition(&resumed.conditions, condition_type::INPUT_REQUIRED).unwrap();
        assert_eq!(
            (input.status, input.reason.as_str()),
            (ConditionStatus::False, "Answered")
        );
        assert_eq!(resumed.waiting_since, None);
        assert_eq!(
            resumed.waited_seconds,
            Some(900),
            "asked at 100, resumed at 1000"
        );

        // The resumed attempt keeps the whole retry budget: with retries 1, its evicted Pod
        // gets attempt 3.
        let evicted = next_status(
            resumed,
            &RunFacts {
                retries: 1,
                now: at(1100),
                ..facts(PodState::Observed(PodOutcome::Evicted("evicted".into())))
            },
        );
        assert_eq!(evicted.status.attempt, Some(3));
        assert!(evicted.retried.is_some());
        let no_retries = next_status(
            resumed,
            &RunFacts {
                now: at(1100),
                ..facts(PodState::Observed(PodOutcome::Evicted("evicted".into())))
            },
        );
        assert_eq!(succeeded(&no_retries.status).1, "Evicted");
    }

    #[test]
    fn a_suspended_run_still_times_out_its_input_and_can_be_cancelled() {
        let s = suspended_at(250);
        let q = question();
        let late = RunFacts {
            report: Some(&q),
            now: at(100 + 3600),
            ..facts(PodState::NotCreated)
        };
        let timed_out = decide(&s, &late);
        assert_eq!(succeeded(&timed_out).1, "InputTimedOut");
        assert_eq!(timed_out.waiting_since, None, "the wait is closed");
        assert_eq!(timed_out.waited_seconds, Some(3600));
        let cancelled = decide(
            &s,
            &RunFacts {
                cancel: true,
                report: Some(&q),
                ..facts(PodState::NotCreated)
            },
        );
        assert_eq!(succeeded(&cancelled).1, "Cancelled");
    }

    #[test]
    fn the_timeout_counts_working_time_only() {
        // Started at 1, 30m timeout; asked at 100: the wait never times the Run out.
        let q = question();
        let waiting = decide(
            &running(),
            &RunFacts {
                now: at(100),
                ..reported(&q)
            },
        );
        let much_later = RunFacts {
            now: at(3000),
            ..reported(&q)
        };
        let still = decide(&waiting, &much_later);
        assert_eq!(succeeded(&still).1, "WaitingForInput");
        // Answered at 3000 (waited 2900): 99 s worked, 1701 s left, so it times out at 4701.
        let answered = RunReport {
            seq: 5,
            ..report(None)
        };
        let working = decide(
            &still,
            &RunFacts {
                now: at(3000),
                ..reported(&answered)
            },
        );
        assert_eq!(working.waited_seconds, Some(2900));
        let at_time = |now| {
            decide(
                &working,
                &RunFacts {
                    now: at(now),
                    ..reported(&answered)
                },
            )
        };
        assert_eq!(succeeded(&at_time(4700)).1, "Running");
        assert_eq!(
            succeeded(&at_time(4701)),
            (
                &ConditionStatus::False,
                "TimedOut",
                "the timeout of 30m passed"
            )
        );
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(human(Duration::from_secs(5400)), "1h30m0s");
        assert_eq!(human(Duration::from_secs(45)), "45s");
    }
}
