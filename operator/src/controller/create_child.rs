//! `create_child`: the one way a child Run comes to be (the run API calls it for a runner's
//! `task` call). It reads the parent live, checks the request against the parent's snapshot,
//! reserves the child in the parent's `status.children` (a write conditional on the parent's
//! version, so concurrent requests never pass `maxTotal`), then creates the child Run owned by
//! the parent. Asking again for the same `toolCallId` returns the same child.

use std::time::Duration;

use herd_crds::run::{Run, RunStatus, phase_of};
use herd_crds::wire::ChildRequest;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::PostParams;
use kube::{Api, Client, Resource, ResourceExt};

use super::run_objects::owned_by;
use crate::apply::apply_status;
use crate::decide::child_run::{Refusal, children_status, desired_child, reserve};
use crate::decide::run_clocks::{elapsed, working_time_left};
use crate::decide::run_snapshot::{Snapshot, read_snapshot};
use crate::decide::run_status::snapshot_name;
use crate::decide::trace_context::set_traceparent;
use crate::error::Error;

/// How often a reservation is tried again when the parent changed under it.
const RESERVE_TRIES: usize = 8;

/// Why no child was created.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The request is refused for good: limits, depth, an invalid request.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The parent is gone, or was replaced by another Run of its name.
    #[error("{0}")]
    ParentGone(String),
    /// The parent has ended: it starts no more children.
    #[error("{0}")]
    ParentEnded(String),
    /// The request comes from an attempt the parent has left behind.
    #[error("attempt {asked} of {parent} is over; attempt {current} runs now")]
    StaleAttempt {
        /// The parent's name.
        parent: String,
        /// The request's attempt.
        asked: u32,
        /// The parent's current attempt.
        current: u32,
    },
    /// The parent has no snapshot to narrow.
    #[error("{0}")]
    NoSnapshot(String),
    /// Try again later: a Run of the child's name is being deleted, or the parent kept
    /// changing.
    #[error("{0}")]
    Retry(String),
    /// The API server failed.
    #[error(transparent)]
    Api(#[from] Error),
}

impl From<kube::Error> for ChildError {
    fn from(error: kube::Error) -> Self {
        ChildError::Api(Error::Kube(error))
    }
}

/// The child Run a request names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Child {
    /// Its name.
    pub name: String,
    /// Whether this request created it (else an earlier one with the same `toolCallId` did).
    pub created: bool,
}

/// Creates (or finds) the child Run of `parent` for `request`; a valid `traceparent` (the
/// span of the parent's `task` call) becomes the child's annotation, so its pod continues the
/// parent's trace.
pub async fn create_child(
    client: &Client,
    parent: &Run,
    request: &ChildRequest,
    traceparent: Option<&str>,
) -> Result<Child, ChildError> {
    let name = parent.name_any();
    let namespace = parent
        .namespace()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    let runs: Api<Run> = Api::namespaced(client.clone(), &namespace);
    let snapshots: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    for _ in 0..RESERVE_TRIES {
        let live = runs
            .get_opt(&name)
            .await?
            .ok_or_else(|| ChildError::ParentGone(format!("the parent Run {name} is gone")))?;
        let (uid, status) = check_parent(parent, &live, request)?;
        let snapshot = snapshots
            .get_opt(&snapshot_name(&name))
            .await?
            .filter(|cm| owned_by(cm, &uid))
            .as_ref()
            .and_then(read_snapshot)
            .ok_or_else(|| {
                ChildError::NoSnapshot(format!("the parent Run {name} has no snapshot"))
            })?;
        let time_left = parent_time_left(&live, &status, &snapshot, &Time(jiff::Timestamp::now()));
        let owner = live
            .controller_owner_ref(&())
            .ok_or(Error::MissingField("metadata.uid"))?;
        let mut child = desired_child(&live, owner, &snapshot, request, time_left)?;
        set_traceparent(&mut child, traceparent);
        let child_name = child.name_any();
        let max_total = snapshot.agent.subagents.max_total;
        if let Some(children) = reserve(&status.children, &child_name, max_total)? {
            let (children, child_counts) = children_status(&children, &Default::default());
            let reserved = RunStatus {
                report: None,
                children,
                child_counts,
                ..status
            };
            match apply_status(&runs, &live, &reserved).await {
                Ok(_) => {}
                // The parent changed since it was read: read it again.
                Err(kube::Error::Api(refused)) if refused.is_conflict() => continue,
                Err(error) => return Err(error.into()),
            }
        }
        return create(&runs, &child, &uid).await.map(|created| Child {
            name: child_name,
            created,
        });
    }
    Err(ChildError::Retry(format!(
        "the parent Run {name} kept changing; try again"
    )))
}

/// The live parent's UID and status, when it may start a child: the same Run as the one the
/// request was admitted for, not finished, and on the request's attempt or an earlier one.
fn check_parent(
    parent: &Run,
    live: &Run,
    request: &ChildRequest,
) -> Result<(String, RunStatus), ChildError> {
    let name = live.name_any();
    let uid = live.uid().unwrap_or_default();
    if parent.uid().is_some_and(|u| u != uid) {
        return Err(ChildError::ParentGone(format!(
            "the parent Run {name} was replaced"
        )));
    }
    let status = live.status.clone().unwrap_or_default();
    let phase = phase_of(&status.conditions);
    if phase.is_finished() {
        return Err(ChildError::ParentEnded(format!(
            "the parent Run {name} has ended ({phase:?}): it starts no more children"
        )));
    }
    let attempt = status.attempt.unwrap_or(1);
    if request.attempt < attempt {
        return Err(ChildError::StaleAttempt {
            parent: name,
            asked: request.attempt,
            current: attempt,
        });
    }
    Ok((uid, status))
}

/// The parent's working time left under its snapshot's timeout (its waits for a person do
/// not count). `startTime` lands with the status written after the first Pod is created, so a
/// fast runner can ask before it does; the Run's creation is never later than its start, so
/// the time counted from it is never too generous.
fn parent_time_left(live: &Run, status: &RunStatus, snapshot: &Snapshot, now: &Time) -> Duration {
    let timeout = snapshot.run.timeout();
    match (&status.start_time, &live.metadata.creation_timestamp) {
        (Some(_), _) => working_time_left(status, timeout, now),
        (None, Some(created)) => timeout.saturating_sub(elapsed(created, now)),
        (None, None) => Duration::ZERO,
    }
}

/// Creates the reserved child (`true`); one that exists counts (`false`) only when it is this
/// parent's.
async fn create(runs: &Api<Run>, child: &Run, parent_uid: &str) -> Result<bool, ChildError> {
    let name = child.name_any();
    match runs.create(&PostParams::default(), child).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => match runs.get_opt(&name).await? {
            Some(existing) if owned_by(&existing, parent_uid) => Ok(false),
            Some(existing) if existing.metadata.deletion_timestamp.is_some() => Err(
                ChildError::Retry(format!("a Run named {name} is being deleted; try again")),
            ),
            Some(_) => Err(ChildError::Refused(Refusal::Invalid(format!(
                "a Run named {name} exists and is not this Run's child"
            )))),
            None => Err(ChildError::Retry(format!(
                "a Run named {name} was deleted meanwhile; try again"
            ))),
        },
        Err(kube::Error::Api(status)) if (400..500).contains(&status.code) => {
            Err(ChildError::Refused(Refusal::Invalid(status.message)))
        }
        Err(error) => Err(error.into()),
    }
}
