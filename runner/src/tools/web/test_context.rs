//! A `ToolContext` for the web tools' tests: they run on the agent side and must never reach
//! the sandbox or the control plane, so both stubs fail loudly.

use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::report::Clarification;
use herd_crds::wire::{
    ChildOutcome, ChildRequest, MemoryDocument, MemoryOperation, ProgressReport, ResultReport,
};
use herd_sandbox::testing::FakeExecutor;

use crate::control::{AskOutcome, Budget, ControlError, ControlPlane};
use crate::thread::ThreadState;
use crate::tools::ToolContext;

struct NoControl;

#[async_trait]
impl ControlPlane for NoControl {
    async fn report_progress(&self, _: ProgressReport) -> Result<(), ControlError> {
        panic!("web tools must not use the control plane")
    }
    async fn run_child(&self, _: ChildRequest, _: Budget) -> Result<ChildOutcome, ControlError> {
        panic!("web tools must not use the control plane")
    }
    async fn ask(&self, _: &Clarification, _: &ThreadState) -> Result<AskOutcome, ControlError> {
        panic!("web tools must not use the control plane")
    }
    async fn ask_approval(
        &self,
        _: &[herd_crds::approval::ApprovalRequest],
        _: &ThreadState,
    ) -> Result<crate::control::ApprovalOutcome, ControlError> {
        panic!("web tools must not use the control plane")
    }
    async fn post_result(&self, _: ResultReport) -> Result<(), ControlError> {
        panic!("web tools must not use the control plane")
    }
    async fn read_memory(&self) -> Result<MemoryDocument, ControlError> {
        panic!("web tools must not use the control plane")
    }
    async fn update_memory(&self, _: Vec<MemoryOperation>) -> Result<(), ControlError> {
        panic!("web tools must not use the control plane")
    }
}

/// A context whose sandbox and control plane panic when touched.
pub fn context() -> ToolContext {
    ToolContext {
        call_id: "call-1".to_owned(),
        executor: Arc::new(FakeExecutor::new(|request| {
            panic!("web tools must not use the sandbox: {request:?}")
        })),
        control: Arc::new(NoControl),
        attempt: 1,
        budget: Budget {
            model_calls_left: 10,
            tokens_left: None,
            deadline: None,
        },
    }
}
