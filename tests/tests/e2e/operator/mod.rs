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

use children::Cap;
use herd_e2e::E2eTest;
use support::{Clients, Operated, Rbac, Start};

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

/// A test with its namespace's only operator started as `start` says, and shut down after the
/// test passed; one watching all namespaces runs alone.
fn operated<F, Fut>(name: &str, start: Start, test: F) -> E2eTest
where
    F: Fn(Operated) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let body = move |env| async move {
        let (operated, running) = Operated::start(&env, start).await?;
        test(operated).await?;
        Ok(running.shutdown().await?)
    };
    match start {
        Start::AllNamespaces => E2eTest::exclusive(name, body),
        Start::Only | Start::Restricted | Start::Configured(_) => E2eTest::shared(name, body),
    }
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
        operated(
            "operator::agent_waits_for_its_skill",
            Start::Only,
            agents::agent_waits_for_its_skill,
        ),
        operated(
            "operator::cluster_wide_agent_waits_for_its_skill",
            Start::AllNamespaces,
            agents::agent_waits_for_its_skill,
        ),
        operated(
            "operator::unlabelled_secret_is_not_allowed",
            Start::Only,
            agents::unlabelled_secret_is_not_allowed,
        ),
        operated(
            "operator::an_agent_applied_before_its_config_map_becomes_ready_soon",
            Start::Only,
            agents::an_agent_applied_before_its_config_map_becomes_ready_soon,
        ),
        operated(
            "operator::skill_versions_become_immutable_config_maps",
            Start::Only,
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
        operated(
            "operator::run_becomes_snapshot_policy_and_pod",
            Start::Restricted,
            runs::run_becomes_snapshot_policy_and_pod,
        ),
        namespaced(
            "operator::run_api_tls_precedes_the_pod",
            tls::run_api_tls_precedes_the_pod,
        ),
        operated(
            "operator::old_skill_version_lives_while_a_run_uses_it",
            Start::Only,
            runs::old_skill_version_lives_while_a_run_uses_it,
        ),
        operated(
            "operator::schedule_every_five_seconds",
            Start::Restricted,
            schedules::every_five_seconds,
        ),
        operated(
            "operator::schedule_forbid_and_replace",
            Start::Restricted,
            schedules::forbid_and_replace,
        ),
        namespaced(
            "operator::schedule_killed_across_a_slot",
            schedules::killed_across_a_slot,
        ),
        operated(
            "operator::schedule_bad_inputs",
            Start::Only,
            schedules::bad_inputs,
        ),
        operated(
            "operator::run_input_times_out",
            Start::Only,
            runs::run_input_times_out,
        ),
        operated(
            "operator::run_waits_for_its_agent",
            Start::Restricted,
            runs::run_waits_for_its_agent,
        ),
        operated(
            "operator::a_terminal_report_decides",
            Start::Restricted,
            runs::a_terminal_report_decides,
        ),
        operated(
            "operator::run_cancel_and_ttl",
            Start::Restricted,
            runs::cancel_and_ttl,
        ),
        operated(
            "operator::run_eviction_is_retried",
            Start::Restricted,
            runs::eviction_is_retried,
        ),
        operated(
            "operator::run_timeout_while_the_pod_runs",
            Start::Restricted,
            runs::timeout_while_the_pod_runs,
        ),
        operated(
            "operator::run_refused_pod_is_invalid_spec",
            Start::Restricted,
            runs::refused_pod_is_invalid_spec,
        ),
        operated(
            "operator::run_waits_for_its_skill_version",
            Start::Only,
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
        operated(
            "operator::namespace_deleted_while_a_run_is_active",
            Start::AllNamespaces,
            runs::namespace_deleted_while_a_run_is_active,
        ),
        operated(
            "operator::namespace_cap_queues_top_level_runs",
            Start::Configured(admission::one_active_run_per_namespace),
            admission::namespace_cap_queues_top_level_runs,
        ),
        operated(
            "operator::runs_to_pods_cost_a_bounded_number_of_requests",
            Start::Configured(api_requests::no_caps),
            api_requests::runs_to_pods_cost_a_bounded_number_of_requests,
        ),
        operated(
            "operator::suspended_runs_hold_no_slot",
            Start::Configured(suspended::capped),
            suspended::suspended_runs_hold_no_slot,
        ),
        namespaced("operator::children_under_max_concurrent", |clients| {
            children::children_under_max_concurrent(clients, 0)
        }),
        namespaced(
            "operator::children_under_max_concurrent_across_operator_restarts",
            |clients| children::children_under_max_concurrent(clients, 3),
        ),
        operated(
            "operator::namespace_cap_with_nested_runs",
            Start::Configured(|config| Cap::Namespace.set(config)),
            |op| children::caps_with_nested_runs(op, Cap::Namespace),
        ),
        operated(
            "operator::operator_cap_with_nested_runs",
            Start::Configured(|config| Cap::Operator.set(config)),
            |op| children::caps_with_nested_runs(op, Cap::Operator),
        ),
        operated(
            "operator::children_never_exceed_their_parent",
            Start::Only,
            children::children_never_exceed_their_parent,
        ),
        operated(
            "operator::a_child_shares_a_read_write_many_workspace",
            Start::Only,
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
