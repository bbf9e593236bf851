//! `herd-runner run`: the lead agent on a laptop — manifests in, answer and files out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use herd_crds::report::{Clarification, StopReason};
use herd_crds::wire::ResultReport;
use serde::{Deserialize, Serialize};

use super::blueprint::{Blueprint, InProcessSubagents, SubagentSettings};
use super::manifests::{LocalManifests, ManifestsError};
use super::settings::{self, Overrides, RunFlags};
use super::workdir::Workdir;
use crate::agent::{AgentEvent, Observer, RunEnv, RunOutcome};
use crate::control::ControlPlane;
use crate::control::checkpoint::{CHECKPOINT_FILE, Checkpoint};
use crate::control::local::{Prompter, Questions, SubagentCaps};
use crate::memory::file::MemoryFile;
use crate::middleware::chain::{ChainSettings, StandardChain};
use crate::model::resolve::{build_model, resolve};
use crate::sandbox::Sandbox;
use crate::sandbox::confined::ConfinedSandbox;
use crate::sandbox::executor::ToolExecutor;
use crate::sandbox::in_process::InProcessExecutor;
use crate::sandbox::protocol::{SandboxRequest, SandboxResponse};
use crate::skills::SkillCatalog;
use crate::thread::{Message, ThreadState};
use crate::tools::web::allowed_ranges::AllowedRanges;
use crate::tools::web::{WebSearchSettings, build_search_provider};
use crate::tools::web_fetch::WebFetchConfig;

/// A local run could not start or failed outside the agent (bad files, unreadable folder).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LocalError(pub String);

impl From<ManifestsError> for LocalError {
    fn from(error: ManifestsError) -> Self {
        LocalError(error.0)
    }
}

impl From<settings::SettingsError> for LocalError {
    fn from(error: settings::SettingsError) -> Self {
        LocalError(error.0)
    }
}

/// Where the tools of a local run execute.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SandboxMode {
    /// Confined like a pod's sandbox container where this machine allows it; otherwise
    /// unconfined in this process, with a warning.
    Auto,
    /// Confined, or the run does not start.
    Strict,
    /// Unconfined in this process, paths mapped onto the work folder (the default for
    /// library callers, which may not be the `herd-runner` binary the confined child needs).
    #[default]
    Off,
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

/// What is kept in `.herd/run.json` so `--resume` runs exactly the same configuration.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct RunRecord {
    sources: Vec<(PathBuf, String)>,
    task: String,
    model: Option<String>,
    base_url: Option<String>,
    plan: bool,
    thinking: bool,
    api_key_env: Option<String>,
}

