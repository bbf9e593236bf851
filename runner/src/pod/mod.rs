//! `herd-runner pod`: the `agent` container of a Run's pod — the lead agent, reporting to the
//! operator's run API, its tools in the `sandbox` container behind a unix socket.
//!
//! A thin shell around the run plan, like `herd-runner run`: it reads the environment the
//! operator set (`env`), fetches the Run's `RunConfig`, plans the run (`pod_plan`), connects
//! to the sandbox and has it copy the Run's inputs into `uploads/`, runs the lead and posts
//! the result with the presented files. Questions wait in this process for their answer, with
//! the workspace, for the Run's `suspendAfter`; then the pod posts its checkpoint (with the
//! files of an `emptyDir` workspace) and exits 0 without a result, and the operator shows the
//! Run `Suspended` until the answer comes. An attempt after a lost or suspended pod resumes
//! from the question's checkpoint (`resume`). A run stopped by a limit posts its result too: the operator decides from it.
//! On SIGTERM it stops the agent, sends the progress not reported yet and exits within
//! [`TERM_BUDGET`].
//!
//! Exit codes: 0 the result is posted (whatever it says), or the pod suspended while its
//! question waits (the termination log says so); 1 the run could not start (the
//! environment, the run API, the config or the plan; the message is the termination message)
//! or a newer attempt replaced this pod; 75 the result could not be posted before the
//! deadline and the fallback report is in the termination log; 143 stopped by SIGTERM.

pub mod env;
mod fallback;
mod result;
mod resume;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, Shared};
use herd_crds::report::{Clarification, StopReason};
use herd_crds::wire::{ResultReport, RunConfig};
use herd_sandbox::{InputCopy, SandboxClient, ToolExecutor, UnixSocketExecutor};
use tokio::time::Instant;

use self::env::{DEFAULT_TERMINATION_LOG, PodEnv};
pub use self::fallback::FALLBACK_EXIT_CODE;
use self::fallback::fallback_report;
use self::result::{fallback_text, hand_back_outputs, outcome_report, result_report};
use self::resume::{Resume, resume};
use crate::agent::{AgentEvent, Limits, Observer, RunEnv, RunOutcome};
use crate::control::checkpoint::CheckpointStop;
use crate::control::deadline::Deadline;
use crate::control::run_api::{RunApiClient, RunApiControlPlane, Suspension};
use crate::control::{AskOutcome, ControlError, ControlPlane};
use crate::plan::{EnvFacts, RunPlan};
use crate::runtime::agents::RunAgents;
use crate::runtime::lead_run::run_lead_until;
use crate::runtime::local_sandbox::discover_skills;
use crate::runtime::pod_plan::pod_plan;
use crate::telemetry::TracedExecutor;
use crate::thread::ThreadState;

/// The result is posted.
pub const EXIT_POSTED: u8 = 0;
/// The pod suspended while its question waits: not a failure, the operator resumes the Run.
pub const EXIT_SUSPENDED: u8 = 0;
/// The run could not start, or a newer attempt replaced this pod.
pub const EXIT_FAILED: u8 = 1;
/// Stopped by SIGTERM (128 + 15, what a shell reports).
pub const EXIT_TERMINATED: u8 = 143;

/// How long the config is waited for (the operator may be failing over to another replica).
const CONFIG_WAIT: Duration = Duration::from_secs(120);
/// What the pod still does after SIGTERM: well within the 20 s it has (the Pod's grace period
/// is 30 s, and the `sandbox` sidecar stops after it).
pub const TERM_BUDGET: Duration = Duration::from_secs(15);
/// The most time kept after the agent's deadline for posting the result.
const POSTING_RESERVE: Duration = Duration::from_secs(10);

/// How a pod's run ended.
#[derive(Debug, PartialEq)]
enum Ending {
    /// The result is durable in the Run.
    Posted,
    /// The run could not start: why.
    Failed(String),
    /// A newer attempt of the Run replaced this pod: what the run API said.
    Superseded(String),
    /// The result could not be posted: the report for the termination log, and why.
    Fallback { report: String, why: String },
    /// SIGTERM stopped the pod: what the termination log says.
    Terminated(String),
    /// The question's checkpoint is posted and the pod ends while it waits: what the
    /// termination log says.
    Suspended(String),
}

