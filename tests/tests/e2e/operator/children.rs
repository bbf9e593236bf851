//! Child Runs on the real API server, created through `create_child` as the run API will: the
//! parent's `maxConcurrent` holds under a kubelet player and across operator crashes, parents at
//! the namespace or operator cap still get their children (no deadlock), and a child never gets
//! more budget, time or tools than its parent.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use futures::StreamExt;
use herd_crds::condition::ConditionStatus;
use herd_crds::run::{Run, RunPhase};
use herd_crds::wire::ChildRequest;
use herd_operator::Running;
use herd_operator::controller::create_child::{Child, ChildError, create_child};
use herd_operator::decide::child_run::Refusal;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::run_fixtures::{
    WAIT, complete, create_agent_spec, create_run, message, reaches, run_until, start_agent,
    succeeded,
};
use super::support::{Clients, Operated, start_leader, test_config};
use herd_e2e::wait::wait_for;
use herd_operator::Config;

/// A ready Agent `helper` that delegates with these `subagents`, `runDefaults` and tool groups.
async fn create_delegating_agent(
    admin: &Client,
    namespace: &str,
    subagents: Value,
    run_defaults: Value,
    tool_groups: Option<Value>,
) -> anyhow::Result<()> {
    let mut spec = json!({"subagents": subagents, "runDefaults": run_defaults});
    if let Some(groups) = tool_groups {
        spec["toolGroups"] = groups;
    }
    create_agent_spec(admin, namespace, spec).await
}

/// A top-level Run whose agent container runs.
async fn running_parent(admin: &Client, namespace: &str, name: &str) -> anyhow::Result<Run> {
    create_run(admin, namespace, name).await?;
    let runs: Api<Run> = Api::namespaced(admin.clone(), namespace);
    run_until(&runs, name, "the parent's Pod", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
    })
    .await?;
    start_agent(admin, namespace, &format!("{name}-1")).await?;
    run_until(&runs, name, "the parent Running", |r| {
        succeeded(r, ConditionStatus::Unknown, "Running")
    })
    .await
}

fn ask(call: &str, kind: &str) -> ChildRequest {
    ChildRequest {
        attempt: 1,
        tool_call_id: call.to_owned(),
        description: format!("task {call}"),
        prompt: format!("Do part {call}."),
        subagent_type: kind.to_owned(),
        model_calls_left: None,
        tokens_left: None,
        seconds_left: None,
    }
}

/// What a Pod watch saw of some Runs' Pods.
#[derive(Default)]
struct Seen {
    /// Pods by name: uid, and whether Succeeded or Failed.
    pods: BTreeMap<String, (String, bool)>,
    /// Every uid each Pod name had.
    uids: BTreeMap<String, BTreeSet<String>>,
    /// The most Pods not yet Succeeded or Failed at once, counted at every event.
    max_going: usize,
}

/// Watches the namespace's Pods of the Runs `watched` names, from before they exist.
fn watch_pods(
    admin: &Client,
    namespace: &str,
    watched: impl Fn(&str) -> bool + Send + 'static,
) -> (Arc<Mutex<Seen>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let record = seen.clone();
    let task = tokio::spawn(async move {
        let mut events = watcher(pods, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            let Ok(event) = event else { continue };
            let (pod, gone) = match event {
                watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => (pod, false),
                watcher::Event::Delete(pod) => (pod, true),
                watcher::Event::Init | watcher::Event::InitDone => continue,
            };
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            if !labels.get("herd.dev/run").is_some_and(|run| watched(run)) {
                continue;
            }
            let name = pod.metadata.name.clone().unwrap_or_default();
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
            let ended = matches!(phase.as_deref(), Some("Succeeded" | "Failed"));
            let Ok(mut seen) = record.lock() else { return };
            seen.uids
                .entry(name.clone())
                .or_default()
                .insert(uid.clone());
            if gone {
                seen.pods.remove(&name);
            } else {
                seen.pods.insert(name, (uid, ended));
            }
            let going = seen.pods.values().filter(|(_, ended)| !ended).count();
            seen.max_going = seen.max_going.max(going);
        }
    });
    (seen, task)
}

