//! `herd-runner run`: the lead agent on a laptop — manifests in, answer and files out.
//!
//! The shell around the run plan: it reads the files, the environment and the terminal,
//! plans the run (`local_plan`), and runs its agents with the tools in a local sandbox,
//! subagents in-process, questions on the terminal (or a checkpoint) and memory in a file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use herd_crds::agent::MemoryScope;
use herd_crds::report::{Clarification, StopReason, Usage};
use herd_crds::wire::ResultReport;

use super::agents::{AgentsError, RunAgents};
use super::in_process_subagents::InProcessSubagents;
use super::lead_run::run_lead_until;
use super::local_plan::{Overrides, local_plan};
use super::local_sandbox::{SandboxMode, discover_skills, open_sandbox};
use super::manifests::{LocalManifests, ManifestsError};
use super::run_record::{RecordError, RunRecord};
use super::workdir::Workdir;
use crate::agent::{AgentEvent, Observer, RunEnv, RunOutcome};
use crate::control::ControlPlane;
use crate::control::checkpoint::{CHECKPOINT_FILE, Checkpoint};
use crate::control::deadline::Deadline;
use crate::control::local::{LocalControlPlane, Prompter, Questions};
use crate::memory::file::MemoryFile;
use crate::plan::{EnvFacts, PlanError, RunPlan};
use crate::thread::{Message, ThreadState};

/// A local run could not start or failed outside the agent (bad files, unreadable folder).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LocalError(pub String);

impl From<ManifestsError> for LocalError {
    fn from(error: ManifestsError) -> Self {
        LocalError(error.0)
    }
}

impl From<PlanError> for LocalError {
    fn from(error: PlanError) -> Self {
        LocalError(error.0)
    }
}

impl From<RecordError> for LocalError {
    fn from(error: RecordError) -> Self {
        LocalError(error.0)
    }
}

impl From<AgentsError> for LocalError {
    fn from(error: AgentsError) -> Self {
        LocalError(error.to_string())
    }
}

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
    /// `--resume`: continue the run in `workdir` with this answer.
    pub answer: Option<String>,
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
    pub title: Option<String>,
    pub usage: Usage,
}

/// Runs (or resumes) an agent locally.
pub async fn run_local(
    request: LocalRequest,
    observer: Arc<dyn Observer>,
) -> Result<LocalResult, LocalError> {
    let workdir = Workdir::prepare(&request.workdir).map_err(|error| {
        LocalError(format!(
            "cannot prepare the work folder {}: {error}",
            request.workdir.display()
        ))
    })?;
    let facts = EnvFacts::from_process();
    let start = Start::of(&request, &workdir, &facts)?;
    let plan = start.plan.clone();
    if start.resumed.is_none() {
        install_inputs(&workdir, &start.manifests, &request.inputs)?;
    }
    workdir
        .install_skills(&start.manifests.skills)
        .map_err(|error| LocalError(error.to_string()))?;

    // Held until the run ends: dropping it stops the confined sandbox.
    let (executor, _confined) = open_sandbox(
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
    let outcome = run_lead_until(
        &deadline,
        plan.time_left,
        &lead,
        &mut state,
        &env,
        observer.as_ref(),
    )
    .await
    .map_err(|error| LocalError(error.to_string()))?;
    finish(outcome, state, &control, workdir).await
}

/// What a run starts from: the manifests and the plan, and for `--resume` the checkpoint and
/// the answer.
struct Start {
    manifests: LocalManifests,
    plan: Arc<RunPlan>,
    resumed: Option<(Checkpoint, String)>,
}

impl Start {
    /// A new run plans from the files and the command line and records both; a resumed one
    /// plans from the record.
    fn of(request: &LocalRequest, workdir: &Workdir, facts: &EnvFacts) -> Result<Self, LocalError> {
        let state_dir = workdir.state_dir();
        let Some(answer) = &request.answer else {
            let manifests = LocalManifests::load(&request.files)?;
            let api_key_env = request.api_key_env.as_deref();
            let plan = local_plan(&manifests, &request.overrides, api_key_env, facts)?;
            RunRecord::new(&manifests, &plan.task, &request.overrides, api_key_env)
                .write(&state_dir)?;
            return Ok(Start {
                manifests,
                plan: Arc::new(plan),
                resumed: None,
            });
        };
        let record = RunRecord::read(&state_dir)?;
        let manifests = record.manifests()?;
        let plan = local_plan(&manifests, &record.overrides(), record.api_key_env(), facts)?;
        let checkpoint = Checkpoint::load(&state_dir)
            .map_err(|error| LocalError(format!("cannot resume: {error}")))?;
        Ok(Start {
            manifests,
            plan: Arc::new(plan),
            resumed: Some((checkpoint, answer.clone())),
        })
    }

    /// The thread to run: the task, or the checkpoint with the answer appended.
    fn thread(self, observer: &dyn Observer) -> ThreadState {
        let Some((checkpoint, answer)) = self.resumed else {
            return ThreadState::new(self.plan.task.clone());
        };
        observer.on_event(AgentEvent::Answered {
            agent: "lead".into(),
            id: checkpoint.question.id.clone(),
            answer: answer.clone(),
        });
        let mut state = checkpoint.state;
        state.messages.push(Message::user(
            format!("answer-{}", checkpoint.question.id),
            answer,
        ));
        state
    }
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

/// Posts the result, drops a checkpoint nothing will resume, and says where the files are.
async fn finish(
    outcome: RunOutcome,
    state: ThreadState,
    control: &LocalControlPlane,
    workdir: Workdir,
) -> Result<LocalResult, LocalError> {
    if outcome.stop_reason != StopReason::InputRequired {
        // A finished run has nothing to resume.
        let _ = std::fs::remove_file(workdir.state_dir().join(CHECKPOINT_FILE));
    }
    let mut usage = state.usage;
    usage.add(&control.children_usage());
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
            usage,
            files: Vec::new(),
            error: outcome.error.clone(),
        })
        .await
        .map_err(|error| LocalError(error.to_string()))?;
    Ok(LocalResult {
        question: outcome.question.clone(),
        outcome,
        artifacts,
        workdir: workdir.root,
        title: state.title,
        usage,
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
