//! A checkpoint: the thread and why it stopped there — a question waiting for its answer, or
//! a signal (Ctrl-C, SIGTERM) that interrupted it — a file locally, gzip in ConfigMap
//! `<run>-checkpoint` through the run API in a cluster. A Pod that suspends while it waits
//! adds the files of its `emptyDir` workspace, for the attempt that resumes it.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use async_trait::async_trait;
use base64::Engine as _;
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use herd_crds::approval::ApprovalRequest;
use herd_crds::report::Clarification;
use herd_sandbox::SavedFile;
use serde::{Deserialize, Serialize};

use crate::thread::{Message, MessageKind, ThreadState};

/// File name of the checkpoint inside its folder.
pub const CHECKPOINT_FILE: &str = "checkpoint.json";
/// Most bytes of a checkpoint's gzip: it goes into a ConfigMap's `binaryData` (etcd objects
/// are limited to ~1.5 MB), beside nothing else.
pub const MAX_CHECKPOINT_GZIP_BYTES: usize = 900 * 1024;
/// Most bytes a checkpoint unpacks to: far above what 900 KiB of gzipped JSON holds in
/// practice, and a bound on what a broken or hostile one can cost.
const MAX_CHECKPOINT_JSON_BYTES: u64 = 256 * 1024 * 1024;

/// Shrinks a thread too large to checkpoint: the run's summarization, forced.
#[async_trait]
pub trait ThreadCompactor: Send + Sync {
    /// Summarizes the older messages of `state`; whether it changed anything.
    async fn compact(&self, state: &mut ThreadState) -> bool;
}

/// What a suspended run needs to continue.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// Why the run stopped here; flattened, so a question's checkpoint reads
    /// `{"question": ..., "state": ...}` as it always has.
    #[serde(flatten)]
    pub stop: CheckpointStop,
    pub state: ThreadState,
    /// The workspace's files, saved by a Pod that suspended with an `emptyDir` workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<SavedFile>,
}

/// Why a checkpoint was written.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum CheckpointStop {
    /// The agent asked this question; resuming appends its answer.
    Question(Clarification),
    /// A signal stopped the run; resuming tells the model so, and it redoes the step it was
    /// on.
    Interrupted(Interruption),
    /// Tool calls wait for a person's decision (their thread's `awaitingApproval`); resuming
    /// runs or denies them as decided.
    Approval(Vec<ApprovalRequest>),
}

/// A run stopped by a signal.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Interruption {
    /// The signal, as `SIGINT` or `SIGTERM`.
    pub signal: String,
    /// When, RFC 3339.
    pub at: String,
}

impl Interruption {
    /// `signal` now.
    pub fn now(signal: &str) -> Self {
        Interruption {
            signal: signal.to_owned(),
            at: jiff::Timestamp::now().to_string(),
        }
    }

    /// The user turn a resumed run goes on from: what happened, so the model redoes the
    /// step that was cut off (its tool results or streamed text never reached the thread).
    pub fn resume_turn(&self) -> Message {
        Message::hidden_user(
            format!("interrupted-{}", self.at),
            MessageKind::Interrupted,
            self.resume_message(),
        )
    }

    fn resume_message(&self) -> String {
        format!(
            "The run was interrupted ({} at {}) and has now been resumed from its checkpoint. \
             Any tool call or answer in progress at that moment did not complete: check the \
             state of the files you were working on, redo the interrupted step and continue \
             the task.",
            self.signal, self.at
        )
    }
}

impl Checkpoint {
    /// The checkpoint of a run waiting for the answer to `question`.
    pub fn question(question: Clarification, state: ThreadState) -> Self {
        Checkpoint {
            stop: CheckpointStop::Question(question),
            state,
            files: Vec::new(),
        }
    }

    /// The checkpoint of a run whose tool calls wait for the decisions on `requests`.
    pub fn approval(requests: Vec<ApprovalRequest>, state: ThreadState) -> Self {
        Checkpoint {
            stop: CheckpointStop::Approval(requests),
            state,
            files: Vec::new(),
        }
    }

    /// The checkpoint of a run interrupted by `signal`.
    pub fn interrupted(signal: &str, state: ThreadState) -> Self {
        Checkpoint {
            stop: CheckpointStop::Interrupted(Interruption::now(signal)),
            state,
            files: Vec::new(),
        }
    }

