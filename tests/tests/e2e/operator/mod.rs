//! The operator: Agent, Skill and Run controllers and leader election, each test with its
//! own in-process operator running as a ServiceAccount under exactly the chart's RBAC, scoped
//! to the test's namespace with its own Lease (the cluster-wide variant runs alone).

mod admission;
mod agents;
mod api_requests;
mod children;
mod leader;
mod prometheus;
mod rights;
pub(crate) mod run_fixtures;
mod runs;
mod schedules;
mod secure_metrics;
pub(crate) mod support;
mod suspended;
mod tls;

use std::future::Future;

use herd_e2e::E2eTest;
use support::{Clients, Rbac};

/// A test that shares the server, its operator bound by the namespaced RBAC.
fn namespaced<F, Fut>(name: &str, test: F) -> E2eTest
where
    F: Fn(Clients) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    E2eTest::shared(name, move |env| async move {
        test(Clients::new(&env, Rbac::Namespaced).await?).await
    })
}

/// A test that runs alone, its operator watching all namespaces under the cluster-wide RBAC.
fn cluster_wide<F, Fut>(name: &str, test: F) -> E2eTest
where
    F: Fn(Clients) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    E2eTest::exclusive(name, move |env| async move {
        test(Clients::new(&env, Rbac::ClusterWide).await?).await
    })
}

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![
        E2eTest::shared(
            "operator::cluster_wide_rights_match_the_table",
            |env| async move { rights::rights_match_the_table(env, Rbac::ClusterWide).await },
        ),
        E2eTest::shared(
            "operator::namespaced_rights_match_the_table",
            |env| async move { rights::rights_match_the_table(env, Rbac::Namespaced).await },
        ),
        namespaced("operator::agent_waits_for_its_skill", |clients| {
            agents::agent_waits_for_its_skill(clients, false)
        }),
        cluster_wide(
            "operator::cluster_wide_agent_waits_for_its_skill",
            |clients| agents::agent_waits_for_its_skill(clients, true),
        ),
        namespaced(
            "operator::unlabelled_secret_is_not_allowed",
            agents::unlabelled_secret_is_not_allowed,
        ),
        namespaced(
            "operator::an_agent_applied_before_its_config_map_becomes_ready_soon",
            agents::an_agent_applied_before_its_config_map_becomes_ready_soon,
        ),
        namespaced(
            "operator::skill_versions_become_immutable_config_maps",
            agents::skill_versions_become_immutable_config_maps,
        ),
        namespaced(
            "operator::killed_leader_hands_over",
            leader::killed_leader_hands_over,
        ),
        namespaced(
            "operator::graceful_shutdown_releases_the_lease",
            leader::graceful_shutdown_releases_the_lease,
        ),
        namespaced(
            "operator::lost_lease_stops_the_operator",
            leader::lost_lease_stops_the_operator,
        ),
        namespaced(
            "operator::run_becomes_snapshot_policy_and_pod",
            runs::run_becomes_snapshot_policy_and_pod,
        ),
        namespaced(
            "operator::run_api_tls_precedes_the_pod",
            tls::run_api_tls_precedes_the_pod,
        ),
        namespaced(
            "operator::old_skill_version_lives_while_a_run_uses_it",
            runs::old_skill_version_lives_while_a_run_uses_it,
        ),
        namespaced(
            "operator::schedule_every_five_seconds",
            schedules::every_five_seconds,
        ),
        namespaced(
            "operator::schedule_forbid_and_replace",
            schedules::forbid_and_replace,
        ),
        namespaced(
            "operator::schedule_killed_across_a_slot",
            schedules::killed_across_a_slot,
        ),
        namespaced("operator::schedule_bad_inputs", schedules::bad_inputs),
        namespaced("operator::run_input_times_out", runs::run_input_times_out),
        namespaced(
            "operator::run_waits_for_its_agent",
            runs::run_waits_for_its_agent,
        ),
        namespaced(
            "operator::a_terminal_report_decides",
            runs::a_terminal_report_decides,
        ),
        namespaced("operator::run_cancel_and_ttl", runs::cancel_and_ttl),
        E2eTest::shared("operator::run_eviction_is_retried", |env| async move {
            let clients = Clients::new(&env, Rbac::Namespaced).await?;
            runs::eviction_is_retried(clients, env.cluster().kubeconfig().to_owned()).await
        }),
        namespaced(
            "operator::run_timeout_while_the_pod_runs",
            runs::timeout_while_the_pod_runs,
        ),
        namespaced(
            "operator::run_refused_pod_is_invalid_spec",
            runs::refused_pod_is_invalid_spec,
        ),
        namespaced(
            "operator::run_waits_for_its_skill_version",
            runs::run_waits_for_its_skill_version,
        ),
        namespaced(
            "operator::tls_is_renewed_and_copied_without_a_pod",
            tls::tls_is_renewed_and_copied_without_a_pod,
        ),
        namespaced(
            "operator::external_tls_is_read_never_written",
            tls::external_tls_is_read_never_written,
        ),
        cluster_wide(
            "operator::namespace_deleted_while_a_run_is_active",
            runs::namespace_deleted_while_a_run_is_active,
        ),
        namespaced(
            "operator::namespace_cap_queues_top_level_runs",
            admission::namespace_cap_queues_top_level_runs,
        ),
        namespaced(
            "operator::runs_to_pods_cost_a_bounded_number_of_requests",
            api_requests::runs_to_pods_cost_a_bounded_number_of_requests,
        ),
        namespaced(
            "operator::suspended_runs_hold_no_slot",
            suspended::suspended_runs_hold_no_slot,
        ),
        namespaced("operator::children_under_max_concurrent", |clients| {
            children::children_under_max_concurrent(clients, 0)
        }),
        namespaced(
            "operator::children_under_max_concurrent_across_operator_restarts",
            |clients| children::children_under_max_concurrent(clients, 3),
        ),
        namespaced("operator::namespace_cap_with_nested_runs", |clients| {
            children::caps_with_nested_runs(clients, children::Cap::Namespace)
        }),
        namespaced("operator::operator_cap_with_nested_runs", |clients| {
            children::caps_with_nested_runs(clients, children::Cap::Operator)
        }),
        namespaced(
            "operator::children_never_exceed_their_parent",
            children::children_never_exceed_their_parent,
        ),
        namespaced(
            "operator::a_child_shares_a_read_write_many_workspace",
            children::a_child_shares_a_read_write_many_workspace,
        ),
        E2eTest::shared(
            prometheus::TEST,
            prometheus::prometheus_evaluates_the_charts_alerts_and_dashboard,
        ),
        E2eTest::shared(
            secure_metrics::TEST,
            secure_metrics::secure_metrics_need_an_allowed_token,
        ),
        cluster_wide(
            "operator::outdated_crd_is_reported",
            leader::outdated_crd_is_reported,
        ),
    ]
}
