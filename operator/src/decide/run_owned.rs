//! The metadata of what a Run owns (its snapshot, checkpoint and result ConfigMaps, its
//! workspace claim): in the Run's namespace, labelled `herd.dev/run` with its name, owned by it
//! so that it goes with the Run.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::labels;

/// Whether the operator's caches hold the object: they select on `managed-by`, so objects that
/// are large and read once, live (checkpoints, results), go without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    /// Labelled `managed-by`: in the caches.
    Yes,
    /// Kept out of the caches.
    No,
}

/// The metadata of `name`, owned by the Run `run` of `namespace` through `owner`.
pub fn run_owned(
    name: String,
    run: &str,
    namespace: &str,
    owner: OwnerReference,
    cached: Cached,
) -> ObjectMeta {
    let mut labels = BTreeMap::from([(labels::RUN.to_owned(), run.to_owned())]);
    if cached == Cached::Yes {
        labels.insert(labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned());
    }
    ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_owned()),
        labels: Some(labels),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::fixtures::run_owner;

    fn owner() -> OwnerReference {
        run_owner("r", "u")
    }

    #[test]
    fn owned_by_the_run_and_in_the_caches_only_when_asked() {
        let cached = run_owned("r-snapshot".into(), "r", "ns", owner(), Cached::Yes);
        assert_eq!(cached.name.as_deref(), Some("r-snapshot"));
        assert_eq!(cached.namespace.as_deref(), Some("ns"));
        assert_eq!(cached.owner_references, Some(vec![owner()]));
        let labels = cached.labels.unwrap_or_default();
        assert_eq!(labels[labels::RUN], "r");
        assert_eq!(labels[labels::MANAGED_BY], labels::MANAGER);
        let uncached = run_owned("r-result".into(), "r", "ns", owner(), Cached::No);
        let labels = uncached.labels.unwrap_or_default();
        assert_eq!(labels[labels::RUN], "r");
        assert!(!labels.contains_key(labels::MANAGED_BY));
    }
}