/// Resolves when the pod must stop (SIGTERM: the Pod is being deleted — cancelled, timed out,
/// evicted). Shared, so every phase of the run can watch it.
pub type Stop = Shared<BoxFuture<'static, ()>>;

/// Runs the `agent` container with the environment `facts` until it ends or `stop` fires;
/// returns the exit code.
pub async fn run_pod(facts: &EnvFacts, observer: Arc<dyn Observer>, stop: Stop) -> u8 {
    let log = facts
        .var("HERD_TERMINATION_LOG")
        .unwrap_or(DEFAULT_TERMINATION_LOG)
        .to_owned();
    let ending = match PodEnv::from_facts(facts) {
        Ok(env) => run(&env, facts, observer, stop).await,
        Err(problem) => Ending::Failed(problem),
    };
    finish(Path::new(&log), ending)
}

/// Writes what the operator should read and picks the exit code.
fn finish(log: &Path, ending: Ending) -> u8 {
    match ending {
        Ending::Posted => EXIT_POSTED,
        Ending::Failed(message) => {
            tracing::error!("{message}");
            write_termination_log(log, &message);
            EXIT_FAILED
        }
        Ending::Superseded(message) => {
            let message =
                format!("stopped: a newer attempt of the Run replaced this pod: {message}");
            tracing::warn!("{message}");
            write_termination_log(log, &message);
            EXIT_FAILED
        }
        Ending::Fallback { report, why } => {
            tracing::error!(
                "the result could not be posted ({why}); the termination log holds its stop \
                 reason and the start of its text"
            );
            write_termination_log(log, &report);
            FALLBACK_EXIT_CODE
        }
        Ending::Terminated(message) => {
            tracing::warn!("{message}");
            write_termination_log(log, &message);
            EXIT_TERMINATED
        }
        Ending::Suspended(message) => {
            tracing::info!("{message}");
            write_termination_log(log, &message);
            EXIT_SUSPENDED
        }
    }
}

fn write_termination_log(path: &Path, text: &str) {
    if let Err(error) = std::fs::write(path, text) {
        tracing::warn!(path = %path.display(), %error, "cannot write the termination log");
    }
}

/// Runs `work` unless `stop` fires first.
async fn unless_stopped<T>(stop: &Stop, work: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        done = work => Some(done),
        () = stop.clone() => None,
    }
}

async fn run(env: &PodEnv, facts: &EnvFacts, observer: Arc<dyn Observer>, stop: Stop) -> Ending {
    let started = match unless_stopped(&stop, start(env, facts)).await {
        None => return Ending::Terminated(TERMINATED.to_owned()),
        Some(Ok(started)) => started,
        Some(Err(ending)) => return ending,
    };
    let Started {
        plan,
        control,
        inputs,
        resume,
    } = started;
    let mut state = ThreadState::new(plan.task.clone());
    let executor = match unless_stopped(&stop, open_sandbox(env, inputs)).await {
        None => return terminated(&control).await,
        Some(Ok(executor)) => executor,
        Some(Err(outcome)) => {
            let report = outcome_report(plan.attempt, &outcome, &state);
            return post_unless_stopped(&control, report, &stop).await;
        }
    };
    control.use_sandbox(executor.clone());
    // In the agent's log: which layers hold the tools, as the sandbox container told them.
    observer.on_event(AgentEvent::Sandbox {
        mode: "sandbox container".to_owned(),
        layers: executor.sandbox_layers(),
    });
    let lead = Lead {
        plan: &plan,
        executor: &executor,
        control: &control,
        observer: &observer,
    };
    let ran = tokio::select! {
        outcome = lead.run(resume, &mut state) => Some(outcome),
        message = control.superseded() => return Ending::Superseded(message),
        () = stop.clone() => None,
    };
    let outcome = match ran {
        Some(Ok(outcome)) => outcome,
        Some(Err(ending)) => return ending,
        None => return interrupted(&control, state).await,
    };
    if outcome.stop_reason == StopReason::InputRequired {
        return suspended(outcome.question.as_ref());
    }
    if plan.depth > 0 {
        hand_back_outputs(&mut state, executor.as_ref(), observer.as_ref()).await;
    }
    let reading = result_report(
        plan.attempt,
        &outcome,
        &state,
        executor.as_ref(),
        observer.as_ref(),
    );
    let Some(report) = unless_stopped(&stop, reading).await else {
        return terminated(&control).await;
    };
    post_unless_stopped(&control, report, &stop).await
}

