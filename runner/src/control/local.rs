//! `LocalControlPlane`: the control plane of `herd-runner run` — subagents in-process under the
//! same caps as in a cluster, questions on the terminal or saved as a resumable checkpoint,
//! memory in a local file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use herd_crds::approval::{ApprovalRequest, Verdict};
use herd_crds::report::{Clarification, Usage};
use herd_crds::wire::{
    Answer, ChildOutcome, ChildRequest, ChildStatus, MemoryDocument, MemoryOperation,
    ProgressReport, ResultReport,
};
use tokio::sync::Semaphore;

use super::asked::verdict_of;
use super::checkpoint::Checkpoint;
use super::{ApprovalOutcome, AskOutcome, Budget, ControlError, ControlPlane, SubagentCaps};
use crate::memory::file::MemoryFile;
use crate::thread::ThreadState;

/// Runs one subagent in-process; implemented by the runtime, which knows how to build agents.
#[async_trait]
pub trait SubagentLauncher: Send + Sync {
    /// Runs the child to its end within `budget`.
    async fn launch(&self, request: ChildRequest, budget: Budget) -> ChildOutcome;
}

/// Asks the person at the terminal.
#[async_trait]
pub trait Prompter: Send + Sync {
    /// Shows the question and returns the answer, or `None` when no answer can be had.
    async fn ask(&self, question: &Clarification) -> Option<String>;

    /// Asks whether the held tool call may run; `None` when no answer can be had.
    async fn approve(&self, request: &ApprovalRequest) -> Option<Verdict>;
}

/// How questions are answered locally.
pub enum Questions {
    /// Ask at the terminal and go on in the same process.
    Interactive(Arc<dyn Prompter>),
    /// Save a checkpoint into this folder and stop; `--resume` continues.
    Suspend(PathBuf),
    /// Subagents cannot ask (they have no `ask_clarification` tool).
    Refuse,
}

/// The local control plane of one agent (the lead, or a subagent with its own children).
pub struct LocalControlPlane {
    caps: Option<SubagentCaps>,
    launcher: Option<Arc<dyn SubagentLauncher>>,
    running: Semaphore,
    started: AtomicU32,
    questions: Questions,
    /// Answers given ahead of time (a Run manifest's `spec.responses`), by question id.
    answers: Vec<Answer>,
    memory: Option<MemoryFile>,
    result: Mutex<Option<ResultReport>>,
}

impl LocalControlPlane {
    /// A control plane; `caps` and `launcher` are `None` when subagents are off.
    pub fn new(
        caps: Option<SubagentCaps>,
        launcher: Option<Arc<dyn SubagentLauncher>>,
        questions: Questions,
        memory: Option<MemoryFile>,
    ) -> Self {
        let permits = caps.map_or(0, |caps| caps.max_concurrent.max(1) as usize);
        LocalControlPlane {
            caps,
            launcher,
            running: Semaphore::new(permits),
            started: AtomicU32::new(0),
            questions,
            answers: Vec::new(),
            memory,
            result: Mutex::new(None),
        }
    }

    /// Answers to hand out before asking anyone, as a Run's `spec.responses` does.
    pub fn with_answers(mut self, answers: Vec<Answer>) -> Self {
        self.answers = answers;
        self
    }

    /// The result the run posted, if it did.
    pub fn result(&self) -> Option<ResultReport> {
        self.result.lock().ok().and_then(|result| result.clone())
    }

    fn refused(name: String, error: String) -> ChildOutcome {
        ChildOutcome {
            name,
            status: Some(ChildStatus::Failed),
            stop_reason: None,
            result: String::new(),
            error: Some(error),
            usage: Usage::default(),
            artifacts: Vec::new(),
        }
    }
}

#[async_trait]
impl ControlPlane for LocalControlPlane {
    async fn report_progress(&self, _report: ProgressReport) -> Result<(), ControlError> {
        // Locally the observer already shows progress as it happens.
        Ok(())
    }

