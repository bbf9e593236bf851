//! Whether an authenticated runner may act on the Run in the path: its Pod (with the token's
//! UID) must be that Run's, and must serve its latest attempt. Pure; the caller finds the Pod
//! and the Run (cache, else live) and remembers the highest attempt seen ([`Attempts`]).

use std::collections::HashMap;
use std::sync::Mutex;

use herd_crds::run::Run;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::authenticate::Runner;
use super::failure::Failure;
use crate::controller::run_objects::owned_by;
use crate::labels;

/// The Run a request names: `/v1/runs/{namespace}/{name}/...`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunPath {
    /// The Run's namespace.
    pub namespace: String,
    /// The Run's name.
    pub name: String,
}

impl From<(String, String)> for RunPath {
    /// The path's `{namespace}/{name}`, as the router extracts it.
    fn from((namespace, name): (String, String)) -> Self {
        RunPath { namespace, name }
    }
}

impl std::fmt::Display for RunPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Refuses a runner of another namespace before anything is looked up there.
pub fn same_namespace(runner: &Runner, path: &RunPath) -> Result<(), Failure> {
    if runner.namespace == path.namespace {
        Ok(())
    } else {
        Err(Failure::forbidden(format!(
            "the token is of namespace {}, not {}",
            runner.namespace, path.namespace
        )))
    }
}

/// The attempt the runner's Pod serves, when that Pod is the Run's and serves its latest
/// attempt (`highest`: the most the Run's status or any request has shown).
pub fn authorize(
    path: &RunPath,
    runner: &Runner,
    pod: Option<&Pod>,
    run: &Run,
    highest: u32,
) -> Result<u32, Failure> {
    same_namespace(runner, path)?;
    let Some(pod) = pod.filter(|pod| pod.uid().as_deref() == Some(runner.pod_uid.as_str())) else {
        return Err(Failure::forbidden(format!(
            "the token's Pod {} (UID {}) does not exist",
            runner.pod_name, runner.pod_uid
        )));
    };
    let run_uid = run.uid().unwrap_or_default();
    let labelled = pod.labels().get(labels::RUN) == Some(&path.name);
    if !labelled || run_uid.is_empty() || !owned_by(pod, &run_uid) {
        return Err(Failure::forbidden(format!(
            "Pod {} is not Run {path}'s",
            runner.pod_name
        )));
    }
    let attempt = pod
        .labels()
        .get(labels::ATTEMPT)
        .and_then(|a| a.parse::<u32>().ok())
        .filter(|a| *a > 0)
        .ok_or_else(|| {
            Failure::forbidden(format!(
                "Pod {} has no {} label",
                runner.pod_name,
                labels::ATTEMPT
            ))
        })?;
    let current = highest.max(run.status.as_ref().and_then(|s| s.attempt).unwrap_or(0));
    if attempt < current {
        return Err(Failure::stale_attempt(attempt, current));
    }
    Ok(attempt)
}

/// Runs kept before the map is emptied (attempts are also in each Run's status).
const FORGET_ABOVE: usize = 100_000;

/// The highest attempt seen per Run (by UID), across the requests of this replica.
#[derive(Debug, Default)]
pub struct Attempts(Mutex<HashMap<String, u32>>);

impl Attempts {
    /// The highest attempt seen for the Run `uid`.
    pub fn highest(&self, uid: &str) -> u32 {
        let seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.get(uid).copied().unwrap_or(0)
    }

    /// Records that a Pod of `attempt` was admitted for the Run `uid`.
    pub fn saw(&self, uid: &str, attempt: u32) {
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.len() >= FORGET_ABOVE && !seen.contains_key(uid) {
            seen.clear();
        }
        let highest = seen.entry(uid.to_owned()).or_insert(0);
        *highest = (*highest).max(attempt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path() -> RunPath {
        RunPath {
            namespace: "ns".into(),
            name: "r".into(),
        }
    }

    fn runner() -> Runner {
        Runner {
            namespace: "ns".into(),
            pod_name: "r-2".into(),
            pod_uid: "pod-2".into(),
        }
    }

    fn run(status_attempt: u32) -> Run {
        serde_json::from_value(json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "r", "namespace": "ns", "uid": "run-uid"},
            "spec": {"agentRef": {"name": "a"}, "task": "t"},
            "status": {"attempt": status_attempt}
        }))
        .unwrap()
    }

    fn pod(run_label: &str, owner: &str, attempt: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "r-2", "namespace": "ns", "uid": "pod-2",
                "labels": {"herd.dev/run": run_label, "herd.dev/attempt": attempt},
                "ownerReferences": [{"apiVersion": "herd.dev/v1alpha1", "kind": "Run",
                    "name": run_label, "uid": owner, "controller": true}]}
        }))
        .unwrap()
    }

    fn refused(result: Result<u32, Failure>) -> (u16, String) {
        let failure = result.unwrap_err();
        (failure.status.as_u16(), failure.message)
    }

    #[test]
    fn the_runs_pod_of_its_latest_attempt_is_admitted() {
        let good = pod("r", "run-uid", "2");
        assert_eq!(
            authorize(&path(), &runner(), Some(&good), &run(2), 0),
            Ok(2)
        );
        assert_eq!(
            authorize(&path(), &runner(), Some(&good), &run(1), 1),
            Ok(2),
            "a newer attempt than the cache shows"
        );
    }

    #[test]
    fn another_namespace_a_missing_pod_or_another_runs_pod_is_forbidden() {
        let good = pod("r", "run-uid", "2");
        let elsewhere = Runner {
            namespace: "other".into(),
            ..runner()
        };
        assert_eq!(
            refused(authorize(&path(), &elsewhere, Some(&good), &run(2), 0)),
            (403, "the token is of namespace other, not ns".into())
        );
        assert_eq!(
            refused(authorize(&path(), &runner(), None, &run(2), 0)),
            (403, "the token's Pod r-2 (UID pod-2) does not exist".into())
        );
        let recreated = Runner {
            pod_uid: "an-older-pod".into(),
            ..runner()
        };
        assert_eq!(
            refused(authorize(&path(), &recreated, Some(&good), &run(2), 0)).0,
            403,
            "same name, another UID"
        );
        for other in [
            pod("q", "run-uid", "2"),
            pod("r", "other-run-uid", "2"),
            pod("r", "", "2"),
        ] {
            assert_eq!(
                refused(authorize(&path(), &runner(), Some(&other), &run(2), 0)),
                (403, "Pod r-2 is not Run ns/r's".into())
            );
        }
        assert_eq!(
            refused(authorize(
                &path(),
                &runner(),
                Some(&pod("r", "run-uid", "x")),
                &run(2),
                0
            )),
            (403, "Pod r-2 has no herd.dev/attempt label".into())
        );
    }

    #[test]
    fn an_older_attempt_is_a_conflict() {
        let old = pod("r", "run-uid", "1");
        assert_eq!(
            refused(authorize(&path(), &runner(), Some(&old), &run(2), 0)),
            (
                409,
                "this Pod serves attempt 1, but the Run is at attempt 2".into()
            )
        );
        assert_eq!(
            refused(authorize(&path(), &runner(), Some(&old), &run(1), 2)).0,
            409,
            "a later attempt seen by a request counts though the cache is behind"
        );
    }

    #[test]
    fn attempts_keep_the_highest_per_run() {
        let attempts = Attempts::default();
        assert_eq!(attempts.highest("u"), 0);
        attempts.saw("u", 2);
        attempts.saw("u", 1);
        attempts.saw("v", 1);
        assert_eq!((attempts.highest("u"), attempts.highest("v")), (2, 1));
    }
}