/// The names of the Runs whose agent container has not been ended by the player, among
/// `children`, that have a Pod.
async fn with_going_pods(
    pods: &Api<Pod>,
    children: &BTreeSet<String>,
) -> anyhow::Result<Vec<String>> {
    let list = pods.list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|pod| {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter_map(|pod| pod.metadata.labels?.get("herd.dev/run").cloned())
        .filter(|run| children.contains(run))
        .collect())
}

/// 30 children of one parent with `maxConcurrent: 2`, `maxTotal: 30`: at no Pod event are more
/// than 2 of their Pods going, exactly 2 at times, and all 30 finish as the player completes
/// them, `restarts` times killing the operator (no Lease release) and starting a new one midway;
/// no Run ever has a second Pod of an attempt, and the parent's status lists all 30.
pub async fn children_under_max_concurrent(
    clients: Clients,
    restarts: usize,
) -> anyhow::Result<()> {
    const CHILDREN: usize = 30;
    let config = test_config(&[&clients.namespace], &clients.namespace, "only")?;
    let mut running: Running = start_leader(config.clone(), clients.operator.clone()).await?;
    create_delegating_agent(
        &clients.admin,
        &clients.namespace,
        json!({"enabled": true, "maxConcurrent": 2, "maxTotal": 30, "maxDepth": 1}),
        json!({}),
        None,
    )
    .await?;
    let parent = running_parent(&clients.admin, &clients.namespace, "parent").await?;
    let (seen, watch) = watch_pods(&clients.admin, &clients.namespace, |run| run != "parent");
    let mut children = BTreeSet::new();
    for i in 0..CHILDREN {
        let name = create_child(
            &clients.operator,
            &parent,
            &ask(&format!("call_{i}"), "bash"),
            None,
        )
        .await
        .with_context(|| format!("child {i}"))?
        .name;
        children.insert(name);
    }
    ensure!(children.len() == CHILDREN, "30 distinct children");

    let pods: Api<Pod> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let runs: Api<Run> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let mut completed = BTreeSet::new();
    let mut restarted = 0;
    let deadline = Instant::now() + Duration::from_secs(180);
    while completed.len() < CHILDREN {
        ensure!(
            Instant::now() < deadline,
            "only {} of {CHILDREN} children completed",
            completed.len()
        );
        if restarted < restarts && completed.len() >= (restarted + 1) * CHILDREN / (restarts + 1) {
            running.abort();
            running = start_leader(config.clone(), clients.operator.clone()).await?;
            restarted += 1;
        }
        let going = with_going_pods(&pods, &children).await?;
        // Complete one at a time once both slots are taken (or the last ones), so the cap is
        // reached and tested.
        let remaining = CHILDREN - completed.len();
        if going.len() < 2.min(remaining) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        if let Some(run) = going.into_iter().find(|r| !completed.contains(r)) {
            complete(&clients.admin, &clients.namespace, &run, "done").await?;
            completed.insert(run);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_for("all children Succeeded", WAIT, || async {
        let list = runs.list(&ListParams::default()).await?;
        let done = list
            .items
            .iter()
            .filter(|r| children.contains(r.metadata.name.as_deref().unwrap_or_default()))
            .filter(|r| succeeded(r, ConditionStatus::True, "Succeeded"))
            .count();
        Ok((done == CHILDREN).then_some(()))
    })
    .await?;
    let parent = wait_for("the parent's childCounts", WAIT, || async {
        let parent = runs.get("parent").await?;
        let counts = parent.status.as_ref().and_then(|s| s.child_counts);
        Ok(counts
            .is_some_and(|c| usize::try_from(c.succeeded).ok() == Some(CHILDREN))
            .then_some(parent))
    })
    .await?;
    let listed = parent.status.context("no status")?.children;
    ensure!(
        listed.iter().all(|c| c.state == RunPhase::Succeeded),
        "{listed:?}"
    );
    let listed: BTreeSet<String> = listed.into_iter().map(|c| c.name).collect();
    ensure!(listed == children, "status.children lists every child");
    tokio::time::sleep(Duration::from_millis(500)).await;
    watch.abort();
    let (max_going, uids) = {
        let seen = seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        (seen.max_going, seen.uids.clone())
    };
    ensure!(
        max_going == 2,
        "at most and at times exactly 2 children's Pods going; saw {max_going}"
    );
    for (pod, uids) in &uids {
        ensure!(uids.len() == 1, "{pod} was created {} times", uids.len());
        ensure!(pod.ends_with("-1"), "{pod}: no attempt beyond the first");
    }
    ensure!(uids.len() == CHILDREN, "one Pod per child");
    ensure!(restarted == restarts);
    running.shutdown().await?;
    Ok(())
}

/// Which top-level cap a test fills.
#[derive(Clone, Copy, Debug)]
pub enum Cap {
    /// `--max-active-per-namespace=1`.
    Namespace,
    /// `--max-active=1`.
    Operator,
}

impl Cap {
    /// Sets this cap to 1 and lifts the other.
    pub fn set(self, config: &mut Config) {
        let (per_namespace, total) = match self {
            Cap::Namespace => (1, 0),
            Cap::Operator => (0, 1),
        };
        config.admission.max_active_per_namespace = per_namespace;
        config.admission.max_active = total;
    }

    /// The message of a Run waiting while this cap is full.
    fn full(self) -> &'static str {
        match self {
            Cap::Namespace => "namespace at 1/1",
            Cap::Operator => "operator at 1/1",
        }
    }
}

/// With the namespace (or operator-wide) cap full of one parent, another top-level Run waits,
/// but the parent's children and a grandchild start under the parent's `maxConcurrent` alone,
/// and everything ends: no deadlock. The waiting Run starts once the parent has ended. The
/// operator runs with `cap` [`Cap::set`].
pub async fn caps_with_nested_runs(op: Operated, cap: Cap) -> anyhow::Result<()> {
    let full = cap.full();
    create_delegating_agent(
        &op.admin,
        &op.namespace,
        json!({"enabled": true, "maxConcurrent": 2, "maxTotal": 5, "maxDepth": 2}),
        json!({}),
        None,
    )
    .await?;
    let runs: Api<Run> = op.api();
    let parent = running_parent(&op.admin, &op.namespace, "p1").await?;
    create_run(&op.admin, &op.namespace, "p2").await?;
    run_until(&runs, "p2", full, |r| {
        succeeded(r, ConditionStatus::Unknown, "Queued") && message(r) == full
    })
    .await?;
    let mut kids = Vec::new();
    for call in ["a", "b", "c"] {
        kids.push(
            create_child(&op.operator, &parent, &ask(call, "general-purpose"), None)
                .await?
                .name,
        );
    }
    for kid in &kids[..2] {
        run_until(&runs, kid, "a child starts past the full cap", |r| {
            succeeded(r, ConditionStatus::Unknown, "PodPending")
        })
        .await?;
    }
    run_until(
        &runs,
        &kids[2],
        "the third child waits for its parent",
        |r| succeeded(r, ConditionStatus::Unknown, "Queued") && message(r) == "parent at 2/2",
    )
    .await?;
    start_agent(&op.admin, &op.namespace, &format!("{}-1", kids[0])).await?;
    let child = run_until(&runs, &kids[0], "the first child Running", |r| {
        succeeded(r, ConditionStatus::Unknown, "Running")
    })
    .await?;
    let grandchild = create_child(&op.operator, &child, &ask("g", "bash"), None)
        .await?
        .name;
    run_until(&runs, &grandchild, "a grandchild starts too", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
    })
    .await?;
    for run in [&grandchild, &kids[0], &kids[1]] {
        complete(&op.admin, &op.namespace, run, "done").await?;
        reaches(&runs, run, ConditionStatus::True, "Succeeded").await?;
    }
    run_until(&runs, &kids[2], "the third child once a slot freed", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
    })
    .await?;
    complete(&op.admin, &op.namespace, &kids[2], "done").await?;
    run_until(&runs, "p1", "the parent counts its 3 children done", |r| {
        r.status
            .as_ref()
            .and_then(|s| s.child_counts)
            .is_some_and(|c| c.succeeded == 3 && c.active == 0 && c.queued == 0)
    })
    .await?;
    complete(&op.admin, &op.namespace, "p1", "done").await?;
    run_until(&runs, "p1", "the parent Succeeded", |r| {
        succeeded(r, ConditionStatus::True, "Succeeded")
    })
    .await?;
    run_until(&runs, "p2", "the waiting Run starts", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
    })
    .await?;
    Ok(())
}

