//! What every reconcile starts with: only the leader acts, the reconcile is measured, and the
//! object's name, namespace, API, previous status and the clock are read once. For Agents,
//! Skills and Schedules, also the kstatus `Reconciling` mark of a new generation.

use std::borrow::Cow;

use herd_crds::agent::AgentStatus;
use herd_crds::condition::Condition;
use herd_crds::schedule::ScheduleStatus;
use herd_crds::skill::SkillStatus;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::core::object::HasStatus;
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::apply::apply_status;
use crate::controller_state::Shared;
use crate::decide::conditions::begin_reconcile;
use crate::error::Error;
use crate::metrics::Measure;

/// A reconcile under way on the leader.
pub struct Reconcile<'a, K: HasStatus> {
    /// The object's `metadata.name`.
    pub name: &'a str,
    /// The object's `metadata.namespace`.
    pub namespace: &'a str,
    /// The object's kind in its namespace.
    pub api: Api<K>,
    /// The status the object had (its default when it had none).
    pub previous: K::Status,
    /// The reconcile's clock.
    pub now: Time,
    _measure: Measure<'a>,
}

/// Starts reconciling `object` for `controller`; `None` when this replica does not lead (the
/// others only keep their caches warm).
pub fn begin<'a, K>(
    shared: &'a Shared,
    controller: &'static str,
    object: &'a K,
) -> Result<Option<Reconcile<'a, K>>, Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()> + HasStatus,
    K::Status: Clone + Default,
{
    if !shared.is_leader() {
        return Ok(None);
    }
    let measure = shared.metrics.reconcile(controller);
    let meta = object.meta();
    let name = meta
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    let namespace = meta
        .namespace
        .as_deref()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    Ok(Some(Reconcile {
        name,
        namespace,
        api: Api::namespaced(shared.client.clone(), namespace),
        previous: object.status().cloned().unwrap_or_default(),
        now: Time(jiff::Timestamp::now()),
        _measure: measure,
    }))
}

/// A status carrying kstatus conditions and `observedGeneration`.
pub trait Observed: Clone + Serialize {
    /// The conditions.
    fn conditions(&self) -> &[Condition];
    /// The generation the status describes.
    fn observed_generation(&self) -> Option<i64>;
    /// The same status with other conditions.
    fn with_conditions(&self, conditions: Vec<Condition>) -> Self;
}

impl Observed for AgentStatus {
    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }
    fn observed_generation(&self) -> Option<i64> {
        self.observed_generation
    }
    fn with_conditions(&self, conditions: Vec<Condition>) -> Self {
        AgentStatus {
            conditions,
            ..self.clone()
        }
    }
}

impl Observed for SkillStatus {
    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }
    fn observed_generation(&self) -> Option<i64> {
        self.observed_generation
    }
    fn with_conditions(&self, conditions: Vec<Condition>) -> Self {
        SkillStatus {
            conditions,
            ..self.clone()
        }
    }
}

impl Observed for ScheduleStatus {
    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }
    fn observed_generation(&self) -> Option<i64> {
        self.observed_generation
    }
    fn with_conditions(&self, conditions: Vec<Condition>) -> Self {
        ScheduleStatus {
            conditions,
            ..self.clone()
        }
    }
}

impl<K> Reconcile<'_, K>
where
    K: Resource<DynamicType = ()> + HasStatus + Clone + DeserializeOwned + std::fmt::Debug,
    K::Status: Observed,
{
    /// Writes `Reconciling=True` when a new generation is seen, and returns the object a
    /// further status write of this reconcile must be conditional on (the written one, which
    /// moved the object on, else `object` itself).
    pub async fn mark_reconciling<'o>(&self, object: &'o K) -> Result<Cow<'o, K>, Error> {
        let previous = &self.previous;
        match begin_reconcile(
            previous.conditions(),
            previous.observed_generation(),
            object.meta().generation,
            &self.now,
        ) {
            Some(conditions) => {
                let marked = previous.with_conditions(conditions);
                Ok(Cow::Owned(apply_status(&self.api, object, &marked).await?))
            }
            None => Ok(Cow::Borrowed(object)),
        }
    }
}
