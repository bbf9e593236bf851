//! `herd-runner run`: the lead agent on a laptop — manifests in, answer and files out.
//!
//! The shell around the run plan: it reads the files, the environment and the terminal,
//! plans the run (`local_plan`), and runs its agents with the tools in a local sandbox,
//! subagents in-process, questions on the terminal (or a checkpoint) and memory in a file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::FutureExt as _;
use herd_crds::agent::MemoryScope;
use herd_crds::approval::ApprovalRequest;
use herd_crds::report::{Clarification, StopReason, Usage};
use herd_crds::wire::{Answer, ResultReport};
use herd_sandbox::TOOL_GRACE;

use super::agents::RunAgents;
use super::in_process_subagents::InProcessSubagents;
use super::interrupt::{Interrupt, StopSignal};
use super::lead_run::run_lead_until;
use super::local_error::LocalError;
use super::local_plan::{Overrides, local_plan};
use super::local_sandbox::{SandboxMode, discover_skills, open_sandbox};
use super::manifests::LocalManifests;
use super::run_ending::RunEnding;
use super::run_list::PID_FILE;
use super::run_record::RunRecord;
use super::workdir::Workdir;
use crate::agent::{AgentEvent, Observer, RunEnv, RunOutcome};
use crate::control::ControlPlane;
use crate::control::checkpoint::{CHECKPOINT_FILE, Checkpoint, CheckpointStop, Interruption};
use crate::control::deadline::Deadline;
use crate::control::local::{LocalControlPlane, Prompter, Questions};
use crate::memory::file::MemoryFile;
use crate::plan::{EnvFacts, RunPlan};
use crate::thread::{Message, ThreadState};

/// What `herd-runner run` was asked to do.
#[derive(Clone, Default)]
pub struct LocalRequest {
    pub files: Vec<PathBuf>,
    pub overrides: Overrides,
    pub api_key_env: Option<String>,
    pub workdir: PathBuf,
    pub inputs: Vec<PathBuf>,
    /// Ask on the terminal with this prompter; `None` saves a checkpoint instead.
    pub prompter: Option<Arc<dyn Prompter>>,
    /// `--resume`: continue the run in `workdir` from its checkpoint.
    pub resume: bool,
    /// The answer to the question the resumed run asked.
    pub answer: Option<String>,
    /// Decisions on the tool calls the resumed run waits for (`--approve`, `--deny`).
    pub decisions: Vec<Answer>,
    /// Stops the run at its next safe point, saving a checkpoint (Ctrl-C, SIGTERM).
    pub interrupt: Option<Interrupt>,
    pub memory_dir: PathBuf,
    /// Where the tools execute.
    pub sandbox: SandboxMode,
}

/// How a local run ended.
#[derive(Debug)]
pub struct LocalResult {
    pub outcome: RunOutcome,
    /// Presented files: virtual path and where it is on this machine.
    pub artifacts: Vec<(String, PathBuf)>,
    pub workdir: PathBuf,
    /// The question, when the run stopped for an answer (a checkpoint was saved).
    pub question: Option<Clarification>,
    /// The tool calls waiting for approval, when the run stopped for them (a checkpoint was
    /// saved).
    pub approvals: Vec<ApprovalRequest>,
    pub title: Option<String>,
    pub usage: Usage,
    /// The signal that interrupted the run (a checkpoint was saved).
    pub interrupted: Option<StopSignal>,
}