/// How the pod ends when its wait for an answer suspended it (the checkpoint is posted).
fn suspended(question: Option<&Clarification>) -> Ending {
    Ending::Suspended(format!(
        "suspended while waiting for the answer to {}: the checkpoint is posted, and the Run \
         resumes in a new attempt once answered",
        question.map_or("its question", |q| q.id.as_str())
    ))
}

/// What the termination log says when SIGTERM stopped the pod.
const TERMINATED: &str = "stopped by SIGTERM";

/// SIGTERM while the agent works: what progress is not reported yet goes out (within
/// [`TERM_BUDGET`]), never a result — the operator decides how the Run ends (a cancel or a
/// timeout has ended it already; an evicted pod's Run may get another attempt, which a
/// result would prevent).
async fn terminated(control: &RunApiControlPlane) -> Ending {
    control.flush_progress(TERM_BUDGET).await;
    Ending::Terminated(TERMINATED.to_owned())
}

/// SIGTERM while the lead works: the thread as it stands goes to the run API as the Run's
/// checkpoint, so another attempt (after an eviction or a drain) resumes instead of starting
/// over, then the progress not reported yet; all within [`TERM_BUDGET`]. A question waiting
/// for its answer has its checkpoint already, and keeps it.
async fn interrupted(control: &RunApiControlPlane, state: ThreadState) -> Ending {
    let budget = Instant::now() + TERM_BUDGET;
    let message = if control.waits_for_an_answer() {
        format!("{TERMINATED} while its question waited (its checkpoint was posted with it)")
    } else {
        match control.post_interruption(state, budget).await {
            Ok(()) => format!("{TERMINATED}; the checkpoint is posted"),
            Err(error) => {
                tracing::warn!(%error, "the checkpoint of the interrupted run was not posted");
                format!("{TERMINATED}; the checkpoint was not posted")
            }
        }
    };
    control
        .flush_progress(budget.saturating_duration_since(Instant::now()))
        .await;
    Ending::Terminated(message)
}

/// Posts the result; if SIGTERM comes meanwhile, the post gets [`TERM_BUDGET`] more.
async fn post_unless_stopped(
    control: &RunApiControlPlane,
    report: ResultReport,
    stop: &Stop,
) -> Ending {
    let posting = post(control, report);
    tokio::pin!(posting);
    tokio::select! {
        ending = &mut posting => ending,
        () = stop.clone() => match tokio::time::timeout(TERM_BUDGET, posting).await {
            Ok(Ending::Posted) => {
                Ending::Terminated(format!("{TERMINATED} after posting the result"))
            }
            _ => Ending::Terminated(format!("{TERMINATED} before the result was posted")),
        },
    }
}

/// Connects to the `sandbox` container and has it copy the Run's inputs into `uploads/`; a
/// sandbox that cannot be reached or fails the copy ends the run.
async fn open_sandbox(
    env: &PodEnv,
    inputs: Vec<InputCopy>,
) -> Result<Arc<dyn ToolExecutor>, RunOutcome> {
    let socket = UnixSocketExecutor::connect(&env.sandbox_socket)
        .await
        .map_err(|error| failed(StopReason::SandboxUnavailable, error.to_string()))?;
    let executor = TracedExecutor::new(Arc::new(socket));
    executor.install_inputs(inputs).await.map_err(|error| {
        failed(
            StopReason::SandboxUnavailable,
            format!("cannot copy the Run's inputs into uploads/: {error}"),
        )
    })?;
    Ok(Arc::new(executor))
}

/// What a run starts from.
struct Started {
    plan: Arc<RunPlan>,
    /// Holds the Run's deadline.
    control: Arc<RunApiControlPlane>,
    /// The Run's inputs, for the sandbox to copy.
    inputs: Vec<InputCopy>,
    /// Where an earlier attempt's question left the thread, if one did.
    resume: Option<Resume>,
}