const RUN_RECORD: &str = "run.json";

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
    pub usage: herd_crds::report::Usage,
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
    let record_path = workdir.state_dir().join(RUN_RECORD);
    let (record, manifests, resumed) = match &request.answer {
        Some(answer) => {
            let record: RunRecord = read_json(&record_path)?;
            let manifests = LocalManifests::from_sources(record.sources.clone())?;
            let checkpoint = Checkpoint::load(&workdir.state_dir())
                .map_err(|error| LocalError(format!("cannot resume: {error}")))?;
            (record, manifests, Some((checkpoint, answer.clone())))
        }
        None => {
            let manifests = LocalManifests::load(&request.files)?;
            let flags = settings::run_flags(
                &manifests.agent.spec,
                manifests.run.as_ref().map(|r| &r.spec),
                &request.overrides,
            )?;
            let record = RunRecord {
                sources: manifests.sources.clone(),
                task: flags.task,
                model: request.overrides.model.clone(),
                base_url: request.overrides.base_url.clone(),
                plan: request.overrides.plan,
                thinking: request.overrides.thinking,
                api_key_env: request.api_key_env.clone(),
            };
            write_json(&record_path, &record)?;
            (record, manifests, None)
        }
    };
    let overrides = Overrides {
        task: Some(record.task.clone()),
        model: record.model.clone(),
        base_url: record.base_url.clone(),
        plan: record.plan,
        thinking: record.thinking,
    };
    let run_spec = manifests.run.as_ref().map(|r| &r.spec);
    let agent = &manifests.agent.spec;
    let flags = settings::run_flags(agent, run_spec, &overrides)?;

    if resumed.is_none() {
        install_inputs(&workdir, &manifests, &request.inputs)?;
    }
    workdir
        .install_skills(&manifests.skills)
        .map_err(|error| LocalError(error.to_string()))?;

    // Held until the run ends: dropping it stops the confined sandbox.
    let (executor, _confined) = open_sandbox(
        request.sandbox,
        std::env::current_exe(),
        &workdir,
        observer.as_ref(),
    )
    .await?;
    let skills = discover_skills(&*executor, agent.skills.as_deref(), observer.as_ref()).await?;

    let blueprint = Arc::new(blueprint(
        &manifests,
        &flags,
        &overrides,
        record.api_key_env.as_deref(),
        skills,
        observer.clone(),
        executor.clone(),
    )?);
    let questions = match &request.prompter {
        Some(prompter) => Questions::Interactive(prompter.clone()),
        None => Questions::Suspend(workdir.state_dir()),
    };
    let memory = agent.memory.enabled.then(|| {
        MemoryFile::new(
            memory_path(&request.memory_dir, &manifests.agent_name(), agent),
            "local",
            agent.memory.max_facts as usize,
        )
    });
    let given_answers = manifests
        .run
        .as_ref()
        .map(|run| {
            run.spec
                .responses
                .iter()
                .map(|r| herd_crds::wire::Answer {
                    id: r.id.clone(),
                    answer: r.answer.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    let control = Arc::new(
        InProcessSubagents::control_plane(&blueprint, 0, questions, memory)
            .with_answers(given_answers),
    );
    let dyn_control: Arc<dyn ControlPlane> = control.clone();
    let deadline = tokio::time::Instant::now() + flags.timeout;
    let lead = blueprint
        .lead(&dyn_control, Some(deadline))
        .map_err(|error| LocalError(format!("cannot build the system prompt: {error}")))?;

    let mut state = match resumed {
        Some((checkpoint, answer)) => {
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
        None => ThreadState::new(flags.task.clone()),
    };
    let env = RunEnv {
        executor: executor.clone(),
        control: dyn_control.clone(),
    };
    let outcome = match tokio::time::timeout_at(deadline, lead.run(&mut state, &env)).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(error)) => return Err(LocalError(error.to_string())),
        Err(_) => {
            observer.on_event(AgentEvent::Stopped {
                agent: "lead".into(),
                reason: StopReason::TimedOut,
            });
            RunOutcome {
                stop_reason: StopReason::TimedOut,
                answer: String::new(),
                error: Some(format!("the run took longer than {:?}", flags.timeout)),
                question: None,
            }
        }
    };
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
    dyn_control
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

fn blueprint(
    manifests: &LocalManifests,
    flags: &RunFlags,
    overrides: &Overrides,
    api_key_env: Option<&str>,
    skills: Vec<crate::skills::Skill>,
    observer: Arc<dyn Observer>,
    executor: Arc<dyn ToolExecutor>,
) -> Result<Blueprint, LocalError> {
    let agent = &manifests.agent.spec;
    let run_spec = manifests.run.as_ref().map(|r| &r.spec);
    let Some(model) = &agent.model else {
        return Err(LocalError(
            "spec.model: the Agent names no model; locally there is no operator default, so set spec.model"
                .into(),
        ));
    };
    let key_env = api_key_env.or_else(|| settings::default_key_env(&model.provider));
    let api_key = key_env
        .and_then(|var| std::env::var(var).ok())
        .filter(|k| !k.is_empty());
    if let (Some(var), None) = (api_key_env, &api_key) {
        return Err(LocalError(format!(
            "--api-key-env {var}: the variable is not set or empty"
        )));
    }
    let script = model
        .script_from
        .as_ref()
        .map(|from| manifests.value_from("spec.model.scriptFrom", from))
        .transpose()?;
    let mut spec = settings::agent_model(model, api_key, script)?;
    if let Some(url) = &overrides.base_url {
        spec.base_url = Some(url.clone());
    }
    let model_override = settings::model_override(run_spec, overrides.model.as_deref());
    let thinking = flags.thinking && (flags.thinking_explicit || spec.supports_thinking);
    let resolved = resolve(None, Some(&spec), model_override.as_ref(), thinking)
        .map_err(|error| LocalError(error.to_string()))?;
    for warning in &resolved.warnings {
        observer.on_event(AgentEvent::Warning {
            agent: "lead".into(),
            message: warning.clone(),
        });
    }
    let chat_model = build_model(&resolved.spec).map_err(|error| LocalError(error.to_string()))?;
    let soul = match (&agent.soul, &agent.soul_from) {
        (Some(soul), _) => Some(soul.clone()),
        (None, Some(from)) => Some(manifests.value_from("spec.soulFrom", from)?),
        (None, None) => None,
    };
    let web_search = agent
        .tools
        .as_ref()
        .and_then(|tools| tools.web_search.as_ref())
        .map(|search| {
            let provider = serde_json::to_value(search.provider)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let key_var = format!("{}_API_KEY", provider.to_uppercase());
            build_search_provider(&WebSearchSettings {
                provider,
                base_url: search.base_url.clone(),
                api_key: std::env::var(&key_var).ok().filter(|k| !k.is_empty()),
            })
            .map_err(|error| LocalError(format!("spec.tools.webSearch: {error}")))
        })
        .transpose()?;
    let subagents = agent
        .subagents
        .enabled
        .then(|| -> Result<SubagentSettings, LocalError> {
            Ok(SubagentSettings {
                caps: SubagentCaps {
                    max_concurrent: agent.subagents.max_concurrent,
                    max_total: agent.subagents.max_total,
                },
                max_depth: agent.subagents.max_depth,
                timeout: herd_crds::duration::parse_duration(&agent.subagents.timeout)
                    .map_err(|error| LocalError(format!("spec.subagents.timeout: {error}")))?,
            })
        })
        .transpose()?;
    let chain = StandardChain::new(ChainSettings {
        plan_mode: flags.plan_mode,
        subagents: subagents.map(|s| s.caps),
        vision: resolved.spec.supports_vision,
        context_window: resolved.spec.context_window,
        max_retries: resolved.spec.max_retries,
        token_budget: agent.run_defaults.token_budget,
        summarization: agent.summarization.clone(),
        memory: agent.memory.clone(),
        skills: skills.clone(),
        clarification: true,
        attempt: 1,
        model: chat_model.clone(),
        executor: executor.clone(),
        observer: observer.clone(),
    });
    Ok(Blueprint {
        agent_name: manifests.agent_name(),
        model: chat_model,
        options: resolved.options,
        context_window: resolved.spec.context_window,
        supports_vision: resolved.spec.supports_vision,
        tool_groups: settings::tool_groups(agent),
        web_search,
        web_fetch: WebFetchConfig {
            allowed: AllowedRanges::from_egress(agent.sandbox.egress.as_ref())
                .map_err(|error| LocalError(format!("spec.sandbox.egress.{error}")))?,
            ..WebFetchConfig::default()
        },
        skills,
        soul,
        subagents,
        plan_mode: flags.plan_mode,
        clarification: true,
        attempt: 1,
        max_model_calls: flags.max_model_calls,
        observer,
        executor,
        chain: Arc::new(chain),
    })
}

/// The confined sandbox when `mode` asks for it and this machine allows it, else the
/// in-process one. `exe` is the `herd-runner` binary the confined child runs.
async fn open_sandbox(
    mode: SandboxMode,
    exe: std::io::Result<PathBuf>,
    workdir: &Workdir,
    observer: &dyn Observer,
) -> Result<(Arc<dyn ToolExecutor>, Option<ConfinedSandbox>), LocalError> {
    if mode != SandboxMode::Off {
        let skills = workdir.root.join("skills");
        let started = match exe {
            Ok(exe) => ConfinedSandbox::start(&exe, &workdir.roots.user_data, &skills)
                .await
                .map_err(|unavailable| unavailable.0),
            Err(error) => Err(format!("cannot find the herd-runner binary: {error}")),
        };
        match started {
            Ok(confined) => return Ok((confined.executor(), Some(confined))),
            Err(reason) if mode == SandboxMode::Strict => {
                return Err(LocalError(format!(
                    "--sandbox=strict: the tools cannot be confined on this machine: {reason}"
                )));
            }
            Err(reason) => observer.on_event(AgentEvent::Warning {
                agent: "lead".into(),
                message: format!(
                    "tools run UNCONFINED on this machine ({reason}); --sandbox=strict refuses \
                     to run like this, --sandbox=off runs unconfined without this check"
                ),
            }),
        }
    }
    let sandbox = Sandbox::new(&workdir.roots)
        .map_err(|error| LocalError(format!("cannot open the sandbox: {error}")))?
        .with_home(workdir.state_dir());
    Ok((Arc::new(InProcessExecutor(Arc::new(sandbox))), None))
}

async fn discover_skills(
    executor: &dyn ToolExecutor,
    filter: Option<&[String]>,
    observer: &dyn Observer,
) -> Result<Vec<crate::skills::Skill>, LocalError> {
    let files = match executor.execute(SandboxRequest::ListSkills).await {
        Ok(SandboxResponse::Skills { skills }) => skills,
        Ok(SandboxResponse::Error { message }) => return Err(LocalError(message)),
        Ok(_) => Vec::new(),
        Err(error) => return Err(LocalError(error.to_string())),
    };
    let catalog = SkillCatalog::build(&files, filter);
    for warning in catalog.warnings {
        observer.on_event(AgentEvent::Warning {
            agent: "lead".into(),
            message: warning,
        });
    }
    Ok(catalog.skills)
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
fn memory_path(dir: &Path, agent_name: &str, agent: &herd_crds::agent::AgentSpec) -> PathBuf {
    match agent.memory.scope {
        herd_crds::agent::MemoryScope::Agent => dir.join(format!("{agent_name}.json")),
        herd_crds::agent::MemoryScope::User => {
            let user = std::env::var("USER").unwrap_or_else(|_| "local".into());
            dir.join(agent_name).join(format!("{user}.json"))
        }
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LocalError> {
    let bytes = std::fs::read(path).map_err(|error| {
        LocalError(format!(
            "cannot resume: {} is missing ({error}); --resume takes the work folder of a run that asked a question",
            path.display()
        ))
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|error| LocalError(format!("{} is damaged: {error}", path.display())))
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), LocalError> {
    let json = serde_json::to_vec_pretty(value).map_err(|error| LocalError(error.to_string()))?;
    std::fs::write(path, json)
        .map_err(|error| LocalError(format!("cannot write {}: {error}", path.display())))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<AgentEvent>>);

    impl Observer for Recorder {
        fn on_event(&self, event: AgentEvent) {
            if let Ok(mut events) = self.0.lock() {
                events.push(event);
            }
        }
    }

    impl Recorder {
        fn warnings(&self) -> Vec<String> {
            self.0
                .lock()
                .map(|events| {
                    events
                        .iter()
                        .filter_map(|event| match event {
                            AgentEvent::Warning { message, .. } => Some(message.clone()),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default()
        }
    }

    /// A binary that cannot confine anything: what a machine without support looks like.
    fn no_binary() -> std::io::Result<PathBuf> {
        Ok(PathBuf::from("/nonexistent/herd-runner"))
    }

    #[tokio::test]
    async fn without_confinement_auto_warns_once_and_runs_in_process() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let workdir = Workdir::prepare(dir.path())?;
        let recorder = Recorder::default();
        let (executor, confined) =
            open_sandbox(SandboxMode::Auto, no_binary(), &workdir, &recorder).await?;
        assert!(confined.is_none());
        let warnings = recorder.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("tools run UNCONFINED on this machine ("));
        assert!(warnings[0].contains("--sandbox=strict"));
        // In process: the work folder is reached through path mapping.
        let response = executor.execute(SandboxRequest::Prepare).await?;
        assert_eq!(response, SandboxResponse::Done { path: None });
        Ok(())
    }

    #[tokio::test]
    async fn without_confinement_strict_refuses_and_off_says_nothing() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let workdir = Workdir::prepare(dir.path())?;
        let recorder = Recorder::default();
        let refused = open_sandbox(SandboxMode::Strict, no_binary(), &workdir, &recorder)
            .await
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(
            refused.starts_with("--sandbox=strict: the tools cannot be confined on this machine: "),
            "{refused}"
        );
        let (_, confined) =
            open_sandbox(SandboxMode::Off, no_binary(), &workdir, &recorder).await?;
        assert!(confined.is_none());
        assert!(recorder.warnings().is_empty());
        Ok(())
    }
}
