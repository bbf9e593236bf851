//! Why a local run could not start or failed outside the agent: one error for `run_local`,
//! whatever part of the runtime it came from.

use super::agents::AgentsError;
use super::manifests::ManifestsError;
use super::run_record::RecordError;
use crate::plan::PlanError;

/// A local run could not start or failed outside the agent (bad files, unreadable folder).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LocalError(pub String);

impl From<ManifestsError> for LocalError {
    fn from(error: ManifestsError) -> Self {
        LocalError(error.0)
    }
}

impl From<PlanError> for LocalError {
    fn from(error: PlanError) -> Self {
        LocalError(error.0)
    }
}

impl From<RecordError> for LocalError {
    fn from(error: RecordError) -> Self {
        LocalError(error.0)
    }
}

impl From<AgentsError> for LocalError {
    fn from(error: AgentsError) -> Self {
        LocalError(error.to_string())
    }
}