/// The snapshot JSON of a Run.
async fn snapshot_of(admin: &Client, namespace: &str, run: &str) -> anyhow::Result<Value> {
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), namespace);
    let name = format!("{run}-snapshot");
    let cm = wait_for("the child's snapshot", WAIT, || async {
        Ok(cms.get_opt(&name).await?)
    })
    .await?;
    let text = cm
        .data
        .and_then(|d| d.get("snapshot.json").cloned())
        .context("no snapshot.json")?;
    Ok(serde_json::from_str(&text)?)
}

/// A request claiming more model calls, tokens or seconds than the parent's snapshot gets the
/// parent's; a smaller claim is kept; a child at `maxDepth` has no `task` tool and cannot
/// delegate; a child never gets a tool group its parent lacks; `maxTotal` holds and a repeated
/// request is the same child. A finished child outlives its TTL while its parent lives; the
/// parent's end cancels the unfinished child, and its deletion takes both along.
pub async fn children_never_exceed_their_parent(op: Operated) -> anyhow::Result<()> {
    create_delegating_agent(
        &op.admin,
        &op.namespace,
        json!({"enabled": true, "maxConcurrent": 1, "maxTotal": 2, "maxDepth": 1}),
        json!({"maxModelCalls": 10, "tokenBudget": 1000, "timeout": "10m",
               "ttlSecondsAfterFinished": 2}),
        Some(json!(["file:read", "bash"])),
    )
    .await?;
    let parent = running_parent(&op.admin, &op.namespace, "lead").await?;
    let mut greedy = ask("call_1", "general-purpose");
    greedy.model_calls_left = Some(99);
    greedy.tokens_left = Some(5000);
    greedy.seconds_left = Some(99_999);
    let first = create_child(&op.operator, &parent, &greedy, None)
        .await?
        .name;
    let mut modest = ask("call_2", "bash");
    modest.model_calls_left = Some(3);
    modest.tokens_left = Some(200);
    modest.seconds_left = Some(30);
    let second = create_child(&op.operator, &parent, &modest, None)
        .await?
        .name;

    let snap = snapshot_of(&op.admin, &op.namespace, &first).await?;
    ensure!(snap["run"]["maxModelCalls"] == 10, "{}", snap["run"]);
    ensure!(snap["run"]["tokenBudget"] == 1000, "{}", snap["run"]);
    let seconds = snap["run"]["timeoutSeconds"]
        .as_u64()
        .context("timeoutSeconds")?;
    ensure!(
        (1..=600).contains(&seconds),
        "no more than the parent's time: {seconds}"
    );
    ensure!(snap["depth"] == 1);
    ensure!(
        snap["agent"]["subagents"]["enabled"] == false,
        "at maxDepth: no task tool"
    );
    ensure!(snap["agent"]["toolGroups"] == json!(["file:read", "bash"]));
    let snap = snapshot_of(&op.admin, &op.namespace, &second).await?;
    ensure!(
        snap["run"]["maxModelCalls"] == 3
            && snap["run"]["tokenBudget"] == 200
            && snap["run"]["timeoutSeconds"] == 30,
        "{}",
        snap["run"]
    );
    ensure!(
        snap["agent"]["toolGroups"] == json!(["file:read", "bash"]),
        "a bash child gets no file:write its parent lacks: {}",
        snap["agent"]["toolGroups"]
    );

    let runs: Api<Run> = op.api();
    let child = runs.get(&first).await?;
    let owner = child
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .context("no owner")?;
    ensure!(
        owner.uid == parent.metadata.uid.clone().unwrap_or_default()
            && owner.controller == Some(true)
    );
    ensure!(
        child
            .spec
            .parent_ref
            .as_ref()
            .map(|p| p.tool_call_id.as_str())
            == Some("call_1")
            && child.spec.subagent_type.as_deref() == Some("general-purpose")
    );
    ensure!(
        create_child(&op.operator, &parent, &greedy, None).await?
            == Child {
                name: first.clone(),
                created: false
            },
        "the same request is the same child"
    );
    match create_child(&op.operator, &parent, &ask("call_3", "bash"), None).await {
        Err(ChildError::Refused(Refusal::TotalReached { max_total: 2 })) => {}
        other => bail!("a third child past maxTotal 2: {other:?}"),
    }
    match create_child(&op.operator, &child, &ask("deeper", "bash"), None).await {
        Err(ChildError::Refused(Refusal::TooDeep { .. })) => {}
        other => bail!("a child at maxDepth delegating: {other:?}"),
    }

    run_until(&runs, &first, "the first child starts", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
    })
    .await?;
    run_until(&runs, &second, "the second waits for its parent", |r| {
        succeeded(r, ConditionStatus::Unknown, "Queued") && message(r) == "parent at 1/1"
    })
    .await?;
    complete(&op.admin, &op.namespace, &first, "done").await?;
    run_until(&runs, &first, "the first child Succeeded", |r| {
        succeeded(r, ConditionStatus::True, "Succeeded")
    })
    .await?;
    run_until(&runs, &second, "the second starts", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
    })
    .await?;
    // Twice the children's TTL: the finished child stays while its parent lives.
    tokio::time::sleep(Duration::from_secs(4)).await;
    ensure!(
        runs.get_opt(&first).await?.is_some(),
        "a child is never deleted before its parent"
    );
    let cancel = json!({"spec": {"cancel": true}});
    runs.patch("lead", &PatchParams::default(), &Patch::Merge(&cancel))
        .await?;
    run_until(&runs, &second, "the parent's end cancels its child", |r| {
        succeeded(r, ConditionStatus::False, "Cancelled")
    })
    .await?;
    wait_for("the parent's TTL takes the family along", WAIT, || async {
        let left = [
            runs.get_opt("lead").await?,
            runs.get_opt(&first).await?,
            runs.get_opt(&second).await?,
        ];
        Ok(left.iter().all(Option::is_none).then_some(()))
    })
    .await?;
    Ok(())
}

