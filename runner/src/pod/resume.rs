//! Resuming a Run whose earlier attempt asked a question and then lost its pod (evicted, node
//! gone), or was stopped by SIGTERM (drained, evicted) and posted its checkpoint: the new
//! attempt starts from the checkpoint the run API kept, as `herd-runner run --resume` does from
//! its file, with the answer appended or told it was interrupted. With an `emptyDir` workspace
//! the files did not survive the old pod, and the model is told so first, unless the old pod
//! suspended and saved them with the checkpoint: then they are written back and nothing is
//! lost. A suspended Run resumes here too, once its answer is in `spec.responses`.

use herd_crds::wire::RunConfig;
use herd_sandbox::{OUTPUTS, SavedFile, UPLOADS, WORKSPACE};

use crate::control::checkpoint::{Checkpoint, CheckpointStop};
use crate::thread::{Message, MessageKind, ThreadState};

/// Where a resumed attempt starts.
#[derive(Debug)]
pub(super) struct Resume {
    /// Why the earlier attempt stopped: its question, or a signal.
    pub stop: CheckpointStop,
    /// The thread as it was when it asked.
    pub state: ThreadState,
    /// The workspace's files the earlier pod saved when it suspended, to write back.
    pub files: Vec<SavedFile>,
    /// Whether the workspace was an `emptyDir`, gone with the earlier pod, and not saved.
    pub workspace_lost: bool,
}

/// The resume point of the attempt `config` describes, if an earlier one left a checkpoint.
pub(super) fn resume(config: &RunConfig) -> Result<Option<Resume>, String> {
    let Some(text) = &config.checkpoint_gzip_base64 else {
        return Ok(None);
    };
    let checkpoint = Checkpoint::from_gzip_base64(text)?;
    let empty_dir = config
        .agent
        .sandbox
        .workspace
        .persistent_volume_claim
        .is_none();
    Ok(Some(Resume {
        stop: checkpoint.stop,
        state: checkpoint.state,
        workspace_lost: empty_dir && checkpoint.files.is_empty(),
        files: checkpoint.files,
    }))
}

impl Resume {
    /// The thread to run on: the checkpoint's, told what was lost with the old pod, then the
    /// `answer` to its question, or told it was interrupted.
    pub fn continued(self, answer: Option<String>) -> ThreadState {
        let mut state = self.state;
        let stopped_at = match &self.stop {
            CheckpointStop::Question(question) => question.id.clone(),
            CheckpointStop::Interrupted(how) => how.at.clone(),
            CheckpointStop::Approval(requests) => {
                requests.first().map(|r| r.id.clone()).unwrap_or_default()
            }
        };
        if self.workspace_lost {
            let presented = std::mem::take(&mut state.artifacts);
            state.messages.push(Message::hidden_user(
                format!("workspace-lost-{stopped_at}"),
                MessageKind::WorkspaceLost,
                lost_message(&presented),
            ));
        }
        match (&self.stop, answer) {
            (CheckpointStop::Question(question), Some(answer)) => state
                .messages
                .push(Message::user(format!("answer-{}", question.id), answer)),
            (CheckpointStop::Interrupted(how), _) => state.messages.push(how.resume_turn()),
            (CheckpointStop::Question(_), None) | (CheckpointStop::Approval(_), _) => {}
        }
        state
    }
}

