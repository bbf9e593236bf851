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

use herd_e2e::{E2eTest, TestEnv};
use support::{Rbac, operator_client};

async fn clients(
    env: &TestEnv,
    rbac: Rbac,
) -> anyhow::Result<(kube::Client, kube::Client, String)> {
    let admin = env.client();
    let namespace = env.namespace().to_owned();
    let operator = operator_client(&admin, env.cluster().kubeconfig(), &namespace, rbac).await?;
    Ok((operator, admin, namespace))
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
        E2eTest::shared("operator::agent_waits_for_its_skill", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            agents::agent_waits_for_its_skill(operator, admin, ns, false).await
        }),
        E2eTest::exclusive(
            "operator::cluster_wide_agent_waits_for_its_skill",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::ClusterWide).await?;
                agents::agent_waits_for_its_skill(operator, admin, ns, true).await
            },
        ),
        E2eTest::shared(
            "operator::unlabelled_secret_is_not_allowed",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                agents::unlabelled_secret_is_not_allowed(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            "operator::an_agent_applied_before_its_config_map_becomes_ready_soon",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                agents::an_agent_applied_before_its_config_map_becomes_ready_soon(
                    operator, admin, ns,
                )
                .await
            },
        ),
        E2eTest::shared(
            "operator::skill_versions_become_immutable_config_maps",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                agents::skill_versions_become_immutable_config_maps(operator, admin, ns).await
            },
        ),
        E2eTest::shared("operator::killed_leader_hands_over", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            leader::killed_leader_hands_over(operator, admin, ns).await
        }),
        E2eTest::shared(
            "operator::graceful_shutdown_releases_the_lease",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                leader::graceful_shutdown_releases_the_lease(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            "operator::lost_lease_stops_the_operator",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                leader::lost_lease_stops_the_operator(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            "operator::run_becomes_snapshot_policy_and_pod",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                runs::run_becomes_snapshot_policy_and_pod(operator, admin, ns).await
            },
        ),
        E2eTest::shared("operator::run_api_tls_precedes_the_pod", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            tls::run_api_tls_precedes_the_pod(operator, admin, ns).await
        }),
        E2eTest::shared(
            "operator::old_skill_version_lives_while_a_run_uses_it",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                runs::old_skill_version_lives_while_a_run_uses_it(operator, admin, ns).await
            },
        ),
        E2eTest::shared("operator::schedule_every_five_seconds", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            schedules::every_five_seconds(operator, admin, ns).await
        }),
        E2eTest::shared("operator::schedule_forbid_and_replace", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            schedules::forbid_and_replace(operator, admin, ns).await
        }),
        E2eTest::shared(
            "operator::schedule_killed_across_a_slot",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                schedules::killed_across_a_slot(operator, admin, ns).await
            },
        ),
        E2eTest::shared("operator::schedule_bad_inputs", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            schedules::bad_inputs(operator, admin, ns).await
        }),
        E2eTest::shared("operator::run_input_times_out", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            runs::run_input_times_out(operator, admin, ns).await
        }),
        E2eTest::shared("operator::run_waits_for_its_agent", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            runs::run_waits_for_its_agent(operator, admin, ns).await
        }),
        E2eTest::shared("operator::a_terminal_report_decides", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            runs::a_terminal_report_decides(operator, admin, ns).await
        }),
        E2eTest::shared("operator::run_cancel_and_ttl", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            runs::cancel_and_ttl(operator, admin, ns).await
        }),
        E2eTest::shared("operator::run_eviction_is_retried", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            let kubeconfig = env.cluster().kubeconfig().to_owned();
            runs::eviction_is_retried(operator, admin, ns, kubeconfig).await
        }),
        E2eTest::shared(
            "operator::run_timeout_while_the_pod_runs",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                runs::timeout_while_the_pod_runs(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            "operator::run_refused_pod_is_invalid_spec",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                runs::refused_pod_is_invalid_spec(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            "operator::run_waits_for_its_skill_version",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                runs::run_waits_for_its_skill_version(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            "operator::tls_is_renewed_and_copied_without_a_pod",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                tls::tls_is_renewed_and_copied_without_a_pod(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            "operator::external_tls_is_read_never_written",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                tls::external_tls_is_read_never_written(operator, admin, ns).await
            },
        ),
        E2eTest::exclusive(
            "operator::namespace_deleted_while_a_run_is_active",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::ClusterWide).await?;
                runs::namespace_deleted_while_a_run_is_active(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            "operator::namespace_cap_queues_top_level_runs",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                admission::namespace_cap_queues_top_level_runs(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            "operator::runs_to_pods_cost_a_bounded_number_of_requests",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                api_requests::runs_to_pods_cost_a_bounded_number_of_requests(operator, admin, ns)
                    .await
            },
        ),
        E2eTest::shared("operator::suspended_runs_hold_no_slot", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
            suspended::suspended_runs_hold_no_slot(operator, admin, ns).await
        }),
        E2eTest::shared(
            "operator::children_under_max_concurrent",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                children::children_under_max_concurrent(operator, admin, ns, 0).await
            },
        ),
        E2eTest::shared(
            "operator::children_under_max_concurrent_across_operator_restarts",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                children::children_under_max_concurrent(operator, admin, ns, 3).await
            },
        ),
        E2eTest::shared(
            "operator::namespace_cap_with_nested_runs",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                children::caps_with_nested_runs(operator, admin, ns, children::Cap::Namespace).await
            },
        ),
        E2eTest::shared(
            "operator::operator_cap_with_nested_runs",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                children::caps_with_nested_runs(operator, admin, ns, children::Cap::Operator).await
            },
        ),
        E2eTest::shared(
            "operator::children_never_exceed_their_parent",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                children::children_never_exceed_their_parent(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            "operator::a_child_shares_a_read_write_many_workspace",
            |env| async move {
                let (operator, admin, ns) = clients(&env, Rbac::Namespaced).await?;
                children::a_child_shares_a_read_write_many_workspace(operator, admin, ns).await
            },
        ),
        E2eTest::shared(
            prometheus::TEST,
            prometheus::prometheus_evaluates_the_charts_alerts_and_dashboard,
        ),
        E2eTest::shared(
            secure_metrics::TEST,
            secure_metrics::secure_metrics_need_an_allowed_token,
        ),
        E2eTest::exclusive("operator::outdated_crd_is_reported", |env| async move {
            let (operator, admin, ns) = clients(&env, Rbac::ClusterWide).await?;
            leader::outdated_crd_is_reported(operator, admin, ns).await
        }),
    ]
}
