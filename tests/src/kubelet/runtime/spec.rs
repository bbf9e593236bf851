//! What the kubelet hands a container's entry process: the view to build and the command to
//! run (its environment comes as the process environment, exactly the container's).

use std::path::Path;

use herd_runner::sandbox::confine::ContainerRoot;
use serde::{Deserialize, Serialize};

/// The program every `herd-runner` command of a Pod runs as: this binary, re-executed under
/// that name.
pub const HERD_RUNNER: &str = "herd-runner";

/// One start of one container.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ContainerSpec {
    /// The container's view of the machine.
    pub root: ContainerRoot,
    /// `command` + `args` with `$(VAR)` references expanded; never empty.
    pub argv: Vec<String>,
}

impl ContainerSpec {
    /// Reads a spec the kubelet wrote.
    pub fn read(path: &Path) -> anyhow::Result<ContainerSpec> {
        let text = std::fs::read(path)?;
        Ok(serde_json::from_slice(&text)?)
    }
}

/// Whether `program` names `herd-runner` (bare or by a path), which this binary plays.
pub fn is_herd_runner(program: &str) -> bool {
    Path::new(program).file_name() == Some(HERD_RUNNER.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn herd_runner_is_recognised_bare_or_by_path() {
        assert!(is_herd_runner("herd-runner"));
        assert!(is_herd_runner("/usr/local/bin/herd-runner"));
        assert!(!is_herd_runner("herd-runner-2"));
        assert!(!is_herd_runner("sh"));
        assert!(!is_herd_runner(""));
    }
}
