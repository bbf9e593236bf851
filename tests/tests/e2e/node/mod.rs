//! What only a real node shows (kubelet, scheduler, containerd, cgroups): Pods that cannot start
//! and the Run's status saying why within seconds, the sandbox's memory limit and an OOM kill
//! inside it, eviction and its retry, the sandbox's clean exit and its Landlock layer. Each test
//! runs on the real node or not at all (`Lane::RealNode`).

mod endings;
mod resources;
mod start_failures;

use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::run::Run;
use herd_e2e::E2eTest;

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![
        E2eTest::shared(
            "node::a_missing_image_shows_at_once_and_fails_after_the_start_timeout",
            start_failures::a_missing_image_shows_at_once_and_fails_after_the_start_timeout,
        )
        .on_real_node(),
        E2eTest::shared(
            "node::an_unschedulable_pod_shows_the_schedulers_message",
            start_failures::an_unschedulable_pod_shows_the_schedulers_message,
        )
        .on_real_node(),
        E2eTest::shared(
            "node::a_command_out_of_memory_is_killed_inside_the_sandbox",
            resources::a_command_out_of_memory_is_killed_inside_the_sandbox,
        )
        .on_real_node(),
        E2eTest::shared(
            "node::an_evicted_pod_fails_evicted_or_retries",
            endings::an_evicted_pod_fails_evicted_or_retries,
        )
        .on_real_node(),
        E2eTest::shared(
            "node::the_sandbox_exits_0_and_its_landlock_holds",
            endings::the_sandbox_exits_0_and_its_landlock_holds,
        )
        .on_real_node(),
    ]
}

/// The Run's `Succeeded` condition as `(status, reason, message)`.
fn outcome(run: &Run) -> Option<(ConditionStatus, String, String)> {
    let status = run.status.as_ref()?;
    let condition = find_condition(&status.conditions, "Succeeded")?;
    Some((
        condition.status,
        condition.reason.clone(),
        condition.message.clone(),
    ))
}
