//! `GET config`: what the runner plans its run from. Pure: the Run's snapshot (fixed at
//! admission), its live spec (the task, the answers given so far), the Pod's attempt, the
//! Run's checkpoint and the clock (the time left counts queue time and earlier attempts, from
//! `startTime`, but not the time the Run waited for a person).
//!
//! The checkpoint (`<run>-checkpoint`, the thread at the Run's latest question) is carried
//! whenever the Run has one: only a Pod that lost an earlier attempt reads its config after a
//! question, so an attempt resumes from the latest question rather than from the task, the
//! answers given so far in `responses`. A Run that moved on after that question redoes the
//! work since; one that never asked starts from the task.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use herd_crds::run::{RunSpec, RunStatus};
use herd_crds::wire::RunConfig;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::decide::run_clocks::working_time_left;
use crate::decide::run_snapshot::Snapshot;

/// Whole seconds of working time left at `now` before the `timeout` of a Run with `status`
/// (all of it when its `startTime` is not written yet).
pub fn seconds_left(timeout: Duration, status: Option<&RunStatus>, now: &Time) -> u64 {
    status
        .map_or(timeout, |status| working_time_left(status, timeout, now))
        .as_secs()
}

/// The configuration of `attempt` of a Run with `status` (its clocks; all the time when it has
/// none yet), at `now`, resuming from `checkpoint` (its gzip) when there is one.
pub fn run_config(
    snapshot: &Snapshot,
    spec: &RunSpec,
    attempt: u32,
    status: Option<&RunStatus>,
    now: &Time,
    checkpoint: Option<&[u8]>,
) -> RunConfig {
    let seconds_left = seconds_left(snapshot.run.timeout(), status, now);
    RunConfig {
        attempt,
        agent: snapshot.agent.clone(),
        agent_name: snapshot.agent_name.clone(),
        script: snapshot.script.clone(),
        run: spec.clone(),
        depth: snapshot.depth,
        seconds_left,
        suspend_after_seconds: snapshot.run.suspend_after_seconds,
        max_model_calls: snapshot.run.max_model_calls,
        token_budget: snapshot.run.token_budget,
        checkpoint_gzip_base64: checkpoint.map(|gzip| STANDARD.encode(gzip)),
        responses: spec
            .responses
            .iter()
            .map(herd_crds::wire::Answer::from)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use herd_crds::manifest::{Manifest, parse_document};
    use k8s_openapi::api::core::v1::ConfigMap;
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::decide::run_snapshot::{SnapshotSources, snapshot};

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn started(seconds: i64) -> RunStatus {
        RunStatus {
            start_time: Some(at(seconds)),
            ..RunStatus::default()
        }
    }

    fn repository(path: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
    }

    /// The snapshot and Run spec the operator makes of a manifest file's Agent and Run (its
    /// `model.scriptFrom` read from the file's ConfigMap, as the Run controller reads it).
    fn accepted(file: &str, task: Option<&str>) -> (Snapshot, RunSpec) {
        let text = std::fs::read_to_string(repository(file)).unwrap();
        let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        let (maps, herd): (Vec<_>, Vec<_>) = documents
            .into_iter()
            .partition(|d| d["kind"] == "ConfigMap");
        let maps: Vec<ConfigMap> = maps
            .into_iter()
            .map(|d| serde_json::from_value(d).unwrap())
            .collect();
        let manifests: Vec<Manifest> = herd
            .into_iter()
            .enumerate()
            .map(|(i, d)| parse_document(i + 1, d).unwrap())
            .collect();
        let agent = manifests
            .iter()
            .find_map(|m| match m {
                Manifest::Agent(agent) => Some(agent.clone()),
                _ => None,
            })
            .unwrap();
        let agent_name = agent.metadata.name.clone().unwrap();
        let spec = manifests
            .iter()
            .find_map(|m| match m {
                Manifest::Run(run) => Some(run.spec.clone()),
                _ => None,
            })
            .unwrap_or_else(|| {
                serde_json::from_value(serde_json::json!({
                    "agentRef": {"name": agent_name}, "task": task.unwrap_or_default()
                }))
                .unwrap()
            });
        let script = agent
            .spec
            .model
            .as_ref()
            .and_then(|m| m.script_from.as_ref())
            .and_then(|from| {
                let key = &from.config_map_key_ref;
                maps.iter()
                    .find(|cm| cm.metadata.name.as_deref() == Some(key.name.as_str()))
                    .and_then(|cm| cm.data.as_ref()?.get(&key.key).cloned())
            });
        let snap = snapshot(
            &spec,
            &agent.spec,
            SnapshotSources {
                agent_name: &agent_name,
                skills: &[],
                soul: None,
                script,
                default_model: None,
                runner_image: "runner:1",
                sandbox_image: "sandbox:1",
            },
        )
        .unwrap();
        (snap, spec)
    }

    fn runner_fixture(name: &str) -> RunConfig {
        let path = repository("runner/src/runtime/fixtures").join(name);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_researcher_runs_config_is_the_one_the_runner_plans_from() {
        let (snap, spec) = accepted("examples/local/researcher.yaml", None);
        let config = run_config(&snap, &spec, 1, Some(&started(100)), &at(100), None);
        assert_eq!(config, runner_fixture("researcher.run-config.json"));
    }

    #[test]
    fn the_all_features_config_is_the_one_the_runner_plans_from() {
        let (snap, spec) = accepted(
            "examples/local/all-features.yaml",
            Some("Map the European market for heat pumps."),
        );
        let config = run_config(&snap, &spec, 1, Some(&started(100)), &at(100), None);
        assert_eq!(config, runner_fixture("all-features.run-config.json"));
    }

    #[test]
    fn time_left_counts_from_the_start_and_never_goes_below_zero() {
        let (snap, spec) = accepted("examples/local/researcher.yaml", None);
        let timeout = snap.run.timeout_seconds;
        let left = |status: Option<&RunStatus>, now: i64| {
            run_config(&snap, &spec, 2, status, &at(now), None).seconds_left
        };
        assert_eq!(
            left(Some(&started(100)), 130),
            timeout - 30,
            "queue time and attempts count"
        );
        assert_eq!(left(Some(&started(100)), 100 + timeout as i64 + 5), 0);
        assert_eq!(left(None, 130), timeout, "not started yet");
        assert_eq!(left(Some(&RunStatus::default()), 130), timeout);
        assert_eq!(
            left(Some(&started(200)), 100),
            timeout,
            "a clock behind the start"
        );
        let waited = RunStatus {
            waited_seconds: Some(20),
            waiting_since: Some(at(140)),
            ..started(100)
        };
        assert_eq!(
            left(Some(&waited), 10_000),
            timeout - 20,
            "waits for a person do not count"
        );
    }

    #[test]
    fn a_childs_config_has_its_narrowed_budget_and_its_answers() {
        let (mut snap, mut spec) = accepted("examples/local/researcher.yaml", None);
        snap.depth = 1;
        snap.run.max_model_calls = 7;
        snap.run.token_budget = Some(9000);
        spec.responses
            .push(herd_crds::run::Response::answer("q2", "yes"));
        let config = run_config(&snap, &spec, 3, Some(&started(0)), &at(1), None);
        assert_eq!(
            (
                config.attempt,
                config.depth,
                config.max_model_calls,
                config.token_budget
            ),
            (3, 1, 7, Some(9000))
        );
        assert_eq!(config.responses.len(), 2);
        assert_eq!(config.responses[1].id, "q2");
        assert_eq!(config.run.task, spec.task);
        assert_eq!(config.checkpoint_gzip_base64, None);
    }

    #[test]
    fn an_attempt_resumes_from_the_runs_checkpoint() {
        let (snap, spec) = accepted("examples/local/researcher.yaml", None);
        let gzip = [0x1f, 0x8b, 8, 0, 255];
        let config = run_config(&snap, &spec, 2, Some(&started(0)), &at(1), Some(&gzip));
        let carried = config.checkpoint_gzip_base64.unwrap();
        assert_eq!(STANDARD.decode(carried).unwrap(), gzip);
    }
}