    /// Writes the checkpoint atomically (temp file, then rename).
    pub fn save(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)?;
        let json = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        let temp = dir.join(format!(".{CHECKPOINT_FILE}.tmp"));
        fs::write(&temp, json)?;
        fs::rename(temp, dir.join(CHECKPOINT_FILE))
    }

    /// The checkpoint as gzipped JSON, as the run API stores it.
    pub fn to_gzip(&self) -> io::Result<Vec<u8>> {
        let json = serde_json::to_vec(self).map_err(io::Error::other)?;
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(&json)?;
        encoder.finish()
    }

    /// A checkpoint from the run API's `checkpointGzipBase64`.
    pub fn from_gzip_base64(text: &str) -> Result<Self, String> {
        let gzip = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|error| format!("the checkpoint is not base64: {error}"))?;
        let mut json = Vec::new();
        GzDecoder::new(gzip.as_slice())
            .take(MAX_CHECKPOINT_JSON_BYTES + 1)
            .read_to_end(&mut json)
            .map_err(|error| format!("the checkpoint is not gzip: {error}"))?;
        if json.len() as u64 > MAX_CHECKPOINT_JSON_BYTES {
            return Err(format!(
                "the checkpoint unpacks to more than {MAX_CHECKPOINT_JSON_BYTES} bytes"
            ));
        }
        serde_json::from_slice(&json)
            .map_err(|error| format!("the checkpoint is not a Herd checkpoint: {error}"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_doubles::market_question;

    fn checkpoint() -> Checkpoint {
        let mut state = ThreadState::new("Map the market.");
        state
            .messages
            .push(Message::user("u-2", "ünïcode ".repeat(1000)));
        market_question(&["EU"], state)
    }

    #[test]
    fn a_questions_checkpoint_keeps_its_layout_and_an_interruption_has_its_own() {
        let asked = serde_json::to_value(checkpoint()).unwrap();
        assert_eq!(asked["question"]["id"], "q-call_1_0");
        assert!(asked["state"].is_object());
        let interrupted = Checkpoint::interrupted("SIGINT", ThreadState::new("Map the market."));
        let json = serde_json::to_value(&interrupted).unwrap();
        assert_eq!(json["interrupted"]["signal"], "SIGINT");
        assert!(json.get("question").is_none());
        let back: Checkpoint = serde_json::from_value(json).unwrap();
        assert_eq!(back, interrupted);
        let CheckpointStop::Interrupted(how) = &back.stop else {
            panic!("{back:?}");
        };
        let turn = how.resume_turn();
        assert!(turn.text().contains("SIGINT"), "{turn:?}");
        assert!(turn.text().contains("redo the interrupted step"));
        let Message::User(user) = &turn else {
            panic!("{turn:?}");
        };
        assert_eq!(user.meta.kind, Some(MessageKind::Interrupted));
    }

    #[test]
    fn a_checkpoint_travels_as_gzip_in_base64() {
        let saved = checkpoint();
        let gzip = saved.to_gzip().unwrap();
        assert!(
            gzip.len() < 1000,
            "repetitive text packs small: {}",
            gzip.len()
        );
        let text = base64::engine::general_purpose::STANDARD.encode(&gzip);
        assert_eq!(Checkpoint::from_gzip_base64(&text).unwrap(), saved);
    }

    #[test]
    fn saved_files_travel_with_the_checkpoint_and_an_old_one_has_none() {
        let mut saved = checkpoint();
        assert!(
            serde_json::to_value(&saved).unwrap().get("files").is_none(),
            "no files, no key: older runners read it"
        );
        saved.files.push(SavedFile {
            path: "/mnt/user-data/workspace/notes.md".into(),
            data_base64: "ZHJhZnQ=".into(),
            executable: false,
        });
        let text = base64::engine::general_purpose::STANDARD.encode(saved.to_gzip().unwrap());
        assert_eq!(Checkpoint::from_gzip_base64(&text).unwrap(), saved);
    }

    #[test]
    fn what_is_not_a_checkpoint_is_an_error_not_a_panic() {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let cases = [
            ("not base64!".to_owned(), "not base64"),
            (b64(b"plain text"), "not gzip"),
            (b64(&gzip(b"{\"question\": 1}")), "not a Herd checkpoint"),
        ];
        for (text, expected) in cases {
            let error = Checkpoint::from_gzip_base64(&text).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }
}
