//! Leader election between two in-process operators sharing one Lease.

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::condition::ConditionStatus;
use herd_crds::skill::Skill;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::support::{Clients, has_condition, http_get, test_config};
use herd_e2e::wait::wait_for;

/// Two operators, one Lease: exactly one leads, both are ready; killing the leader (no
/// release, as in a crash) hands the Lease over within its duration, and the new leader
/// reconciles.
pub async fn killed_leader_hands_over(clients: Clients) -> anyhow::Result<()> {
    let first = herd_operator::start(
        test_config(&[&clients.namespace], &clients.namespace, "first")?,
        clients.operator.clone(),
    )
    .await?;
    let mut first_leader = first.leader.clone();
    tokio::time::timeout(Duration::from_secs(30), first_leader.wait_for(|l| *l))
        .await
        .context("no leader within 30s")??;
    let second = herd_operator::start(
        test_config(&[&clients.namespace], &clients.namespace, "second")?,
        clients.operator,
    )
    .await?;
    wait_for("both operators ready", Duration::from_secs(30), || async {
        Ok((first.is_ready() && second.is_ready()).then_some(()))
    })
    .await?;
    ensure!(!*second.leader.borrow(), "only one leader");
    let (status, _) = http_get(second.http_addr, "/readyz").await?;
    ensure!(status == 200, "a follower is ready too");
    let (_, metrics) = http_get(second.http_addr, "/metrics").await?;
    ensure!(metrics.contains("herd_leader 0"), "{metrics}");

    let leases: Api<Lease> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let before = leases
        .get("herd-operator-e2e")
        .await?
        .spec
        .context("no Lease spec")?;
    ensure!(before.holder_identity.as_deref() == Some("first"));
    let duration = i64::from(before.lease_duration_seconds.unwrap_or_default());

    first.abort();
    let mut second_leader = second.leader.clone();
    tokio::time::timeout(Duration::from_secs(30), second_leader.wait_for(|l| *l))
        .await
        .context("the second operator never took over")??;
    let last_renewal = leases_renew_time(&before)?;
    let after = leases
        .get("herd-operator-e2e")
        .await?
        .spec
        .context("no Lease spec")?;
    ensure!(after.holder_identity.as_deref() == Some("second"));
    let acquired = after
        .acquire_time
        .as_ref()
        .context("no acquireTime")?
        .0
        .as_second();
    // Measured on the API server's record, not the test's clock: the new holder acquired the
    // Lease within one lease duration (plus one renewal interval of slack) of the old
    // holder's last renewal.
    ensure!(
        acquired - last_renewal <= duration + 2,
        "handed over {}s after the last renewal; the lease lasts {duration}s",
        acquired - last_renewal
    );

    let skills: Api<Skill> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let skill: Skill = serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Skill",
        "metadata": {"name": "after-handover"},
        "spec": {"content": "---\nname: after-handover\ndescription: d\n---\n"},
    }))?;
    skills.create(&PostParams::default(), &skill).await?;
    wait_for(
        "the new leader reconciles",
        Duration::from_secs(60),
        || async {
            let skill = skills.get("after-handover").await?;
            let conditions = skill.status.map(|s| s.conditions).unwrap_or_default();
            Ok(has_condition(&conditions, "Ready", ConditionStatus::True, "Ready").then_some(()))
        },
    )
    .await?;
    second.shutdown().await?;
    Ok(())
}

fn leases_renew_time(spec: &k8s_openapi::api::coordination::v1::LeaseSpec) -> anyhow::Result<i64> {
    Ok(spec
        .renew_time
        .as_ref()
        .context("no renewTime")?
        .0
        .as_second())
}

/// A gracefully stopped leader releases the Lease: `run` returns `Ok`, and a second operator
/// leads without waiting for expiry.
pub async fn graceful_shutdown_releases_the_lease(clients: Clients) -> anyhow::Result<()> {
    let first = super::support::start_leader(
        test_config(&[&clients.namespace], &clients.namespace, "first")?,
        clients.operator.clone(),
    )
    .await?;
    first.shutdown().await?;
    let leases: Api<Lease> = Api::namespaced(clients.admin, &clients.namespace);
    let spec = leases
        .get("herd-operator-e2e")
        .await?
        .spec
        .context("no Lease spec")?;
    ensure!(
        spec.holder_identity.as_deref().is_none_or(str::is_empty),
        "released: {:?}",
        spec.holder_identity
    );
    let second = super::support::start_leader(
        test_config(&[&clients.namespace], &clients.namespace, "second")?,
        clients.operator,
    )
    .await?;
    second.shutdown().await?;
    Ok(())
}

/// Another holder taking the Lease (as after a network partition) makes the operator stop
/// with an error: it must not act once it may no longer lead.
pub async fn lost_lease_stops_the_operator(clients: Clients) -> anyhow::Result<()> {
    let mut running = super::support::start_leader(
        test_config(&[&clients.namespace], &clients.namespace, "victim")?,
        clients.operator,
    )
    .await?;
    let leases: Api<Lease> = Api::namespaced(clients.admin, &clients.namespace);
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now());
    let steal = json!({"spec": {"holderIdentity": "intruder", "acquireTime": now, "renewTime": now,
        "leaseDurationSeconds": 3600}});
    leases
        .patch(
            "herd-operator-e2e",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&steal),
        )
        .await?;
    let ended = tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .context("the operator kept running after losing its Lease")?;
    let error = ended.err().context("run ended without an error")?;
    ensure!(error.to_string().contains("Lease"), "{error}");
    Ok(())
}

/// A served CRD older than the operator (its `herd.dev/api-version` annotation) gets an Event
/// naming the upgrade command; the operator keeps working.
pub async fn outdated_crd_is_reported(clients: Clients) -> anyhow::Result<()> {
    use k8s_openapi::api::events::v1::Event;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ListParams, Patch, PatchParams};

    let crds: Api<CustomResourceDefinition> = Api::all(clients.admin.clone());
    let annotation = herd_crds::generate::API_VERSION_ANNOTATION;
    let set = |value: &str| json!({"metadata": {"annotations": {annotation: value}}});
    crds.patch(
        "skills.herd.dev",
        &PatchParams::default(),
        &Patch::Merge(&set("v1alpha1.0")),
    )
    .await?;
    let outcome = async {
        let running = super::support::start_leader(
            test_config(&[], &clients.namespace, "checker")?,
            clients.operator,
        )
        .await?;
        let events: Api<Event> = Api::namespaced(clients.admin.clone(), "default");
        let event = wait_for("a CRDOutdated Event", Duration::from_secs(30), || async {
            let list = events
                .list(&ListParams::default().fields("regarding.name=skills.herd.dev"))
                .await?;
            Ok(list
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("CRDOutdated")))
        })
        .await?;
        let note = event.note.unwrap_or_default();
        ensure!(
            note.contains("kubectl apply --server-side -f charts/herd/crds/"),
            "{note}"
        );
        ensure!(running.is_ready(), "the operator keeps working");
        running.shutdown().await?;
        Ok(())
    }
    .await;
    crds.patch(
        "skills.herd.dev",
        &PatchParams::default(),
        &Patch::Merge(&set(herd_crds::generate::SCHEMA_REVISION)),
    )
    .await?;
    outcome
}
