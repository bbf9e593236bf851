//! What the kubelet hands a container's entry process: the view to build and the command to
//! run (its environment comes as the process environment, exactly the container's).

use std::path::Path;

use herd_sandbox::ContainerRoot;
use serde::{Deserialize, Serialize};

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
