//! Where the tools of `herd-runner run` execute: a confined `herd-runner sandbox` child where
//! this machine allows it, else this process; and the skills found there.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herd_sandbox::{
    ConfinedSandbox, InProcessExecutor, ProcessGroups, SandboxClient, SandboxHost, ToolExecutor,
    Unavailable, View,
};

use super::local_error::LocalError;
use super::workdir::Workdir;
use crate::agent::{AgentEvent, Observer};
use crate::skills::{Skill, SkillCatalog};
use crate::telemetry::TracedExecutor;

/// Where the tools of a local run execute.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SandboxMode {
    /// Confined like a pod's sandbox container where this machine allows it; else Landlock
    /// alone where that works, with a warning; else unconfined in this process, with a
    /// warning.
    Auto,
    /// Confined like a pod's sandbox container (private namespaces and Landlock), or the run
    /// does not start.
    Strict,
    /// Landlock alone (where user namespaces are refused, e.g. inside a container): the host
    /// read-only, writes only to the work folder and /tmp, no signals to or ptrace of other
    /// processes; but no private mount namespace, so the home folder stays readable. The run
    /// does not start without Landlock.
    Landlock,
    /// Unconfined in this process, paths mapped onto the work folder (the default for
    /// library callers, which may not be the `herd-runner` binary the confined child needs).
    #[default]
    Off,
}

/// What the probes found: whether each confinement works here, or why not. A probe not run
/// (the mode does not need it) reads as unavailable and is never consulted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Available {
    /// Private user and mount namespaces with Landlock.
    pub namespaces: Result<(), String>,
    /// Landlock alone.
    pub landlock: Result<(), String>,
}

/// Where the tools go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// A confined `herd-runner sandbox` child, with a warning to show first if any.
    Confined(View, Option<String>),
    /// This process, with a warning to show first if any.
    InProcess(Option<String>),
}

/// Whether `mode` needs the probe of Landlock alone: for `--sandbox landlock`, and where the
/// namespaces failed (to fall back on, or to name in the error).
pub(crate) fn needs_landlock_probe(mode: SandboxMode, namespaces: &Result<(), String>) -> bool {
    match mode {
        SandboxMode::Landlock => true,
        SandboxMode::Auto | SandboxMode::Strict => namespaces.is_err(),
        SandboxMode::Off => false,
    }
}

/// The decision, from what works here: the strongest confinement the mode accepts, or why the
/// run cannot start.
pub(crate) fn choose(mode: SandboxMode, available: &Available) -> Result<Choice, String> {
    const HOME_READABLE: &str = "the host read-only, writes only to the work folder and /tmp, \
                                 but the home folder stays readable";
    match (mode, &available.namespaces, &available.landlock) {
        (SandboxMode::Off, _, _) => Ok(Choice::InProcess(None)),
        (SandboxMode::Auto | SandboxMode::Strict, Ok(()), _) => {
            Ok(Choice::Confined(View::Namespaces, None))
        }
        (SandboxMode::Auto, Err(why), Ok(())) => Ok(Choice::Confined(
            View::LandlockOnly,
            Some(format!(
                "user namespaces are not available here ({why}): the tools are confined by \
                 Landlock alone ({HOME_READABLE}); --sandbox=strict refuses to run like this"
            )),
        )),
        (SandboxMode::Auto, Err(why), Err(_)) => Ok(Choice::InProcess(Some(format!(
            "tools run UNCONFINED on this machine ({why}); --sandbox=strict refuses to run \
             like this, --sandbox=off runs unconfined without this check"
        )))),
        (SandboxMode::Strict, Err(why), Ok(())) => Err(format!(
            "--sandbox=strict: user namespaces are not available here: {why}; use --sandbox \
             landlock to run with Landlock alone ({HOME_READABLE})"
        )),
        (SandboxMode::Strict, Err(why), Err(_)) => Err(format!(
            "--sandbox=strict: the tools cannot be confined on this machine: {why}"
        )),
        (SandboxMode::Landlock, _, Ok(())) => Ok(Choice::Confined(View::LandlockOnly, None)),
        (SandboxMode::Landlock, _, Err(why)) => Err(format!(
            "--sandbox=landlock: Landlock is not available here: {why}"
        )),
    }
}

/// What keeps the tools' processes of a local run, so that an interrupted run can end them:
/// held until the run ends (dropping a confined sandbox stops it).
#[derive(Debug)]
pub(crate) enum SandboxGuard {
    /// The confined `herd-runner sandbox` child.
    Confined(Box<ConfinedSandbox>),
    /// The process groups the in-process sandbox started.
    InProcess(ProcessGroups),
}