    async fn run_child(
        &self,
        request: ChildRequest,
        parent: Budget,
    ) -> Result<ChildOutcome, ControlError> {
        let name = format!("{}#{}", request.subagent_type, request.tool_call_id);
        let (Some(caps), Some(launcher)) = (self.caps, &self.launcher) else {
            return Ok(Self::refused(
                name,
                "subagents are not enabled for this agent".into(),
            ));
        };
        let reserved = self
            .started
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |started| {
                (started < caps.max_total).then_some(started + 1)
            });
        if reserved.is_err() {
            return Ok(Self::refused(
                name,
                format!("the run's subagent limit ({}) is reached", caps.max_total),
            ));
        }
        let _permit = self
            .running
            .acquire()
            .await
            .map_err(|error| ControlError::Io(error.to_string()))?;
        Ok(launcher.launch(request, parent).await)
    }

    async fn ask(
        &self,
        question: &Clarification,
        checkpoint: &ThreadState,
    ) -> Result<AskOutcome, ControlError> {
        if let Some(given) = self.answers.iter().find(|a| a.id == question.id) {
            return Ok(AskOutcome::Answered(given.answer.clone()));
        }
        match &self.questions {
            Questions::Interactive(prompter) => match prompter.ask(question).await {
                Some(answer) => Ok(AskOutcome::Answered(answer)),
                None => Err(ControlError::Io(
                    "the terminal closed before the question was answered".into(),
                )),
            },
            Questions::Suspend(dir) => {
                Checkpoint::question(question.clone(), checkpoint.clone())
                    .save(dir)
                    .map_err(|error| ControlError::Io(error.to_string()))?;
                Ok(AskOutcome::Suspended)
            }
            Questions::Refuse => Err(ControlError::Refused(
                "a subagent cannot ask the user questions".into(),
            )),
        }
    }

    async fn ask_approval(
        &self,
        requests: &[ApprovalRequest],
        checkpoint: &ThreadState,
    ) -> Result<ApprovalOutcome, ControlError> {
        let given = |id: &str| self.answers.iter().find(|a| a.id == id);
        let mut verdicts: Vec<(String, Verdict)> = requests
            .iter()
            .filter_map(|r| Some((r.id.clone(), verdict_of(given(&r.id)?))))
            .collect();
        let open: Vec<&ApprovalRequest> =
            requests.iter().filter(|r| given(&r.id).is_none()).collect();
        if open.is_empty() {
            return Ok(ApprovalOutcome::Decided(verdicts));
        }
        match &self.questions {
            Questions::Interactive(prompter) => {
                for request in open {
                    let verdict = prompter.approve(request).await.ok_or_else(|| {
                        ControlError::Io(
                            "the terminal closed before the tool call was approved or denied"
                                .into(),
                        )
                    })?;
                    verdicts.push((request.id.clone(), verdict));
                }
                Ok(ApprovalOutcome::Decided(verdicts))
            }
            Questions::Suspend(dir) => {
                Checkpoint::approval(requests.to_vec(), checkpoint.clone())
                    .save(dir)
                    .map_err(|error| ControlError::Io(error.to_string()))?;
                Ok(ApprovalOutcome::Suspended)
            }
            Questions::Refuse => Err(ControlError::Refused(
                "a subagent cannot ask a person for approval".into(),
            )),
        }
    }

    async fn post_result(&self, result: ResultReport) -> Result<(), ControlError> {
        let mut slot = self
            .result
            .lock()
            .map_err(|_| ControlError::Io("result lock poisoned".into()))?;
        *slot = Some(result);
        Ok(())
    }

    async fn read_memory(&self) -> Result<MemoryDocument, ControlError> {
        match &self.memory {
            Some(file) => file
                .read()
                .map_err(|error| ControlError::Io(error.to_string())),
            None => Ok(MemoryDocument::default()),
        }
    }

    async fn update_memory(&self, operations: Vec<MemoryOperation>) -> Result<(), ControlError> {
        let Some(file) = &self.memory else {
            return Ok(());
        };
        let file = file.clone();
        tokio::task::spawn_blocking(move || file.apply(&operations))
            .await
            .map_err(|error| ControlError::Io(error.to_string()))?
            .map_err(|error| ControlError::Io(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::control::checkpoint::CheckpointStop;

    /// Counts how many launches overlap.
    #[derive(Default)]
    struct SlowLauncher {
        running: AtomicU32,
        peak: AtomicU32,
    }

    #[async_trait]
    impl SubagentLauncher for SlowLauncher {
        async fn launch(&self, request: ChildRequest, _budget: Budget) -> ChildOutcome {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.running.fetch_sub(1, Ordering::SeqCst);
            ChildOutcome {
                name: request.tool_call_id,
                status: Some(ChildStatus::Completed),
                stop_reason: None,
                result: "ok".into(),
                error: None,
                usage: Usage {
                    input_tokens: 3,
                    ..Usage::default()
                },
                artifacts: vec![],
            }
        }
    }

    fn request(id: u32) -> ChildRequest {
        ChildRequest {
            attempt: 1,
            tool_call_id: format!("call_{id}"),
            description: "d".into(),
            prompt: "p".into(),
            subagent_type: "general-purpose".into(),
            model_calls_left: None,
            tokens_left: None,
            seconds_left: None,
        }
    }

    const BUDGET: Budget = Budget {
        model_calls_left: 10,
        tokens_left: None,
        deadline: None,
    };

    #[tokio::test]
    async fn children_respect_concurrency_and_total_caps() {
        let launcher = Arc::new(SlowLauncher::default());
        let control = Arc::new(LocalControlPlane::new(
            Some(SubagentCaps {
                max_concurrent: 2,
                max_total: 5,
            }),
            Some(launcher.clone()),
            Questions::Refuse,
            None,
        ));
        let runs = (0..7).map(|i| {
            let control = control.clone();
            async move { control.run_child(request(i), BUDGET).await.unwrap() }
        });
        let outcomes = futures::future::join_all(runs).await;
        let completed = outcomes
            .iter()
            .filter(|o| o.status == Some(ChildStatus::Completed))
            .count();
        assert_eq!(completed, 5);
        assert_eq!(launcher.peak.load(Ordering::SeqCst), 2);
        let refused = outcomes
            .iter()
            .find(|o| o.status == Some(ChildStatus::Failed))
            .unwrap();
        assert!(refused.error.as_deref().unwrap().contains("limit (5)"));
    }

    #[tokio::test]
    async fn children_are_refused_when_subagents_are_off() {
        let control = LocalControlPlane::new(None, None, Questions::Refuse, None);
        let outcome = control.run_child(request(1), BUDGET).await.unwrap();
        assert_eq!(outcome.status, Some(ChildStatus::Failed));
    }

    #[tokio::test]
    async fn a_suspended_question_saves_a_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let control = LocalControlPlane::new(
            None,
            None,
            Questions::Suspend(dir.path().to_path_buf()),
            None,
        );
        let question = Clarification {
            id: "q-1".into(),
            question: "Which?".into(),
            kind: herd_crds::report::ClarificationType::MissingInfo,
            context: None,
            options: vec![],
            asked_at: None,
        };
        let state = ThreadState::new("task");
        let outcome = control.ask(&question, &state).await.unwrap();
        assert_eq!(outcome, AskOutcome::Suspended);
        let saved = Checkpoint::load(dir.path()).unwrap();
        assert_eq!(saved.stop, CheckpointStop::Question(question.clone()));
        assert_eq!(saved.state, state);

        let answered = LocalControlPlane::new(None, None, Questions::Refuse, None)
            .with_answers(vec![Answer::text("q-1", "this one")]);
        let outcome = answered.ask(&question, &state).await.unwrap();
        assert_eq!(outcome, AskOutcome::Answered("this one".into()));
    }

    #[tokio::test]
    async fn approvals_are_decided_ahead_saved_for_a_resume_or_refused_in_a_subagent() {
        let requests = vec![
            ApprovalRequest::new("c1", "bash", r#"{"command":"rm -rf build/"}"#),
            ApprovalRequest::new("c2", "bash", r#"{"command":"git push"}"#),
        ];
        let state = ThreadState::new("task");
        let decided =
            LocalControlPlane::new(None, None, Questions::Refuse, None).with_answers(vec![
                Answer {
                    decision: Some(herd_crds::approval::ApprovalDecision::Approve),
                    ..Answer::text("a-c1", "")
                },
                Answer {
                    decision: Some(herd_crds::approval::ApprovalDecision::Deny),
                    reason: Some("not today".into()),
                    ..Answer::text("a-c2", "")
                },
            ]);
        assert_eq!(
            decided.ask_approval(&requests, &state).await.unwrap(),
            ApprovalOutcome::Decided(vec![
                ("a-c1".into(), Verdict::approve()),
                ("a-c2".into(), Verdict::deny(Some("not today".into()))),
            ])
        );

        let dir = tempfile::tempdir().unwrap();
        let waiting = LocalControlPlane::new(
            None,
            None,
            Questions::Suspend(dir.path().to_path_buf()),
            None,
        );
        assert_eq!(
            waiting.ask_approval(&requests, &state).await.unwrap(),
            ApprovalOutcome::Suspended
        );
        let saved = Checkpoint::load(dir.path()).unwrap();
        assert_eq!(saved.stop, CheckpointStop::Approval(requests.clone()));

        let subagent = LocalControlPlane::new(None, None, Questions::Refuse, None);
        assert!(matches!(
            subagent.ask_approval(&requests, &state).await,
            Err(ControlError::Refused(_))
        ));
    }
}
