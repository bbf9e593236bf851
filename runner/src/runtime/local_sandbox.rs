//! Where the tools of `herd-runner run` execute: a confined `herd-runner sandbox` child where
//! this machine allows it, else this process; and the skills found there.

use std::path::PathBuf;
use std::sync::Arc;

use super::local::LocalError;
use super::workdir::Workdir;
use crate::agent::{AgentEvent, Observer};
use crate::sandbox::SandboxHost;
use crate::sandbox::client::SandboxClient;
use crate::sandbox::confined::ConfinedSandbox;
use crate::sandbox::executor::ToolExecutor;
use crate::sandbox::in_process::InProcessExecutor;
use crate::skills::{Skill, SkillCatalog};

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

/// The confined sandbox when `mode` asks for it and this machine allows it, else the
/// in-process one. `exe` is the `herd-runner` binary the confined child runs.
pub(crate) async fn open_sandbox(
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
    let sandbox = SandboxHost::new(&workdir.roots)
        .map_err(|error| LocalError(format!("cannot open the sandbox: {error}")))?
        .with_home(workdir.state_dir());
    Ok((Arc::new(InProcessExecutor(Arc::new(sandbox))), None))
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
    use super::*;
    use crate::sandbox::protocol::{SandboxRequest, SandboxResponse};
    use crate::testing::RecordingObserver;

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
        assert!(confined.is_none());
        assert!(recorder.warnings().is_empty());
        Ok(())
    }
}