impl SandboxGuard {
    /// Ends the tools still running: SIGTERM to their process groups, SIGKILL to what is left
    /// after `grace` (a confined child does so itself when stopped, then exits).
    pub async fn stop_tools(self, grace: Duration) {
        match self {
            SandboxGuard::Confined(confined) => confined.stop(grace).await,
            SandboxGuard::InProcess(groups) => groups.terminate(grace).await,
        }
    }

    /// Whether the tools run in a confined child.
    #[cfg(test)]
    fn is_confined(&self) -> bool {
        matches!(self, SandboxGuard::Confined(_))
    }
}

/// The confined sandbox when `mode` asks for it and this machine allows it, else the
/// in-process one; says which, with its layers. `exe` is the `herd-runner` binary the
/// confined child runs.
pub(crate) async fn open_sandbox(
    mode: SandboxMode,
    exe: std::io::Result<PathBuf>,
    workdir: &Workdir,
    observer: &dyn Observer,
) -> Result<(Arc<dyn ToolExecutor>, SandboxGuard), LocalError> {
    let choice = choose_sandbox(mode, &exe).await?;
    let warn = |message: String| {
        observer.on_event(AgentEvent::Warning {
            agent: "lead".into(),
            message,
        });
    };
    let fallback = match choice {
        Choice::InProcess(warning) => warning,
        Choice::Confined(view, warning) => {
            if let Some(warning) = warning {
                warn(warning);
            }
            let started = match &exe {
                Ok(exe) => ConfinedSandbox::start(exe, &workdir.root, view).await,
                Err(error) => Err(Unavailable(format!(
                    "cannot find the herd-runner binary: {error}"
                ))),
            };
            match started {
                Ok(confined) => {
                    let executor: Arc<dyn ToolExecutor> =
                        Arc::new(TracedExecutor::new(confined.executor()));
                    observer.on_event(AgentEvent::Sandbox {
                        mode: match view {
                            View::Namespaces => "confined",
                            View::LandlockOnly => "landlock",
                        }
                        .to_owned(),
                        layers: executor.sandbox_layers(),
                    });
                    return Ok((executor, SandboxGuard::Confined(Box::new(confined))));
                }
                Err(unavailable) if mode != SandboxMode::Auto => {
                    return Err(LocalError(format!(
                        "--sandbox={}: {unavailable}",
                        mode_name(mode)
                    )));
                }
                Err(unavailable) => Some(format!(
                    "tools run UNCONFINED on this machine ({unavailable}); --sandbox=strict \
                     refuses to run like this, --sandbox=off runs unconfined without this check"
                )),
            }
        }
    };
    if let Some(warning) = fallback {
        warn(warning);
    }
    observer.on_event(AgentEvent::Sandbox {
        mode: "in-process".to_owned(),
        layers: Vec::new(),
    });
    let sandbox = SandboxHost::new(&workdir.roots)
        .map_err(|error| LocalError(format!("cannot open the sandbox: {error}")))?
        .with_home(workdir.state_dir());
    let groups = sandbox.process_groups().clone();
    Ok((
        Arc::new(InProcessExecutor(Arc::new(sandbox))),
        SandboxGuard::InProcess(groups),
    ))
}

/// Which sandbox `mode` gets on this machine, probed with the `herd-runner` binary `exe`.
async fn choose_sandbox(
    mode: SandboxMode,
    exe: &std::io::Result<PathBuf>,
) -> Result<Choice, LocalError> {
    match (exe, mode) {
        (_, SandboxMode::Off) => Ok(Choice::InProcess(None)),
        (Err(error), _) => {
            let why = Err(format!("cannot find the herd-runner binary: {error}"));
            choose(
                mode,
                &Available {
                    namespaces: why.clone(),
                    landlock: why,
                },
            )
            .map_err(LocalError)
        }
        (Ok(exe), _) => {
            let namespaces = if mode == SandboxMode::Landlock {
                Err("not probed".to_owned())
            } else {
                probe(exe, View::Namespaces).await
            };
            let landlock = if needs_landlock_probe(mode, &namespaces) {
                probe(exe, View::LandlockOnly).await
            } else {
                Err("not probed".to_owned())
            };
            choose(
                mode,
                &Available {
                    namespaces,
                    landlock,
                },
            )
            .map_err(LocalError)
        }
    }
}

async fn probe(exe: &std::path::Path, view: View) -> Result<(), String> {
    ConfinedSandbox::probe(exe, view)
        .await
        .map_err(|unavailable| unavailable.0)
}

fn mode_name(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::Auto => "auto",
        SandboxMode::Strict => "strict",
        SandboxMode::Landlock => "landlock",
        SandboxMode::Off => "off",
    }
}

