//! `.herd/ending.json`: how a local run ended, written when it ends (not when it stops for a
//! question or a signal: those leave a checkpoint), so `herd-runner runs` can list it and
//! `--resume` can say it finished.

use std::path::Path;

use herd_crds::report::{StopReason, Usage};
use serde::{Deserialize, Serialize};

/// The file's name in the work folder's `.herd/`.
pub const RUN_ENDING: &str = "ending.json";

/// How the run ended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunEnding {
    pub stop_reason: StopReason,
    /// When, RFC 3339.
    pub finished_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub usage: Usage,
}

impl RunEnding {
    /// Writes the ending into `state_dir`.
    pub fn write(&self, state_dir: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(state_dir.join(RUN_ENDING), json)
    }

    /// The ending of the run in `state_dir`, if it has ended (and the file is readable).
    pub fn read(state_dir: &Path) -> Option<Self> {
        let bytes = std::fs::read(state_dir.join(RUN_ENDING)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ending_is_read_back_and_a_missing_or_damaged_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(RunEnding::read(dir.path()), None);
        let ending = RunEnding {
            stop_reason: StopReason::Completed,
            finished_at: "2026-12-02T19:00:00Z".into(),
            title: Some("Heat pumps".into()),
            usage: Usage::default(),
        };
        ending.write(dir.path()).unwrap();
        assert_eq!(RunEnding::read(dir.path()), Some(ending));
        std::fs::write(dir.path().join(RUN_ENDING), "{").unwrap();
        assert_eq!(RunEnding::read(dir.path()), None);
    }
}
