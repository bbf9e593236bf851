//! The sandbox itself: the host directories behind the virtual roots and its settings (the
//! `bash` timeout, `HOME`, the inputs' mounts, its layers of isolation), with what it keeps
//! while it runs (the process groups and standard error tails of the programs it started).
//! `dispatch` answers the requests against it; `herd-runner run` calls it in-process,
//! `herd-runner sandbox` serves it on a unix socket in the pod's `sandbox` container.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use herd_crds::report::SandboxLayer;

use super::paths::{SandboxPaths, SandboxRoots};
use super::process_groups::ProcessGroups;
use super::stderr_tail::StderrTails;

/// DeerFlow's `bash_command_timeout`.
pub(crate) const DEFAULT_BASH_TIMEOUT: Duration = Duration::from_secs(600);

/// Executes sandbox requests. Cheap to clone.
#[derive(Clone, Debug)]
pub struct SandboxHost {
    paths: Arc<SandboxPaths>,
    bash_timeout: Duration,
    home: PathBuf,
    /// Where the Run's inputs are mounted (`$HERD_ROOT/inputs`), in a pod's sandbox.
    inputs: Option<PathBuf>,
    /// What the stdio programs started here wrote to their standard error, lately.
    stderr_tails: StderrTails,
    /// The process groups of the commands and programs started here, ended when the
    /// sandbox stops.
    process_groups: ProcessGroups,
    /// The layers of isolation around this sandbox, told in `Hello`.
    layers: Arc<Vec<SandboxLayer>>,
}

impl SandboxHost {
    /// A sandbox over `roots`, with DeerFlow's bash timeout and `HOME` in the temp directory
    /// (in a pod `/tmp`, an emptyDir: git and pip need a writable home).
    pub fn new(roots: &SandboxRoots) -> io::Result<Self> {
        Ok(SandboxHost {
            paths: Arc::new(SandboxPaths::new(roots)?),
            bash_timeout: DEFAULT_BASH_TIMEOUT,
            home: std::env::temp_dir(),
            inputs: None,
            stderr_tails: StderrTails::default(),
            process_groups: ProcessGroups::default(),
            layers: Arc::default(),
        })
    }

    /// Sets how long one `bash` command may run before it is killed (the tests shorten it).
    #[cfg(test)]
    pub(crate) fn with_bash_timeout(mut self, timeout: Duration) -> Self {
        self.bash_timeout = timeout;
        self
    }

    /// Sets `HOME` for `bash` commands.
    pub fn with_home(mut self, home: PathBuf) -> Self {
        self.home = home;
        self
    }

    /// Sets where the Run's inputs are mounted, one folder per input (`<dir>/<i>`).
    pub(crate) fn with_inputs(mut self, dir: PathBuf) -> Self {
        self.inputs = Some(dir);
        self
    }

    /// Sets the layers of isolation this sandbox tells in its `Hello` answer.
    pub(crate) fn with_layers(mut self, layers: Vec<SandboxLayer>) -> Self {
        self.layers = Arc::new(layers);
        self
    }

    /// The path mapping.
    pub(crate) fn paths(&self) -> &SandboxPaths {
        &self.paths
    }

    /// How long one `bash` command may run.
    pub(crate) fn bash_timeout(&self) -> Duration {
        self.bash_timeout
    }

    /// `HOME` for `bash` commands.
    pub(crate) fn home(&self) -> &Path {
        &self.home
    }

    /// The standard error tails of the stdio programs started here.
    pub(crate) fn stderr_tails(&self) -> &StderrTails {
        &self.stderr_tails
    }

    /// Where the Run's inputs are mounted, if this sandbox has them.
    pub(crate) fn inputs(&self) -> Option<&Path> {
        self.inputs.as_deref()
    }

    /// The layers of isolation around this sandbox.
    pub(crate) fn layers(&self) -> &[SandboxLayer] {
        &self.layers
    }

    /// The process groups started here (shared by every clone).
    pub fn process_groups(&self) -> &ProcessGroups {
        &self.process_groups
    }
}
