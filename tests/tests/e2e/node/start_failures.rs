//! A Run whose Pod will not start says why in its status as soon as the kubelet or the scheduler
//! does, not PodPending until its timeout: a sandbox image that does not exist
//! (`ErrImagePull`/`ImagePullBackOff`, the kubelet's message), a `nodeSelector` no node matches
//! (`Unschedulable`, the scheduler's message); after `--pod-start-timeout` the attempt fails
//! with that reason.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use herd_crds::condition::ConditionStatus;
use herd_e2e::TestEnv;
use serde_json::json;

use super::outcome;
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

/// The operator's `--pod-start-timeout` in these tests (default 5m).
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the reason may take to show: the kubelet's first pull attempt or the scheduler's
/// first pass, and the operator's reconcile.
const SHOWS_WITHIN: Duration = Duration::from_secs(30);

const SCRIPT: &str = "rules:\n  - match: {}\n    respond: {content: \"never reached\"}\n";

/// The image is not on the node and cannot be pulled (the rig refuses every pull).
pub async fn a_missing_image_shows_at_once_and_fails_after_the_start_timeout(
    env: TestEnv,
) -> anyhow::Result<()> {
    let spec = json!({"sandbox": {"image": "localhost/herd-sandbox:missing"}});
    fails_to_start(
        env,
        spec,
        &["ErrImagePull", "ImagePullBackOff"],
        "localhost/herd-sandbox:missing",
    )
    .await
}

/// No node carries the label the Agent's `sandbox.nodeSelector` asks for.
pub async fn an_unschedulable_pod_shows_the_schedulers_message(env: TestEnv) -> anyhow::Result<()> {
    let spec = json!({"sandbox": {"nodeSelector": {"herd.dev/e2e-nowhere": "true"}}});
    fails_to_start(env, spec, &["Unschedulable"], "0/1 nodes are available").await
}

async fn fails_to_start(
    env: TestEnv,
    spec: serde_json::Value,
    reasons: &[&str],
    says: &str,
) -> anyhow::Result<()> {
    let mut scenario = Scenario::start_operator(&env, |config| {
        config.runs.pod_start_timeout = START_TIMEOUT;
        Ok(())
    })
    .await?;
    scenario.create_helper(scripted_agent(spec)).await?;
    script_config_map(&scenario.admin, &scenario.namespace, SCRIPT).await?;
    let created = Instant::now();
    scenario.create_run("stuck", "Start.").await?;

    let shown = scenario
        .until(
            "stuck",
            "show why its Pod does not start",
            SHOWS_WITHIN,
            |run| {
                outcome(run).is_some_and(|(status, reason, _)| {
                    status == ConditionStatus::Unknown && reasons.contains(&reason.as_str())
                })
            },
        )
        .await?;
    let (_, reason, message) = outcome(&shown).context("no Succeeded condition")?;
    ensure!(
        message.contains(says),
        "Succeeded=Unknown {reason}: the kubelet's or scheduler's words ({says:?}): {message:?}"
    );
    let shown_after = created.elapsed();
    ensure!(
        shown_after < START_TIMEOUT,
        "the reason showed before the start timeout, after {shown_after:?}"
    );

    let ended = scenario
        .finished("stuck", START_TIMEOUT + Duration::from_secs(40))
        .await?;
    let (status, reason, message) = outcome(&ended).context("no Succeeded condition")?;
    ensure!(
        status == ConditionStatus::False && reasons.contains(&reason.as_str()),
        "after the start timeout the Run fails with the Pod's reason: {status:?} {reason}: \
         {message}"
    );
    // The Pod's creationTimestamp, which the timeout counts from, has whole seconds.
    ensure!(
        created.elapsed() + Duration::from_secs(1) >= START_TIMEOUT,
        "the Run failed only after --pod-start-timeout ({:?})",
        created.elapsed()
    );
    ensure!(message.contains(says), "{message:?}");
    Ok(())
}