pub(crate) async fn discover_skills(
    executor: &dyn ToolExecutor,
    filter: Option<&[String]>,
    observer: &dyn Observer,
) -> Result<Vec<Skill>, LocalError> {
    let files = executor
        .list_skills()
        .await
        .map_err(|error| LocalError(error.to_string()))?;
    let catalog = SkillCatalog::build(&files, filter);
    for warning in catalog.warnings {
        observer.on_event(AgentEvent::Warning {
            agent: "lead".into(),
            message: warning,
        });
    }
    Ok(catalog.skills)
}

#[cfg(test)]
mod tests {
    use herd_sandbox::{SandboxRequest, SandboxResponse};

    use super::*;
    use crate::test_doubles::RecordingObserver;

    fn available(namespaces: bool, landlock: bool) -> Available {
        let result = |works: bool, why: &str| if works { Ok(()) } else { Err(why.to_owned()) };
        Available {
            namespaces: result(namespaces, "creating a user and mount namespace: EPERM"),
            landlock: result(landlock, "this kernel has no Landlock"),
        }
    }

    #[test]
    fn each_mode_takes_the_strongest_confinement_it_accepts_or_says_what_is_missing() {
        use SandboxMode::{Auto, Landlock, Off, Strict};
        let everything = available(true, true);
        let in_a_container = available(false, true);
        let nothing = available(false, false);
        let confined = |view| Ok(Choice::Confined(view, None));

        assert_eq!(choose(Off, &everything), Ok(Choice::InProcess(None)));
        assert_eq!(choose(Strict, &everything), confined(View::Namespaces));
        assert_eq!(choose(Auto, &everything), confined(View::Namespaces));
        assert_eq!(choose(Landlock, &everything), confined(View::LandlockOnly));
        assert_eq!(
            choose(Landlock, &in_a_container),
            confined(View::LandlockOnly)
        );

        // Inside a container: strict names the missing layer and the flag that accepts
        // Landlock alone; auto takes Landlock alone and says so.
        let refused = choose(Strict, &in_a_container).err().unwrap_or_default();
        assert!(
            refused.starts_with(
                "--sandbox=strict: user namespaces are not available here: creating a user \
                 and mount namespace: EPERM; use --sandbox landlock to run with Landlock alone"
            ),
            "{refused}"
        );
        let Ok(Choice::Confined(View::LandlockOnly, Some(warning))) = choose(Auto, &in_a_container)
        else {
            panic!("auto in a container takes Landlock alone, with a warning");
        };
        assert!(
            warning.contains("the home folder stays readable"),
            "{warning}"
        );

        // Nothing works: auto runs unconfined with a warning, the others refuse.
        let Ok(Choice::InProcess(Some(warning))) = choose(Auto, &nothing) else {
            panic!("auto without confinement runs in process, with a warning");
        };
        assert!(warning.starts_with("tools run UNCONFINED on this machine ("));
        assert_eq!(
            choose(Strict, &nothing),
            Err(
                "--sandbox=strict: the tools cannot be confined on this machine: creating a \
                 user and mount namespace: EPERM"
                    .to_owned()
            )
        );
        assert_eq!(
            choose(Landlock, &nothing),
            Err(
                "--sandbox=landlock: Landlock is not available here: this kernel has no Landlock"
                    .to_owned()
            )
        );
    }

    #[test]
    fn landlock_alone_is_probed_only_when_needed() {
        let works = Ok(());
        let fails = Err("no".to_owned());
        assert!(needs_landlock_probe(SandboxMode::Landlock, &works));
        assert!(!needs_landlock_probe(SandboxMode::Strict, &works));
        assert!(needs_landlock_probe(SandboxMode::Strict, &fails));
        assert!(needs_landlock_probe(SandboxMode::Auto, &fails));
        assert!(!needs_landlock_probe(SandboxMode::Off, &fails));
    }

    /// A binary that cannot confine anything: what a machine without support looks like.
    fn no_binary() -> std::io::Result<PathBuf> {
        Ok(PathBuf::from("/nonexistent/herd-runner"))
    }

    #[tokio::test]
    async fn without_confinement_auto_warns_once_and_runs_in_process() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let workdir = Workdir::prepare(dir.path())?;
        let recorder = RecordingObserver::default();
        let (executor, confined) =
            open_sandbox(SandboxMode::Auto, no_binary(), &workdir, &recorder).await?;
        assert!(!confined.is_confined());
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
        let recorder = RecordingObserver::default();
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
        assert!(!confined.is_confined());
        assert!(recorder.warnings().is_empty());
        Ok(())
    }
}
