//! The `ControlPlane` seam: how a run reports progress, starts subagents, asks questions,
//! posts its result and reaches memory. Local (`herd-runner run`) or the operator's run API
//! (`herd-runner pod`).

pub(crate) mod asked;
pub(crate) mod checkpoint;
pub mod deadline;
pub mod local;
pub mod run_api;

use async_trait::async_trait;
use herd_crds::approval::{ApprovalRequest, Verdict};
use herd_crds::report::{Clarification, StopReason};
use herd_crds::wire::{
    ChildOutcome, ChildRequest, MemoryDocument, MemoryOperation, ProgressReport, ResultReport,
};

use crate::thread::ThreadState;

/// The Agent's `subagents` caps, as they apply to one agent's children: the control plane
/// enforces them (in-process locally, the run API in a cluster).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubagentCaps {
    /// Children running at once.
    pub max_concurrent: u32,
    /// Children per run, in total.
    pub max_total: u32,
}

/// What an agent has left when it calls a tool; a subagent it starts never gets more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub model_calls_left: u32,
    /// Tokens left, when the run has a token budget.
    pub tokens_left: Option<u64>,
    /// When the run must end, if it has a deadline.
    pub deadline: Option<tokio::time::Instant>,
}

/// The control plane could not be reached or refused the request.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("control plane unavailable: {0}")]
    Unavailable(String),
    #[error("control plane refused the request: {0}")]
    Refused(String),
    /// A newer attempt of the Run has replaced this one: nothing this run reports counts.
    #[error("a newer attempt replaced this one: {0}")]
    StaleAttempt(String),
    #[error("{0}")]
    Io(String),
}

/// What became of a clarification question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AskOutcome {
    /// The user answered; the run goes on in the same process.
    Answered(String),
    /// The question was recorded with a checkpoint; the process should stop and be resumed.
    Suspended,
    /// The question cannot wait for an answer (its checkpoint does not fit, even summarized):
    /// the run ends so, saying why.
    Ended { reason: StopReason, error: String },
}

/// What became of a turn's approval requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// Every request has its verdict, by request id (a person's, or the timeout's); the run
    /// goes on in the same process.
    Decided(Vec<(String, Verdict)>),
    /// The requests were recorded with a checkpoint; the process should stop and be resumed.
    Suspended,
    /// The run ends so: the checkpoint does not fit, or a request timed out with
    /// `onTimeout: fail`.
    Ended { reason: StopReason, error: String },
}

/// Where a run reports to.
#[async_trait]
pub trait ControlPlane: Send + Sync {
    /// Title, todos and usage so far.
    async fn report_progress(&self, report: ProgressReport) -> Result<(), ControlError>;

    /// Runs a subagent for one `task` call and waits for its outcome. `parent` is what the
    /// calling agent has left; the child never gets more.
    async fn run_child(
        &self,
        request: ChildRequest,
        parent: Budget,
    ) -> Result<ChildOutcome, ControlError>;

    /// Asks the user a question, saving `checkpoint` first so the run can resume.
    async fn ask(
        &self,
        question: &Clarification,
        checkpoint: &ThreadState,
    ) -> Result<AskOutcome, ControlError>;

    /// Asks a person to decide on tool calls (all of one turn), saving `checkpoint` first so
    /// the run can resume: the same wait as a question's, answered by decisions in
    /// `spec.responses` (or at the terminal).
    async fn ask_approval(
        &self,
        requests: &[ApprovalRequest],
        checkpoint: &ThreadState,
    ) -> Result<ApprovalOutcome, ControlError>;

    /// The final answer and the presented files.
    async fn post_result(&self, result: ResultReport) -> Result<(), ControlError>;

    /// The memory document this run reads (agent- or user-scoped).
    async fn read_memory(&self) -> Result<MemoryDocument, ControlError>;

    /// Applies memory operations atomically with respect to other runs.
    async fn update_memory(&self, operations: Vec<MemoryOperation>) -> Result<(), ControlError>;
}