/// Reaches the run API, reads the Run's config and plans the run.
async fn start(env: &PodEnv, facts: &EnvFacts) -> Result<Started, Ending> {
    let ca = tokio::fs::read(&env.ca_file).await.map_err(|error| {
        Ending::Failed(format!(
            "cannot read the run API's CA bundle {} (HERD_CA_FILE): {error}",
            env.ca_file.display()
        ))
    })?;
    let client = RunApiClient::new(&env.target, &ca, env.token_file.clone())
        .map_err(|error| Ending::Failed(error.to_string()))?;
    let config: RunConfig = client
        .get("config", Instant::now() + CONFIG_WAIT)
        .await
        .map_err(|error| match error {
            ControlError::StaleAttempt(message) => Ending::Superseded(message),
            error => Ending::Failed(format!("cannot read the Run's config: {error}")),
        })?;
    if config.attempt != env.attempt {
        return Err(Ending::Superseded(format!(
            "the run API serves attempt {} of the Run, this pod is attempt {}",
            config.attempt, env.attempt
        )));
    }
    let deadline = Deadline::at(Instant::now() + Duration::from_secs(config.seconds_left));
    let plan = pod_plan(&config, facts).map_err(|error| {
        Ending::Failed(format!(
            "the Run {}/{} cannot run: {error}",
            env.target.namespace, env.target.name
        ))
    })?;
    let resume = resume(&config).map_err(|error| {
        Ending::Failed(format!(
            "attempt {} of the Run cannot resume from its checkpoint: {error}",
            config.attempt
        ))
    })?;
    let control = RunApiControlPlane::new(
        Arc::new(client),
        config.attempt,
        deadline,
        plan.answers.clone(),
    );
    if let Some(seconds) = config.suspend_after_seconds
        && config.depth == 0
    {
        control.use_suspension(Suspension {
            after: Duration::from_secs(seconds),
            save_files: config
                .agent
                .sandbox
                .workspace
                .persistent_volume_claim
                .is_none(),
        });
    }
    if let Some(approval) = &plan.approval {
        control.use_approval_timeout(approval.wait, approval.on_timeout);
    }
    let inputs = config
        .run
        .inputs
        .iter()
        .enumerate()
        .map(|(index, input)| InputCopy {
            index,
            path: input.path.clone(),
        })
        .collect();
    Ok(Started {
        plan: Arc::new(plan),
        control: Arc::new(control),
        inputs,
        resume,
    })
}

/// What the lead runs with.
struct Lead<'a> {
    plan: &'a Arc<RunPlan>,
    executor: &'a Arc<dyn ToolExecutor>,
    control: &'a Arc<RunApiControlPlane>,
    observer: &'a Arc<dyn Observer>,
}

