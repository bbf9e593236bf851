//! A child Run for one `task` call (docs/operator.md, step 7): its name, the Run object, its place in
//! the parent's `status.children`, and its snapshot — the parent's narrowed, never the live
//! Agent: depth + 1, the `task` tool only below `maxDepth`, the subagent type's tools among the
//! parent's, and model calls, tokens and time never more than the parent's. `maxTotal` and
//! `maxDepth` are enforced here, whatever the caller claims.

use std::collections::BTreeMap;
use std::time::Duration;

use herd_crds::agent::ToolGroup;
use herd_crds::duration::MAX_TIMEOUT;
use herd_crds::run::{
    AgentRef, ChildCounts, ChildRef, MAX_TASK, ParentRef, Run, RunPhase, RunSpec,
};
use herd_crds::wire::ChildRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sha2::{Digest, Sha256};

use super::run_snapshot::{Delegation, Snapshot};
use super::run_workspace::shared_workspace;

/// Annotation on a child Run: the most model calls its snapshot may allow.
pub const MAX_MODEL_CALLS: &str = "herd.dev/max-model-calls";
/// Annotation on a child Run: the most tokens its snapshot may allow.
pub const TOKEN_BUDGET: &str = "herd.dev/token-budget";
/// Most characters of a child's name taken from its parent's.
const PARENT_PREFIX: usize = 47;
/// Most characters of a `toolCallId` (`spec.parentRef.toolCallId`).
const MAX_TOOL_CALL_ID: usize = 128;
/// The subagent types and the tool groups each may use (among its parent's).
const SUBAGENT_TYPES: [(&str, &[ToolGroup]); 2] = [
    (
        "general-purpose",
        &[
            ToolGroup::Web,
            ToolGroup::FileRead,
            ToolGroup::FileWrite,
            ToolGroup::Bash,
        ],
    ),
    (
        "bash",
        &[ToolGroup::FileRead, ToolGroup::FileWrite, ToolGroup::Bash],
    ),
];

/// Why no child is started.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The parent's Agent does not delegate.
    #[error("subagents are not enabled for this Run")]
    NotEnabled,
    /// The parent is at `maxDepth`.
    #[error("a Run at depth {depth} cannot delegate: maxDepth is {max_depth}")]
    TooDeep {
        /// The parent's depth.
        depth: u32,
        /// Its Agent's `subagents.maxDepth`.
        max_depth: u32,
    },
    /// The parent has `maxTotal` children already.
    #[error("this Run has started {max_total} child Runs, its maxTotal")]
    TotalReached {
        /// Its Agent's `subagents.maxTotal`.
        max_total: u32,
    },
    /// The parent has no time left for a child.
    #[error("no time left for a child Run")]
    NoTimeLeft,
    /// The request cannot become a Run.
    #[error("{0}")]
    Invalid(String),
}

/// The child's name: `<parent≤47>-<sha8(parentUID + toolCallId)>`, the parent's part without a
/// trailing `-` or `.`, so it stays a valid name of at most 56 characters.
pub fn child_name(parent: &str, parent_uid: &str, tool_call_id: &str) -> String {
    let prefix: String = parent.chars().take(PARENT_PREFIX).collect();
    let prefix = prefix.trim_end_matches(['-', '.']);
    let digest = Sha256::digest(format!("{parent_uid}{tool_call_id}").as_bytes());
    format!("{prefix}-{}", &hex::encode(digest)[..8])
}

/// The groups a child of `subagent_type` may use, given its parent's (`None`: all).
fn child_tool_groups(
    parent: Option<&[ToolGroup]>,
    subagent_type: &str,
) -> Result<Vec<ToolGroup>, Refusal> {
    let (_, allowed) = SUBAGENT_TYPES
        .iter()
        .find(|(name, _)| *name == subagent_type)
        .ok_or_else(|| {
            Refusal::Invalid(format!(
                "unknown subagent type {subagent_type:?} (expected general-purpose or bash)"
            ))
        })?;
    Ok(allowed
        .iter()
        .filter(|group| parent.is_none_or(|groups| groups.contains(group)))
        .copied()
        .collect())
}

