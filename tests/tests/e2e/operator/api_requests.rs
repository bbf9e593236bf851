//! What the operator asks of the API server per Run, counted by its own client
//! (`herd_kube_requests_total{verb,resource,code}`): the deterministic part of its speed. 100
//! Runs of a ready Agent go from `kubectl create` to their Pod; the writes and live reads each
//! costs are printed by kind and held under a ceiling. Timings stay in the bench
//! (`cargo bench -p herd-e2e --bench operator_scale`).

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_e2e::operator_requests::{WRITE_VERBS, per_unit, request_counts, table, total};
use herd_e2e::wait::wait_for;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::run_fixtures::{create_agent, create_run};
use super::support::{Operated, http_get};
use herd_operator::Config;

/// Runs measured.
const RUNS: usize = 100;
/// Writes per Run, from its creation to its Pod, with no cap holding it: a snapshot ConfigMap,
/// the Pod and its status (3); a reconcile from a cache that does not show a just-created
/// object yet retries its creation (a 409), rarely.
const MAX_WRITES_PER_RUN: f64 = 3.1;
/// Live reads (`get`) per Run where no cache answers: only after such a 409.
const MAX_READS_PER_RUN: f64 = 0.1;
/// Writes made once per Run, whatever the caches' timing (a 409 retry aside).
const ONCE: [(&str, &str); 3] = [
    ("create", "configmaps"),
    ("create", "pods"),
    ("patch", "runs.herd.dev/status"),
];
/// Writes a Run never costs on its way to a Pod: an Event (routine progress has none), and a
/// NetworkPolicy (the warm-up Run's made the namespace's default-deny and the egress set all
/// these Runs share).
const NEVER: [(&str, &str); 2] = [
    ("create", "events.events.k8s.io"),
    ("create", "networkpolicies.networking.k8s.io"),
];
/// The share of Runs whose creation of a kind may be retried after a 409.
const RETRIED: f64 = 0.05;

/// No admission cap: a Run a cap holds costs a `Queued` status write more, by design.
pub fn no_caps(config: &mut Config) {
    config.admission.max_active_per_namespace = 0;
    config.admission.max_active = 0;
}

/// 100 Runs to their Pods (the operator under [`no_caps`]): at most [`MAX_WRITES_PER_RUN`] writes and [`MAX_READS_PER_RUN`]
/// live reads each, one snapshot, Pod and status write each, no NetworkPolicy and no Event,
/// printed by verb and resource.
pub async fn runs_to_pods_cost_a_bounded_number_of_requests(op: Operated) -> anyhow::Result<()> {
    create_agent(&op.admin, &op.namespace).await?;
    let pods: Api<Pod> = op.api();
    let pod_count = |want: usize| {
        let pods = pods.clone();
        async move {
            let listed = pods.list(&ListParams::default()).await?.items.len();
            Ok((listed >= want).then_some(()))
        }
    };
    // One Run first: the per-namespace objects, made once, are not counted.
    create_run(&op.admin, &op.namespace, "warm-up").await?;
    wait_for("the warm-up Run's Pod", Duration::from_secs(60), || {
        pod_count(1)
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, text) = http_get(op.http_addr, "/metrics").await?;
    let before = request_counts(&text);
    for i in 0..RUNS {
        create_run(&op.admin, &op.namespace, &format!("r{i:03}")).await?;
    }
    wait_for("a Pod for every Run", Duration::from_secs(180), || {
        pod_count(RUNS + 1)
    })
    .await?;
    // Let the reconciles the Pods' creation caused end.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, text) = http_get(op.http_addr, "/metrics").await?;
    let after = request_counts(&text);

    let per_run = per_unit(&before, &after, RUNS);
    let table = table(&per_run);
    let writes = total(&per_run, &WRITE_VERBS);
    let reads = total(&per_run, &["get"]);
    println!(
        "API requests per Run, from creation to Pod ({RUNS} Runs):\n{table}writes {writes:.2}, live reads {reads:.2}"
    );
    ensure!(
        writes <= MAX_WRITES_PER_RUN,
        "{writes:.2} writes per Run, more than {MAX_WRITES_PER_RUN}:\n{table}"
    );
    ensure!(
        reads <= MAX_READS_PER_RUN,
        "{reads:.2} live reads per Run, more than {MAX_READS_PER_RUN}:\n{table}"
    );
    let count_of = |verb: &str, resource: &str| {
        per_run
            .get(&(verb.to_owned(), resource.to_owned()))
            .copied()
    };
    for (verb, resource) in NEVER {
        ensure!(
            count_of(verb, resource).is_none(),
            "a {verb} of {resource} on the way to a Pod:\n{table}"
        );
    }
    for (verb, resource) in ONCE {
        let count = count_of(verb, resource)
            .with_context(|| format!("no {verb} of {resource}:\n{table}"))?;
        ensure!(
            (1.0..=1.0 + RETRIED).contains(&count),
            "{count:.2} {verb} of {resource} per Run, not 1:\n{table}"
        );
    }
    Ok(())
}