/// With a `ReadWriteMany` workspace claim, a child's Pod mounts its parent's claim and the child
/// has none of its own.
pub async fn a_child_shares_a_read_write_many_workspace(op: Operated) -> anyhow::Result<()> {
    create_agent_spec(
        &op.admin,
        &op.namespace,
        json!({"subagents": {"enabled": true},
               "sandbox": {"workspace": {"persistentVolumeClaim": {
                   "size": "1Gi", "accessMode": "ReadWriteMany"}}}}),
    )
    .await?;
    let parent = running_parent(&op.admin, &op.namespace, "shared").await?;
    let child = create_child(&op.operator, &parent, &ask("call_1", "bash"), None)
        .await?
        .name;
    let runs: Api<Run> = op.api();
    run_until(&runs, &child, "the child's Pod", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
    })
    .await?;
    let pods: Api<Pod> = op.api();
    let pod = serde_json::to_value(pods.get(&format!("{child}-1")).await?)?;
    let claims: Vec<&Value> = pod["spec"]["volumes"]
        .as_array()
        .context("no volumes")?
        .iter()
        .filter_map(|v| v.get("persistentVolumeClaim"))
        .collect();
    ensure!(
        claims == [&json!({"claimName": "shared-workspace"})],
        "the child mounts its parent's claim: {claims:?}"
    );
    let pvcs: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = op.api();
    ensure!(pvcs.get_opt("shared-workspace").await?.is_some());
    ensure!(
        pvcs.get_opt(&format!("{child}-workspace")).await?.is_none(),
        "no claim of its own"
    );
    Ok(())
}