/// The child Run for `request`, created by the operator on the parent's behalf, given the
/// parent's snapshot and the time it has left: checked against `maxDepth` and the parent's
/// budget (`maxTotal` is checked with [`reserve`]).
pub fn desired_child(
    parent: &Run,
    owner: OwnerReference,
    snapshot: &Snapshot,
    request: &ChildRequest,
    time_left: Duration,
) -> Result<Run, Refusal> {
    let seconds = admissible(snapshot, request, time_left)?;
    let run = &snapshot.run;
    let model_calls = request
        .model_calls_left
        .map_or(run.max_model_calls, |claim| claim.min(run.max_model_calls));
    let tokens = narrower(request.tokens_left, run.token_budget);
    let mut annotations = BTreeMap::from([(MAX_MODEL_CALLS.to_owned(), model_calls.to_string())]);
    if let Some(tokens) = tokens {
        annotations.insert(TOKEN_BUDGET.to_owned(), tokens.to_string());
    }
    let parent_name = parent.metadata.name.clone().unwrap_or_default();
    Ok(Run {
        metadata: ObjectMeta {
            name: Some(child_name(&parent_name, &owner.uid, &request.tool_call_id)),
            namespace: parent.metadata.namespace.clone(),
            labels: parent.metadata.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: RunSpec {
            agent_ref: AgentRef {
                name: parent.spec.agent_ref.name.clone(),
            },
            task: request.prompt.clone(),
            inputs: Vec::new(),
            model: None,
            plan_mode: None,
            thinking: None,
            timeout: Some(format!("{seconds}s")),
            input_timeout: None,
            // The parent's approval rules hold for its delegated work too (the Agent's come
            // with the snapshot): a child never runs what its parent would have to ask about.
            approval: parent.spec.approval.clone(),
            parent_ref: Some(ParentRef {
                name: parent_name,
                tool_call_id: request.tool_call_id.clone(),
            }),
            subagent_type: Some(request.subagent_type.clone()),
            responses: Vec::new(),
            cancel: false,
            ttl_seconds_after_finished: None,
        },
        status: None,
    })
}

/// Whether the parent may delegate `request` (depth, subagents enabled, a known subagent
/// type, a prompt and call id of allowed sizes) and the child's timeout in seconds: the least
/// of the parent's time left, the subagent timeout, [`MAX_TIMEOUT`] and what the runner says
/// is left, refused when nothing is.
fn admissible(
    snapshot: &Snapshot,
    request: &ChildRequest,
    time_left: Duration,
) -> Result<u64, Refusal> {
    let subagents = &snapshot.agent.subagents;
    if snapshot.depth >= subagents.max_depth {
        return Err(Refusal::TooDeep {
            depth: snapshot.depth,
            max_depth: subagents.max_depth,
        });
    }
    if !subagents.enabled {
        return Err(Refusal::NotEnabled);
    }
    child_tool_groups(None, &request.subagent_type)?;
    if request.prompt.trim().is_empty() || request.prompt.chars().count() > MAX_TASK {
        return Err(Refusal::Invalid(format!(
            "the prompt must have 1 to {MAX_TASK} characters"
        )));
    }
    let call = &request.tool_call_id;
    if call.is_empty() || call.chars().count() > MAX_TOOL_CALL_ID {
        return Err(Refusal::Invalid(format!(
            "the toolCallId must have 1 to {MAX_TOOL_CALL_ID} characters"
        )));
    }
    let subagent_timeout =
        herd_crds::duration::parse_duration(&subagents.timeout).unwrap_or(MAX_TIMEOUT);
    let seconds = [
        time_left,
        subagent_timeout,
        MAX_TIMEOUT,
        request
            .seconds_left
            .map_or(Duration::MAX, Duration::from_secs),
    ]
    .into_iter()
    .min()
    .unwrap_or(Duration::ZERO)
    .as_secs();
    if seconds == 0 {
        return Err(Refusal::NoTimeLeft);
    }
    Ok(seconds)
}

/// The smaller of two optional budgets (`None`: unlimited).
fn narrower(claim: Option<u64>, limit: Option<u64>) -> Option<u64> {
    match (claim, limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The parent's `status.children` with `child` reserved: `None` when it is there already (an
/// ask repeated), refused at `maxTotal`.
pub fn reserve(
    children: &[ChildRef],
    child: &str,
    max_total: u32,
) -> Result<Option<Vec<ChildRef>>, Refusal> {
    if children.iter().any(|c| c.name == child) {
        return Ok(None);
    }
    if u32::try_from(children.len()).unwrap_or(u32::MAX) >= max_total {
        return Err(Refusal::TotalReached { max_total });
    }
    let mut reserved = children.to_vec();
    reserved.push(ChildRef {
        name: child.to_owned(),
        state: RunPhase::Pending,
    });
    Ok(Some(reserved))
}

/// The child's snapshot: its parent's, narrowed by what the child Run was created with and the
/// time the parent has left now.
pub fn child_snapshot(
    parent: &Snapshot,
    child: &Run,
    parent_left: Duration,
) -> Result<Snapshot, Refusal> {
    let parent_ref = child
        .spec
        .parent_ref
        .as_ref()
        .ok_or_else(|| Refusal::Invalid("not a child Run".into()))?;
    let subagent_type = child.spec.subagent_type.as_deref().unwrap_or_default();
    let mut snapshot = parent.clone();
    let depth = parent.depth + 1;
    let subagents = &mut snapshot.agent.subagents;
    if depth > subagents.max_depth {
        return Err(Refusal::TooDeep {
            depth: parent.depth,
            max_depth: subagents.max_depth,
        });
    }
    if !subagents.enabled {
        return Err(Refusal::NotEnabled);
    }
    let delegation = Delegation {
        parent: parent_ref.name.clone(),
        max_concurrent: subagents.max_concurrent,
        workspace_claim: shared_workspace(&parent_ref.name, parent),
    };
    // The `task` tool only below maxDepth.
    subagents.enabled = depth < subagents.max_depth;
    snapshot.agent.tool_groups = Some(child_tool_groups(
        parent.agent.tool_groups.as_deref(),
        subagent_type,
    )?);
    let annotation = |key: &str| {
        child
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let run = &mut snapshot.run;
    run.max_model_calls = annotation(MAX_MODEL_CALLS)
        .and_then(|n| u32::try_from(n).ok())
        .map_or(run.max_model_calls, |n| n.min(run.max_model_calls));
    run.token_budget = narrower(annotation(TOKEN_BUDGET), run.token_budget);
    let asked = child
        .spec
        .timeout
        .as_deref()
        .and_then(|t| herd_crds::duration::parse_duration(t).ok())
        .unwrap_or(MAX_TIMEOUT);
    let timeout = asked.min(parent_left).as_secs();
    if timeout == 0 {
        return Err(Refusal::NoTimeLeft);
    }
    run.timeout_seconds = timeout;
    run.plan_mode = false;
    snapshot.depth = depth;
    snapshot.delegation = Some(delegation);
    Ok(snapshot)
}

/// The parent's `status.children` and `childCounts` from its reserved children and the states of
/// those the caches show (by name); a child not reserved but owned by the parent is added.
pub fn children_status(
    reserved: &[ChildRef],
    seen: &BTreeMap<String, RunPhase>,
) -> (Vec<ChildRef>, Option<ChildCounts>) {
    let mut children: Vec<ChildRef> = reserved
        .iter()
        .map(|c| ChildRef {
            name: c.name.clone(),
            state: seen.get(&c.name).copied().unwrap_or(c.state),
        })
        .collect();
    for (name, state) in seen {
        if !reserved.iter().any(|c| &c.name == name) {
            children.push(ChildRef {
                name: name.clone(),
                state: *state,
            });
        }
    }
    let most = *herd_crds::rules::MAX_TOTAL_RANGE.end();
    children.truncate(usize::try_from(most).unwrap_or(usize::MAX));
    if children.is_empty() {
        return (children, None);
    }
    let mut counts = ChildCounts::default();
    for child in &children {
        let count = match child.state {
            RunPhase::Pending | RunPhase::Queued => &mut counts.queued,
            RunPhase::Running | RunPhase::InputRequired | RunPhase::Suspended => &mut counts.active,
            RunPhase::Succeeded => &mut counts.succeeded,
            RunPhase::Failed | RunPhase::Cancelled => &mut counts.failed,
        };
        *count += 1;
    }
    (children, Some(counts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::fixtures::run_owner;
    use proptest::prelude::*;
    use serde_json::json;

    fn snapshot(agent: serde_json::Value, depth: u32) -> Snapshot {
        serde_json::from_value(json!({
            "agentName": "helper",
            "agent": agent,
            "run": {"planMode": true, "thinking": true, "timeoutSeconds": 1800,
                    "inputTimeoutSeconds": 3600, "maxModelCalls": 20, "tokenBudget": 5000,
                    "retries": 1},
            "skills": [{"name": "notes", "digest": "abc"}],
            "runnerImage": "runner:1",
            "sandboxImage": "sandbox:1",
            "depth": depth
        }))
        .unwrap()
    }

    fn delegating(groups: Option<&[&str]>, max_depth: u32) -> serde_json::Value {
        let mut agent = json!({"model": {"provider": "openai", "name": "m"},
            "subagents": {"enabled": true, "maxConcurrent": 2, "maxTotal": 3,
                          "maxDepth": max_depth, "timeout": "10m"}});
        if let Some(groups) = groups {
            agent["toolGroups"] = json!(groups);
        }
        agent
    }

    fn parent() -> Run {
        serde_json::from_value(json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "research", "namespace": "ns", "uid": "p-uid",
                         "labels": {"herd.dev/user": "ana"}},
            "spec": {"agentRef": {"name": "helper"}, "task": "Research."}
        }))
        .unwrap()
    }

    fn owner() -> OwnerReference {
        run_owner("research", "p-uid")
    }

    fn request(kind: &str) -> ChildRequest {
        ChildRequest {
            attempt: 1,
            tool_call_id: "call_1".into(),
            description: "look".into(),
            prompt: "Look it up.".into(),
            subagent_type: kind.into(),
            model_calls_left: None,
            tokens_left: None,
            seconds_left: None,
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn names_are_the_parent_and_a_hash_of_its_uid_and_the_call() {
        let name = child_name("research", "p-uid", "call_1");
        assert!(name.starts_with("research-"), "{name}");
        assert_eq!(name.len(), "research-".len() + 8);
        assert_eq!(name, child_name("research", "p-uid", "call_1"), "stable");
        assert_ne!(name, child_name("research", "p-uid", "call_2"));
        assert_ne!(
            name,
            child_name("research", "other", "call_1"),
            "per parent"
        );
        let long = format!("{}-.x", "a".repeat(45));
        let cut = child_name(&long, "u", "c");
        assert!(cut.starts_with(&format!("{}-", "a".repeat(45))), "{cut}");
        assert!(!cut.contains("-.-") && !cut.contains("--"), "{cut}");
    }

    proptest! {
        #[test]
        fn every_name_is_a_valid_run_name(
            parent in "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,2}",
            uid in ".{0,40}",
            call in ".{1,128}",
        ) {
            prop_assume!(herd_crds::formats::is_dns_subdomain(&parent));
            let name = child_name(&parent, &uid, &call);
            prop_assert!(name.len() <= 56, "{}", name);
            prop_assert!(herd_crds::formats::is_dns_subdomain(&name), "{}", name);
            prop_assert!(herd_crds::formats::is_label("herd.dev/run", &name), "{}", name);
        }
    }

    #[test]
    fn the_child_run_carries_the_request_and_the_narrowed_limits() {
        let snap = snapshot(delegating(None, 2), 0);
        let mut ask = request("general-purpose");
        ask.model_calls_left = Some(99);
        ask.tokens_left = Some(100_000);
        ask.seconds_left = Some(100_000);
        let child = desired_child(&parent(), owner(), &snap, &ask, HOUR).unwrap();
        assert_eq!(
            child.metadata.name.as_deref(),
            Some(child_name("research", "p-uid", "call_1").as_str())
        );
        assert_eq!(child.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(child.metadata.labels, parent().metadata.labels);
        assert_eq!(child.metadata.owner_references, Some(vec![owner()]));
        let annotations = child.metadata.annotations.clone().unwrap();
        assert_eq!(
            annotations[MAX_MODEL_CALLS], "20",
            "the parent's, not the claim"
        );
        assert_eq!(annotations[TOKEN_BUDGET], "5000");
        assert_eq!(
            child.spec.timeout.as_deref(),
            Some("600s"),
            "subagents.timeout"
        );
        assert_eq!(child.spec.task, "Look it up.");
        assert_eq!(child.spec.agent_ref.name, "helper");
        assert_eq!(
            child.spec.parent_ref,
            Some(ParentRef {
                name: "research".into(),
                tool_call_id: "call_1".into()
            })
        );
        assert_eq!(child.spec.subagent_type.as_deref(), Some("general-purpose"));
        assert!(child.validate().is_ok(), "{:?}", child.validate());

        let mut small = request("bash");
        small.model_calls_left = Some(3);
        small.tokens_left = Some(200);
        small.seconds_left = Some(30);
        let child = desired_child(&parent(), owner(), &snap, &small, HOUR).unwrap();
        let annotations = child.metadata.annotations.unwrap();
        assert_eq!(
            (
                annotations[MAX_MODEL_CALLS].as_str(),
                annotations[TOKEN_BUDGET].as_str()
            ),
            ("3", "200")
        );
        assert_eq!(child.spec.timeout.as_deref(), Some("30s"));
        let short = desired_child(
            &parent(),
            owner(),
            &snap,
            &request("bash"),
            Duration::from_secs(42),
        )
        .unwrap();
        assert_eq!(
            short.spec.timeout.as_deref(),
            Some("42s"),
            "the parent's time left"
        );
    }

    #[test]
    fn refusals() {
        let snap = snapshot(delegating(None, 1), 0);
        let refused = |snap: &Snapshot, ask: &ChildRequest, left| {
            desired_child(&parent(), owner(), snap, ask, left).unwrap_err()
        };
        let deep = snapshot(delegating(None, 1), 1);
        assert_eq!(
            refused(&deep, &request("bash"), HOUR),
            Refusal::TooDeep {
                depth: 1,
                max_depth: 1
            }
        );
        let off = snapshot(json!({"model": {"provider": "openai", "name": "m"}}), 0);
        assert_eq!(refused(&off, &request("bash"), HOUR), Refusal::NotEnabled);
        assert!(matches!(
            refused(&snap, &request("hacker"), HOUR),
            Refusal::Invalid(_)
        ));
        let mut empty = request("bash");
        empty.prompt = " ".into();
        assert!(matches!(refused(&snap, &empty, HOUR), Refusal::Invalid(_)));
        let mut long_id = request("bash");
        long_id.tool_call_id = "x".repeat(129);
        assert!(matches!(
            refused(&snap, &long_id, HOUR),
            Refusal::Invalid(_)
        ));
        assert_eq!(
            refused(&snap, &request("bash"), Duration::from_millis(900)),
            Refusal::NoTimeLeft
        );
    }

    #[test]
    fn max_total_counts_reservations_and_a_repeat_is_no_new_child() {
        let child = |name: &str| ChildRef {
            name: name.into(),
            state: RunPhase::Succeeded,
        };
        assert_eq!(
            reserve(&[child("a")], "b", 2).unwrap().unwrap(),
            vec![
                child("a"),
                ChildRef {
                    name: "b".into(),
                    state: RunPhase::Pending
                }
            ]
        );
        assert_eq!(reserve(&[child("a"), child("b")], "a", 2), Ok(None));
        assert_eq!(
            reserve(&[child("a"), child("b")], "c", 2),
            Err(Refusal::TotalReached { max_total: 2 })
        );
    }

    fn child_run(kind: &str, annotations: serde_json::Value, timeout: &str) -> Run {
        serde_json::from_value(json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "research-0011aabb", "namespace": "ns",
                         "annotations": annotations},
            "spec": {"agentRef": {"name": "helper"}, "task": "t", "timeout": timeout,
                     "parentRef": {"name": "research", "toolCallId": "call_1"},
                     "subagentType": kind}
        }))
        .unwrap()
    }

    #[test]
    fn a_child_snapshot_is_never_wider_than_its_parents() {
        let parent = snapshot(delegating(Some(&["file:read", "bash"]), 2), 0);
        let child = child_run(
            "general-purpose",
            json!({MAX_MODEL_CALLS: "500", TOKEN_BUDGET: "9999999"}),
            "168h",
        );
        let snap = child_snapshot(&parent, &child, HOUR).unwrap();
        assert_eq!(snap.depth, 1);
        assert!(snap.agent.subagents.enabled, "below maxDepth 2: keeps task");
        assert_eq!(
            snap.agent.tool_groups,
            Some(vec![ToolGroup::FileRead, ToolGroup::Bash]),
            "never a group the parent lacks"
        );
        assert_eq!(snap.run.max_model_calls, 20);
        assert_eq!(snap.run.token_budget, Some(5000));
        assert_eq!(snap.run.timeout_seconds, 3600, "the parent's time left");
        assert!(!snap.run.plan_mode);
        assert_eq!(snap.run.retries, 1);
        assert_eq!(snap.skills, parent.skills);
        assert_eq!(
            snap.delegation,
            Some(Delegation {
                parent: "research".into(),
                max_concurrent: 2,
                workspace_claim: None
            })
        );

        let grandchild_parent = snap;
        let grandchild = child_run("bash", json!({MAX_MODEL_CALLS: "5"}), "90s");
        let deepest = child_snapshot(&grandchild_parent, &grandchild, HOUR).unwrap();
        assert_eq!(deepest.depth, 2);
        assert!(
            !deepest.agent.subagents.enabled,
            "at maxDepth: no task tool"
        );
        assert_eq!(deepest.run.max_model_calls, 5);
        assert_eq!(deepest.run.token_budget, Some(5000));
        assert_eq!(deepest.run.timeout_seconds, 90);
        assert_eq!(
            child_snapshot(&deepest, &grandchild, HOUR),
            Err(Refusal::TooDeep {
                depth: 2,
                max_depth: 2
            }),
            "a Run at maxDepth has no children"
        );

        let all = snapshot(delegating(None, 1), 0);
        let bash = child_snapshot(&all, &child_run("bash", json!({}), "1h"), HOUR).unwrap();
        assert_eq!(
            bash.agent.tool_groups,
            Some(vec![
                ToolGroup::FileRead,
                ToolGroup::FileWrite,
                ToolGroup::Bash
            ]),
            "a bash subagent has no web tools"
        );
        assert!(!bash.agent.subagents.enabled);
        assert_eq!(bash.run.max_model_calls, 20, "no annotation: the parent's");
        assert_eq!(
            child_snapshot(&all, &child_run("bash", json!({}), "1h"), Duration::ZERO),
            Err(Refusal::NoTimeLeft)
        );
    }

    #[test]
    fn children_and_their_counts() {
        let reserved = [
            ChildRef {
                name: "a".into(),
                state: RunPhase::Pending,
            },
            ChildRef {
                name: "b".into(),
                state: RunPhase::Running,
            },
        ];
        let seen = BTreeMap::from([
            ("a".to_owned(), RunPhase::Succeeded),
            ("c".to_owned(), RunPhase::Queued),
        ]);
        let (children, counts) = children_status(&reserved, &seen);
        assert_eq!(
            children
                .iter()
                .map(|c| (c.name.as_str(), c.state))
                .collect::<Vec<_>>(),
            [
                ("a", RunPhase::Succeeded),
                ("b", RunPhase::Running),
                ("c", RunPhase::Queued)
            ],
            "a child gone keeps its last state"
        );
        assert_eq!(
            counts,
            Some(ChildCounts {
                queued: 1,
                active: 1,
                succeeded: 1,
                failed: 0
            })
        );
        assert_eq!(children_status(&[], &BTreeMap::new()), (vec![], None));
    }
}