/// Runs (or resumes) an agent locally.
pub async fn run_local(
    request: LocalRequest,
    observer: Arc<dyn Observer>,
) -> Result<LocalResult, LocalError> {
    let facts = EnvFacts::from_process();
    let start = Start::of(&request, &facts)?;
    // A run refused before its agent starts leaves no folder it created behind.
    let mut created = NewFolder::at(&request.workdir);
    let workdir = prepare_workdir(&request, &start)?;
    let plan = start.plan.clone();

    // Held until the run ends: dropping it stops the confined sandbox.
    let (executor, sandbox) = open_sandbox(
        request.sandbox,
        std::env::current_exe(),
        &workdir,
        observer.as_ref(),
    )
    .await?;
    let skills = discover_skills(&*executor, plan.skills.as_deref(), observer.as_ref()).await?;
    for warning in &plan.warnings {
        observer.on_event(AgentEvent::Warning {
            agent: "lead".into(),
            message: warning.clone(),
        });
    }
    let streamed = Arc::new(StreamedAnswer::to(observer.clone()));
    let observer: Arc<dyn Observer> = streamed.clone();
    let agents =
        Arc::new(RunAgents::start(plan.clone(), executor.clone(), skills, observer.clone()).await?);
    let control = Arc::new(local_control(&agents, &request, &workdir, &facts));
    let dyn_control: Arc<dyn ControlPlane> = control.clone();
    let deadline = Deadline::at(tokio::time::Instant::now() + plan.time_left);
    let lead = agents
        .lead(&dyn_control, Some(deadline.clone()))
        .map_err(|error| LocalError(format!("cannot build the system prompt: {error}")))?;
    let mut state = start.thread(observer.as_ref());
    let env = RunEnv {
        executor,
        control: dyn_control.clone(),
    };
    created.keep();
    let _running = PidFile::write(&workdir.state_dir());
    let interrupt = request
        .interrupt
        .clone()
        .unwrap_or_else(|| futures::future::pending().boxed().shared());
    let mut lead_run = Box::pin(run_lead_until(
        &deadline,
        plan.time_left,
        &lead,
        &mut state,
        &env,
        observer.as_ref(),
    ));
    let ran = tokio::select! {
        // First: a signal wins over whatever the stopped tools make of the sandbox stopping.
        biased;
        signal = interrupt => Err(signal),
        outcome = &mut lead_run => Ok(outcome),
    };
    match ran {
        Ok(outcome) => {
            drop(lead_run);
            let outcome = outcome.map_err(|error| LocalError(error.to_string()))?;
            finish(outcome, state, &control, workdir, None).await
        }
        Err(signal) => {
            // The tools get SIGTERM and their grace while the run still holds them: dropping
            // the run first would SIGKILL a command at once.
            sandbox.stop_tools(TOOL_GRACE).await;
            drop(lead_run);
            let outcome = interrupted(&signal, &state, &workdir, observer.as_ref(), &streamed)?;
            finish(outcome, state, &control, workdir, Some(signal)).await
        }
    }
}

/// The work folder of `request`, prepared: a new run's record and inputs written, and the
/// skills installed.
fn prepare_workdir(request: &LocalRequest, start: &Start) -> Result<Workdir, LocalError> {
    let workdir = Workdir::prepare(&request.workdir).map_err(|error| {
        LocalError(format!(
            "cannot prepare the work folder {}: {error}",
            request.workdir.display()
        ))
    })?;
    if start.resumed.is_none() {
        RunRecord::new(
            &start.manifests,
            &start.plan.task,
            &request.overrides,
            request.api_key_env.as_deref(),
        )
        .write(&workdir.state_dir())?;
        install_inputs(&workdir, &start.manifests, &request.inputs)?;
    }
    workdir
        .install_skills(&start.manifests.skills)
        .map_err(|error| LocalError(error.to_string()))?;
    Ok(workdir)
}

/// How a run `signal` interrupted ends: its checkpoint saved, the stop told, and the answer
/// what was streamed so far.
fn interrupted(
    signal: &StopSignal,
    state: &ThreadState,
    workdir: &Workdir,
    observer: &dyn Observer,
    streamed: &StreamedAnswer,
) -> Result<RunOutcome, LocalError> {
    Checkpoint::interrupted(signal.name(), state.clone())
        .save(&workdir.state_dir())
        .map_err(|error| {
            LocalError(format!(
                "interrupted by {}, and the checkpoint could not be saved: {error}",
                signal.name()
            ))
        })?;
    observer.on_event(AgentEvent::Stopped {
        agent: "lead".into(),
        reason: StopReason::Interrupted,
    });
    Ok(RunOutcome {
        stop_reason: StopReason::Interrupted,
        answer: streamed.text(),
        error: None,
        question: None,
    })
}

/// A work folder this run creates: removed again when dropped unless kept, so a run refused
/// before it starts leaves nothing.
struct NewFolder(Option<PathBuf>);

