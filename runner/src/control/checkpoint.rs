//! A local checkpoint: the thread and the open question, saved when a run stops for an answer.

use std::fs;
use std::io;
use std::path::Path;

use herd_crds::report::Clarification;
use serde::{Deserialize, Serialize};

use crate::thread::ThreadState;

/// File name of the checkpoint inside its folder.
pub const CHECKPOINT_FILE: &str = "checkpoint.json";

/// What a suspended local run needs to continue.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Checkpoint {
    pub question: Clarification,
    pub state: ThreadState,
}

impl Checkpoint {
    /// Writes the checkpoint atomically (temp file, then rename).
    pub fn save(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)?;
        let json = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        let temp = dir.join(format!(".{CHECKPOINT_FILE}.tmp"));
        fs::write(&temp, json)?;
        fs::rename(temp, dir.join(CHECKPOINT_FILE))
    }

    /// Reads the checkpoint of `dir`.
    pub fn load(dir: &Path) -> io::Result<Self> {
        let path = dir.join(CHECKPOINT_FILE);
        let bytes = fs::read(&path).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("cannot read checkpoint {}: {error}", path.display()),
            )
        })?;
        serde_json::from_slice(&bytes).map_err(|error| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a Herd checkpoint: {error}", path.display()),
            )
        })
    }
}