/// What the model reads when its files are gone.
fn lost_message(presented: &[String]) -> String {
    let mut text = format!(
        "This run was resumed on a new pod from its checkpoint: the pod it ran in was lost \
         (while it waited for an answer, or stopped). Its workspace was not persistent, so the \
         files written under {WORKSPACE} and {OUTPUTS} before are gone ({UPLOADS} holds the \
         Run's inputs again). Recreate what you still need before you use it."
    );
    if !presented.is_empty() {
        text.push_str(&format!(
            " The files presented earlier are gone too; present them again once recreated: {}.",
            presented.join(", ")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_doubles::market_question;
    use base64::Engine as _;
    use herd_crds::agent::WorkspaceClaimSpec;

    fn config(checkpoint: Option<&Checkpoint>) -> RunConfig {
        let mut config: RunConfig = serde_json::from_value(serde_json::json!({
            "attempt": 2,
            "agent": {},
            "agentName": "analyst",
            "run": {"agentRef": {"name": "analyst"}, "task": "Map the market."},
            "depth": 0,
            "secondsLeft": 600,
            "maxModelCalls": 20
        }))
        .unwrap();
        config.checkpoint_gzip_base64 = checkpoint.map(|checkpoint| {
            base64::engine::general_purpose::STANDARD.encode(checkpoint.to_gzip().unwrap())
        });
        config
    }

    fn checkpoint() -> Checkpoint {
        let mut state = ThreadState::new("Map the market.");
        state
            .artifacts
            .push("/mnt/user-data/outputs/draft.md".into());
        market_question(&[], state)
    }

    #[test]
    fn a_first_attempt_starts_from_the_task() {
        assert!(resume(&config(None)).unwrap().is_none());
    }

    #[test]
    fn an_emptydir_run_resumes_told_its_files_are_gone_then_answered() {
        let resumed = resume(&config(Some(&checkpoint()))).unwrap().unwrap();
        assert!(matches!(&resumed.stop, CheckpointStop::Question(q) if q.id == "q-call_1_0"));
        assert!(resumed.workspace_lost);
        let state = resumed.continued(Some("Europe only".into()));
        let [task, lost, answer] = state.messages.as_slice() else {
            panic!("{:?}", state.messages);
        };
        assert_eq!(task.text(), "Map the market.");
        let Message::User(lost) = lost else {
            panic!("{lost:?}")
        };
        assert!(lost.meta.hidden);
        assert_eq!(lost.meta.kind, Some(MessageKind::WorkspaceLost));
        assert!(
            lost.content
                .contains("files written under /mnt/user-data/workspace")
        );
        assert!(lost.content.contains("/mnt/user-data/outputs/draft.md"));
        assert_eq!(answer.id(), "answer-q-call_1_0");
        assert_eq!(answer.text(), "Europe only");
        assert!(state.artifacts.is_empty(), "what is gone is not presented");
    }

    #[test]
    fn a_suspended_pods_saved_files_come_back_and_nothing_is_lost() {
        let mut saved = checkpoint();
        saved.files.push(SavedFile {
            path: "/mnt/user-data/outputs/draft.md".into(),
            data_base64: "ZHJhZnQ=".into(),
            executable: false,
        });
        let resumed = resume(&config(Some(&saved))).unwrap().unwrap();
        assert!(!resumed.workspace_lost);
        assert_eq!(resumed.files, saved.files);
        let state = resumed.continued(Some("Europe only".into()));
        assert_eq!(state.messages.len(), 2, "the task and the answer");
        assert_eq!(state.artifacts, ["/mnt/user-data/outputs/draft.md"]);
    }

    #[test]
    fn a_claimed_workspace_survives_and_nothing_is_said() {
        let mut config = config(Some(&checkpoint()));
        config.agent.sandbox.workspace.persistent_volume_claim =
            Some(serde_json::from_value::<WorkspaceClaimSpec>(serde_json::json!({})).unwrap());
        let resumed = resume(&config).unwrap().unwrap();
        assert!(!resumed.workspace_lost);
        let state = resumed.continued(Some("Europe only".into()));
        assert_eq!(state.messages.len(), 2);
        assert_eq!(state.artifacts, ["/mnt/user-data/outputs/draft.md"]);
    }

    #[test]
    fn an_interrupted_attempt_resumes_told_so_without_asking() {
        let mut config = config(None);
        let checkpoint = Checkpoint::interrupted("SIGTERM", ThreadState::new("Map the market."));
        config.checkpoint_gzip_base64 =
            Some(base64::engine::general_purpose::STANDARD.encode(checkpoint.to_gzip().unwrap()));
        let resumed = resume(&config).unwrap().unwrap();
        assert!(matches!(resumed.stop, CheckpointStop::Interrupted(_)));
        let state = resumed.continued(None);
        let [task, lost, interrupted] = state.messages.as_slice() else {
            panic!("{:?}", state.messages);
        };
        assert_eq!(task.text(), "Map the market.");
        assert!(lost.text().contains("was not persistent"), "{lost:?}");
        let Message::User(interrupted) = interrupted else {
            panic!("{interrupted:?}")
        };
        assert_eq!(interrupted.meta.kind, Some(MessageKind::Interrupted));
        assert!(interrupted.content.contains("SIGTERM"));
    }

    #[test]
    fn a_broken_checkpoint_is_an_error() {
        let mut config = config(None);
        config.checkpoint_gzip_base64 = Some("H4sI-not-really".into());
        assert!(resume(&config).unwrap_err().contains("checkpoint"));
    }
}