impl Lead<'_> {
    /// Builds the agents and runs the lead until it ends (from the checkpoint of `resume`,
    /// once its question is answered, if there is one), keeping time to post the result; what
    /// ends the pod without a result is the error.
    async fn run(
        &self,
        resume: Option<Resume>,
        state: &mut ThreadState,
    ) -> Result<RunOutcome, Ending> {
        let Lead {
            plan,
            executor,
            control,
            observer,
        } = self;
        let skills =
            match discover_skills(executor.as_ref(), plan.skills.as_deref(), observer.as_ref())
                .await
            {
                Ok(skills) => skills,
                Err(error) => return Ok(failed(StopReason::SandboxUnavailable, error.0)),
            };
        for warning in &plan.warnings {
            observer.on_event(AgentEvent::Warning {
                agent: "lead".into(),
                message: warning.clone(),
            });
        }
        let agents = RunAgents::start(
            (*plan).clone(),
            (*executor).clone(),
            skills,
            (*observer).clone(),
        )
        .await
        .map_err(|error| Ending::Failed(error.to_string()))?;
        let dyn_control: Arc<dyn ControlPlane> = (*control).clone();
        let reserve = POSTING_RESERVE.min(plan.time_left / 10);
        let lead_deadline = control.deadline().earlier_by(reserve);
        // A child Run is its parent's `task` call: it runs as that subagent (its prompt, its
        // tools, no questions or presented files), as it would have in-process.
        let lead = match plan.subagent_type {
            Some(kind) => agents.subagent(
                kind,
                kind.as_str().to_owned(),
                plan.delegates_at(plan.depth),
                &dyn_control,
                Limits {
                    max_model_calls: plan.max_model_calls,
                    deadline: Some(lead_deadline.clone()),
                    token_budget: plan.token_budget,
                    ..Limits::default()
                },
            ),
            None => agents.lead(&dyn_control, Some(lead_deadline.clone())),
        }
        .map_err(|error| Ending::Failed(format!("cannot build the system prompt: {error}")))?;
        control.use_compactor(agents.checkpoint_compactor(&lead));
        if let Some(resume) = resume
            && let Some(outcome) = self.restore(resume, state).await?
        {
            return Ok(outcome);
        }
        let env = RunEnv {
            executor: (*executor).clone(),
            control: dyn_control,
        };
        run_lead_until(
            &lead_deadline,
            plan.time_left,
            &lead,
            state,
            &env,
            observer.as_ref(),
        )
        .await
        .map_err(|error| stopped(error.0))
    }

    /// Puts the checkpoint of `resume` back: the workspace's saved files restored, and the
    /// thread continued with the answer to its question, if it asked one. `Some` when the run
    /// ends here instead.
    async fn restore(
        &self,
        mut resume: Resume,
        state: &mut ThreadState,
    ) -> Result<Option<RunOutcome>, Ending> {
        let files = std::mem::take(&mut resume.files);
        if !files.is_empty() {
            let count = files.len();
            if let Err(error) = self.executor.restore_files(files).await {
                return Ok(Some(failed(
                    StopReason::SandboxUnavailable,
                    format!("cannot restore the workspace's saved files: {error}"),
                )));
            }
            tracing::info!(
                count,
                "restored the workspace's files saved at the suspension"
            );
        }
        let answer = match &resume.stop {
            CheckpointStop::Question(question) => {
                match self.answer(question, &resume.state).await? {
                    Ok(answer) => Some(answer),
                    Err(outcome) => return Ok(Some(outcome)),
                }
            }
            CheckpointStop::Interrupted(how) => {
                tracing::info!(
                    signal = %how.signal,
                    at = %how.at,
                    "resuming from the checkpoint of an interrupted attempt"
                );
                None
            }
            // The thread holds the calls (`awaitingApproval`): the loop settles them
            // first, with the decisions in `spec.responses` or by asking again.
            CheckpointStop::Approval(requests) => {
                tracing::info!(
                    count = requests.len(),
                    "resuming from the checkpoint of tool calls waiting for approval"
                );
                None
            }
        };
        *state = resume.continued(answer);
        Ok(None)
    }

    /// The answer to the question an earlier attempt asked: from `spec.responses`, or asked
    /// again (this attempt reports the question and waits for it); the inner error is how the
    /// run ends instead.
    async fn answer(
        &self,
        question: &Clarification,
        checkpoint: &ThreadState,
    ) -> Result<Result<String, RunOutcome>, Ending> {
        tracing::info!(id = %question.id, "resuming from the checkpoint of an earlier attempt");
        let asked = self
            .control
            .ask(question, checkpoint)
            .await
            .map_err(stopped)?;
        match asked {
            AskOutcome::Answered(answer) => {
                self.observer.on_event(AgentEvent::Answered {
                    agent: "lead".into(),
                    id: question.id.clone(),
                    answer: answer.clone(),
                });
                Ok(Ok(answer))
            }
            AskOutcome::Ended { reason, error } => Ok(Err(failed(reason, error))),
            AskOutcome::Suspended => Err(suspended(Some(question))),
        }
    }
}

/// How a control-plane failure ends the pod: a newer attempt replaced it, or it failed.
fn stopped(error: ControlError) -> Ending {
    match error {
        ControlError::StaleAttempt(message) => Ending::Superseded(message),
        error => Ending::Failed(error.to_string()),
    }
}

fn failed(stop_reason: StopReason, error: String) -> RunOutcome {
    RunOutcome {
        stop_reason,
        answer: String::new(),
        error: Some(error),
        question: None,
    }
}

/// Posts the result; what cannot be posted goes to the termination log.
async fn post(control: &RunApiControlPlane, report: ResultReport) -> Ending {
    let fallback = fallback_report(report.stop_reason, fallback_text(&report));
    match control.post_result(report).await {
        Ok(()) => Ending::Posted,
        Err(ControlError::StaleAttempt(message)) => Ending::Superseded(message),
        Err(error) => Ending::Fallback {
            report: fallback,
            why: error.to_string(),
        },
    }
}