impl NewFolder {
    /// Watches `path` if it does not exist yet.
    fn at(path: &Path) -> Self {
        NewFolder((!path.exists()).then(|| path.to_path_buf()))
    }

    /// The run has started: the folder stays.
    fn keep(&mut self) {
        self.0 = None;
    }
}

impl Drop for NewFolder {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// `.herd/pid` while this process runs the run, for `herd-runner runs`.
struct PidFile(PathBuf);

impl PidFile {
    fn write(state_dir: &Path) -> Option<Self> {
        let path = state_dir.join(PID_FILE);
        std::fs::write(&path, std::process::id().to_string()).ok()?;
        Some(PidFile(path))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Passes events on, keeping the text the lead streams in its current model call: the
/// partial answer an interrupted run prints.
struct StreamedAnswer {
    inner: Arc<dyn Observer>,
    text: Mutex<String>,
}

impl StreamedAnswer {
    fn to(inner: Arc<dyn Observer>) -> Self {
        StreamedAnswer {
            inner,
            text: Mutex::new(String::new()),
        }
    }

    fn text(&self) -> String {
        self.text
            .lock()
            .map(|text| text.clone())
            .unwrap_or_default()
    }
}

impl Observer for StreamedAnswer {
    fn on_event(&self, event: AgentEvent) {
        match &event {
            AgentEvent::ModelCall { agent, .. } if agent == "lead" => {
                if let Ok(mut text) = self.text.lock() {
                    text.clear();
                }
            }
            AgentEvent::Text { agent, text: delta } if agent == "lead" => {
                if let Ok(mut text) = self.text.lock() {
                    text.push_str(delta);
                }
            }
            _ => {}
        }
        self.inner.on_event(event);
    }
}

/// What a run starts from: the manifests and the plan, and for `--resume` the checkpoint and
/// the answer.
struct Start {
    manifests: LocalManifests,
    plan: Arc<RunPlan>,
    resumed: Option<Resumed>,
}

impl Start {
    /// A new run plans from the files and the command line; a resumed one from the record in
    /// its folder, from its checkpoint. Nothing is written yet.
    fn of(request: &LocalRequest, facts: &EnvFacts) -> Result<Self, LocalError> {
        if !request.resume {
            let manifests = LocalManifests::load(&request.files)?;
            let api_key_env = request.api_key_env.as_deref();
            let plan = local_plan(&manifests, &request.overrides, api_key_env, facts)?;
            return Ok(Start {
                manifests,
                plan: Arc::new(plan),
                resumed: None,
            });
        }
        let dir = &request.workdir;
        let state_dir = Workdir::state_dir_of(dir);
        let record = RunRecord::read(&state_dir)?;
        let checkpoint = match Checkpoint::load(&state_dir) {
            Ok(checkpoint) => checkpoint,
            Err(error) => {
                return Err(match RunEnding::read(&state_dir) {
                    Some(ending) => finished(dir, &ending),
                    None if error.kind() == std::io::ErrorKind::NotFound => LocalError(format!(
                        "cannot resume: the run in {} left no checkpoint (it was killed before \
                         it could save one); start it again",
                        dir.display()
                    )),
                    None => LocalError(format!("cannot resume: {error}")),
                });
            }
        };
        let resumed = Resumed::of(checkpoint, request.answer.clone(), &request.decisions, dir)?;
        let manifests = record.manifests()?;
        let mut plan = local_plan(&manifests, &record.overrides(), record.api_key_env(), facts)?;
        // The decisions are handed out when the resumed loop asks for them again.
        plan.answers.extend(request.decisions.iter().cloned());
        Ok(Start {
            manifests,
            plan: Arc::new(plan),
            resumed: Some(resumed),
        })
    }

    /// The thread to run: the task, or the checkpoint with the answer or the interruption
    /// appended.
    fn thread(self, observer: &dyn Observer) -> ThreadState {
        let Some(resumed) = self.resumed else {
            return ThreadState::new(self.plan.task.clone());
        };
        let mut state = resumed.state;
        match resumed.turn {
            ResumeTurn::Answer { id, answer } => {
                observer.on_event(AgentEvent::Answered {
                    agent: "lead".into(),
                    id: id.clone(),
                    answer: answer.clone(),
                });
                state
                    .messages
                    .push(Message::user(format!("answer-{id}"), answer));
            }
            ResumeTurn::Interrupted(how) => state.messages.push(how.resume_turn()),
            // The held calls are in the thread: the loop settles them with the decisions.
            ResumeTurn::Approval => {}
        }
        state
    }
}

/// A run resumed from its checkpoint.
struct Resumed {
    state: ThreadState,
    turn: ResumeTurn,
}

/// What the resumed run goes on from.
enum ResumeTurn {
    /// The answer to the question it asked.
    Answer { id: String, answer: String },
    /// Being told it was interrupted.
    Interrupted(Interruption),
    /// The decisions on its held tool calls.
    Approval,
}

impl Resumed {
    /// `checkpoint` resumed with `answer` or `decisions`: a question needs an answer, tool
    /// calls waiting for approval decisions on them (each for one of them), an interruption
    /// neither.
    fn of(
        checkpoint: Checkpoint,
        answer: Option<String>,
        decisions: &[Answer],
        dir: &Path,
    ) -> Result<Self, LocalError> {
        let dir = dir.display();
        if let CheckpointStop::Approval(requests) = &checkpoint.stop {
            if answer.is_some() {
                return Err(LocalError(format!(
                    "--answer: the run in {dir} waits for tool calls to be approved, not for \
                     an answer: resume it with --approve ID or --deny ID"
                )));
            }
            let waiting = || {
                requests
                    .iter()
                    .map(|r| format!("\n  {}: {}", r.id, r.summary()))
                    .collect::<String>()
            };
            if decisions.is_empty() {
                return Err(LocalError(format!(
                    "the run in {dir} waits for approval of:{}\nresume it with: herd-runner \
                     run --resume {dir} --approve ID (or --deny ID --reason \"...\")",
                    waiting()
                )));
            }
            if let Some(unknown) = decisions
                .iter()
                .find(|d| !requests.iter().any(|r| r.id == d.id))
            {
                return Err(LocalError(format!(
                    "no tool call of the run in {dir} waits under the id {:?}; these do:{}",
                    unknown.id,
                    waiting()
                )));
            }
            return Ok(Resumed {
                state: checkpoint.state,
                turn: ResumeTurn::Approval,
            });
        }
        if !decisions.is_empty() {
            return Err(LocalError(format!(
                "--approve/--deny: no tool call of the run in {dir} waits for approval"
            )));
        }
        let turn = match (checkpoint.stop, answer) {
            (CheckpointStop::Question(question), Some(answer)) => ResumeTurn::Answer {
                id: question.id,
                answer,
            },
            (CheckpointStop::Question(question), None) => {
                return Err(LocalError(format!(
                    "the run in {dir} waits for the answer to: {}\nresume it with: herd-runner \
                     run --resume {dir} --answer \"...\"",
                    question.question
                )));
            }
            (CheckpointStop::Interrupted(how), None) => ResumeTurn::Interrupted(how),
            (CheckpointStop::Interrupted(how), Some(_)) => {
                return Err(LocalError(format!(
                    "--answer: the run in {dir} asked no question, it was interrupted by {}: \
                     resume it without --answer",
                    how.signal
                )));
            }
            // Returned above.
            (CheckpointStop::Approval(_), _) => ResumeTurn::Approval,
        };
        Ok(Resumed {
            state: checkpoint.state,
            turn,
        })
    }
}

/// Why a finished run cannot be resumed.
fn finished(dir: &Path, ending: &RunEnding) -> LocalError {
    LocalError(format!(
        "cannot resume: the run in {} has finished ({:?} at {}); there is nothing to resume",
        dir.display(),
        ending.stop_reason,
        ending.finished_at
    ))
}

/// The lead's control plane: questions on the terminal or saved, the Run's answers handed
/// out first, memory in a file outside the work folder, subagents in-process.
fn local_control(
    agents: &Arc<RunAgents>,
    request: &LocalRequest,
    workdir: &Workdir,
    facts: &EnvFacts,
) -> LocalControlPlane {
    let plan = agents.plan();
    let questions = match &request.prompter {
        Some(prompter) => Questions::Interactive(prompter.clone()),
        None => Questions::Suspend(workdir.state_dir()),
    };
    let memory = plan.memory.enabled.then(|| {
        MemoryFile::new(
            memory_path(
                &request.memory_dir,
                &plan.agent_name,
                &plan.memory.scope,
                facts,
            ),
            "local",
            plan.memory.max_facts as usize,
        )
    });
    InProcessSubagents::control_plane(agents, 0, questions, memory)
        .with_answers(plan.answers.clone())
}

/// Posts the result, drops a checkpoint nothing will resume and records how the run ended
/// (a question or a signal leaves the checkpoint instead), and says where the files are.
async fn finish(
    outcome: RunOutcome,
    state: ThreadState,
    control: &LocalControlPlane,
    workdir: Workdir,
    interrupted: Option<StopSignal>,
) -> Result<LocalResult, LocalError> {
    let usage = state.usage_with_children();
    if !matches!(
        outcome.stop_reason,
        StopReason::InputRequired | StopReason::Interrupted
    ) {
        let state_dir = workdir.state_dir();
        // A finished run has nothing to resume.
        let _ = std::fs::remove_file(state_dir.join(CHECKPOINT_FILE));
        let ending = RunEnding {
            stop_reason: outcome.stop_reason,
            finished_at: jiff::Timestamp::now().to_string(),
            title: state.title.clone(),
            usage: usage.clone(),
        };
        if let Err(error) = ending.write(&state_dir) {
            tracing::warn!(%error, "cannot record how the run ended");
        }
    }
    let artifacts: Vec<(String, PathBuf)> = state
        .artifacts
        .iter()
        .filter_map(|path| Some((path.clone(), workdir.host_path(path)?)))
        .collect();
    control
        .post_result(ResultReport {
            attempt: 1,
            seq: 0,
            stop_reason: outcome.stop_reason,
            text: outcome.answer.clone(),
            title: state.title.clone(),
            todos: state.todos.clone(),
            usage: usage.clone(),
            files: Vec::new(),
            error: outcome.error.clone(),
        })
        .await
        .map_err(|error| LocalError(error.to_string()))?;
    let approvals = if outcome.stop_reason == StopReason::InputRequired {
        state.awaiting_approval.clone()
    } else {
        Vec::new()
    };
    Ok(LocalResult {
        question: outcome.question.clone(),
        approvals,
        outcome,
        artifacts,
        workdir: workdir.root,
        title: state.title,
        usage,
        interrupted,
    })
}

fn install_inputs(
    workdir: &Workdir,
    manifests: &LocalManifests,
    inputs: &[PathBuf],
) -> Result<(), LocalError> {
    let mut files = Vec::new();
    for path in inputs {
        let bytes = std::fs::read(path).map_err(|error| {
            LocalError(format!("--input {}: cannot read: {error}", path.display()))
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        files.push((name, bytes));
    }
    workdir
        .add_uploads(None, &files)
        .map_err(|error| LocalError(error.to_string()))?;
    if let Some(run) = &manifests.run {
        for (index, input) in run.spec.inputs.iter().enumerate() {
            let name = &input.config_map_ref.name;
            let data = manifests.config_maps.get(name).ok_or_else(|| {
                LocalError(format!(
                    "spec.inputs[{index}]: ConfigMap '{name}' is not among the files given (add it with -f)"
                ))
            })?;
            let files: Vec<(String, Vec<u8>)> = data
                .iter()
                .map(|(key, text)| (key.clone(), text.clone().into_bytes()))
                .collect();
            workdir
                .add_uploads(input.path.as_deref(), &files)
                .map_err(|error| LocalError(format!("spec.inputs[{index}]: {error}")))?;
        }
    }
    Ok(())
}

/// Memory lives outside the work folder so the next run finds it.
fn memory_path(dir: &Path, agent_name: &str, scope: &MemoryScope, facts: &EnvFacts) -> PathBuf {
    match scope {
        MemoryScope::Agent => dir.join(format!("{agent_name}.json")),
        MemoryScope::User => {
            let user = facts.var("USER").unwrap_or("local");
            dir.join(agent_name).join(format!("{user}.json"))
        }
    }
}
