//! One accepting and one rejecting case per CEL rule of the three CRDs, evaluated offline.

mod common;

use common::{cel_create, cel_update};
use herd_crds::rules;
use serde_json::{Value, json};

fn agent(spec: Value) -> Value {
    json!({"apiVersion": "herd.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "researcher"}, "spec": spec})
}

fn skill(name: &str) -> Value {
    json!({"apiVersion": "herd.dev/v1alpha1", "kind": "Skill", "metadata": {"name": name}, "spec": {"content": "---\nname: x\n---\n"}})
}

fn run(extra: Value) -> Value {
    let mut spec = json!({"agentRef": {"name": "researcher"}, "task": "Summarize the news"});
    common::merge_patch(&mut spec, &extra);
    json!({"apiVersion": "herd.dev/v1alpha1", "kind": "Run", "metadata": {"name": "news"}, "spec": spec})
}

fn renamed(mut object: Value, name: &str) -> Value {
    object["metadata"]["name"] = json!(name);
    object
}

fn patched(object: &Value, patch: Value) -> Value {
    let mut new = object.clone();
    common::merge_patch(&mut new, &patch);
    new
}

/// Asserts exactly one error, at `path`, with `message`.
fn assert_rejected(errors: Vec<String>, path: &str, message: &str) {
    let expected = if path.is_empty() {
        message.to_owned()
    } else {
        format!("{path}: {message}")
    };
    assert_eq!(errors, vec![expected]);
}

fn assert_accepted(errors: Vec<String>) {
    assert_eq!(errors, Vec::<String>::new());
}

#[test]
fn agent_name_at_most_63() {
    assert_accepted(cel_create(&renamed(agent(json!({})), &"a".repeat(63))));
    assert_rejected(
        cel_create(&renamed(agent(json!({})), &"a".repeat(64))),
        "",
        rules::NAME_63_MESSAGE,
    );
}

#[test]
fn run_name_at_most_63() {
    assert_accepted(cel_create(&renamed(run(json!({})), &"r".repeat(63))));
    assert_rejected(
        cel_create(&renamed(run(json!({})), &"r".repeat(64))),
        "",
        rules::NAME_63_MESSAGE,
    );
}

#[test]
fn skill_name_pattern_and_length() {
    for good in ["deep-research", "a", "x1-y2", &"s".repeat(64)] {
        assert_accepted(cel_create(&skill(good)));
    }
    for bad in ["Deep", "a--b", "-a", "a-", "a.b", &"s".repeat(65)] {
        assert_rejected(cel_create(&skill(bad)), "", rules::SKILL_NAME_MESSAGE);
    }
}

#[test]
fn soul_and_soul_from_are_exclusive() {
    let from = json!({"configMapKeyRef": {"name": "souls", "key": "SOUL.md"}});
    assert_accepted(cel_create(&agent(json!({"soul": "I am careful."}))));
    assert_accepted(cel_create(&agent(json!({"soulFrom": from}))));
    assert_rejected(
        cel_create(&agent(json!({"soul": "I am careful.", "soulFrom": from}))),
        "spec",
        rules::SOUL_EXCLUSIVE_MESSAGE,
    );
}

fn assert_range(field: &str, min: i64, max: i64, message: &str) {
    for ok in [min, max] {
        assert_accepted(cel_create(&agent(json!({"subagents": {field: ok}}))));
    }
    for bad in [min - 1, max + 1] {
        if bad < 0 {
            continue;
        }
        assert_rejected(
            cel_create(&agent(json!({"subagents": {field: bad}}))),
            &format!("spec.subagents.{field}"),
            message,
        );
    }
}

#[test]
fn max_concurrent_is_1_to_4() {
    assert_range("maxConcurrent", 1, 4, rules::MAX_CONCURRENT_MESSAGE);
}

#[test]
fn max_total_is_1_to_50() {
    assert_range("maxTotal", 1, 50, rules::MAX_TOTAL_MESSAGE);
}

#[test]
fn max_depth_is_1_to_3() {
    assert_range("maxDepth", 1, 3, rules::MAX_DEPTH_MESSAGE);
}

#[test]
fn retries_is_0_to_3() {
    for ok in [0, 3] {
        assert_accepted(cel_create(&agent(json!({"runDefaults": {"retries": ok}}))));
    }
    assert_rejected(
        cel_create(&agent(json!({"runDefaults": {"retries": 4}}))),
        "spec.runDefaults.retries",
        rules::RETRIES_MESSAGE,
    );
}

#[test]
fn defaults_satisfy_every_agent_rule() {
    assert_accepted(cel_create(&agent(json!({}))));
}

#[test]
fn egress_cidrs_exactly_with_mode_cidrs() {
    let egress = |e: Value| agent(json!({"sandbox": {"egress": e}}));
    for ok in [
        json!({"mode": "CIDRs", "cidrs": ["10.0.0.0/8"]}),
        json!({"mode": "Internet"}),
        json!({"mode": "None"}),
        json!({}),
    ] {
        assert_accepted(cel_create(&egress(ok)));
    }
    for bad in [
        json!({"mode": "CIDRs"}),
        json!({"mode": "CIDRs", "cidrs": []}),
        json!({"mode": "Internet", "cidrs": ["10.0.0.0/8"]}),
        json!({"cidrs": ["10.0.0.0/8"]}),
    ] {
        assert_rejected(
            cel_create(&egress(bad)),
            "spec.sandbox.egress",
            rules::EGRESS_CIDRS_MESSAGE,
        );
    }
}

/// A duration field's path and a manifest with the field set to the given text.
type DurationField = (&'static str, fn(&str) -> Value);

#[test]
fn durations_match_the_pattern_everywhere() {
    let agent_fields: [DurationField; 4] = [
        ("spec.model.requestTimeout", |d| {
            agent(json!({"model": {"provider": "openai", "name": "m", "requestTimeout": d}}))
        }),
        ("spec.subagents.timeout", |d| {
            agent(json!({"subagents": {"timeout": d}}))
        }),
        ("spec.runDefaults.timeout", |d| {
            agent(json!({"runDefaults": {"timeout": d}}))
        }),
        ("spec.runDefaults.inputTimeout", |d| {
            agent(json!({"runDefaults": {"inputTimeout": d}}))
        }),
    ];
    let run_fields: [DurationField; 2] = [
        ("spec.timeout", |d| run(json!({"timeout": d}))),
        ("spec.inputTimeout", |d| run(json!({"inputTimeout": d}))),
    ];
    for (path, object) in agent_fields.into_iter().chain(run_fields) {
        for good in ["90s", "1h30m", "500ms", "24h"] {
            assert_accepted(cel_create(&object(good)));
        }
        for bad in ["1d", "30", "1.5h", "soon", ""] {
            assert_rejected(cel_create(&object(bad)), path, rules::DURATION_MESSAGE);
        }
    }
}

#[test]
fn parent_ref_and_subagent_type_together() {
    let parent = json!({"name": "lead", "toolCallId": "call_1"});
    assert_accepted(cel_create(&run(json!({}))));
    assert_accepted(cel_create(&run(
        json!({"parentRef": parent, "subagentType": "general-purpose"}),
    )));
    for bad in [
        json!({"parentRef": parent}),
        json!({"subagentType": "bash"}),
    ] {
        assert_rejected(
            cel_create(&run(bad)),
            "spec",
            rules::PARENT_WITH_TYPE_MESSAGE,
        );
    }
}

#[test]
fn run_spec_is_immutable_except_responses_and_cancel() {
    let old = run(json!({"timeout": "1h", "model": {"name": "m1"}}));
    assert_accepted(cel_update(
        &old,
        &patched(&old, json!({"spec": {"cancel": true}})),
    ));
    assert_accepted(cel_update(
        &old,
        &patched(
            &old,
            json!({"spec": {"responses": [{"id": "q1", "answer": "yes"}]}}),
        ),
    ));
    assert_accepted(cel_update(
        &old,
        &patched(&old, json!({"metadata": {"labels": {"a": "b"}}})),
    ));
    for change in [
        json!({"spec": {"task": "Something else"}}),
        json!({"spec": {"agentRef": {"name": "other"}}}),
        json!({"spec": {"timeout": "2h"}}),
        json!({"spec": {"timeout": null}}),
        json!({"spec": {"inputTimeout": "5m"}}),
        json!({"spec": {"model": {"temperature": 0.5}}}),
        json!({"spec": {"planMode": true}}),
        json!({"spec": {"thinking": false}}),
        json!({"spec": {"inputs": [{"configMapRef": {"name": "data"}}]}}),
        json!({"spec": {"ttlSecondsAfterFinished": 60}}),
        json!({"spec": {"parentRef": {"name": "p", "toolCallId": "c"}, "subagentType": "bash"}}),
    ] {
        assert_rejected(
            cel_update(&old, &patched(&old, change.clone())),
            "spec",
            rules::RUN_SPEC_IMMUTABLE_MESSAGE,
        );
    }
}

#[test]
fn cancel_cannot_go_back() {
    let cancelled = run(json!({"cancel": true}));
    assert_accepted(cel_update(&run(json!({})), &cancelled));
    assert_accepted(cel_update(&cancelled, &cancelled));
    assert_rejected(
        cel_update(&cancelled, &run(json!({"cancel": false}))),
        "spec.cancel",
        rules::CANCEL_STAYS_MESSAGE,
    );
    assert_rejected(
        cel_update(&cancelled, &run(json!({}))),
        "spec.cancel",
        rules::CANCEL_STAYS_MESSAGE,
    );
}

#[test]
fn responses_are_append_only() {
    let one = run(json!({"responses": [{"id": "q1", "answer": "yes"}]}));
    let two =
        run(json!({"responses": [{"id": "q1", "answer": "yes"}, {"id": "q2", "answer": "no"}]}));
    assert_accepted(cel_update(&run(json!({})), &one));
    assert_accepted(cel_update(&one, &two));
    assert_rejected(
        cel_update(&two, &one),
        "spec.responses",
        rules::RESPONSES_APPEND_ONLY_MESSAGE,
    );
    // The offline evaluator correlates list items by index, not by the `id` key as the API
    // server does, so it also reports q2 as a changed q1; the server reports only this one.
    let errors = cel_update(
        &one,
        &run(json!({"responses": [{"id": "q2", "answer": "no"}]})),
    );
    let expected = format!("spec.responses: {}", rules::RESPONSES_APPEND_ONLY_MESSAGE);
    assert!(errors.contains(&expected), "{errors:?}");
}

#[test]
fn an_answer_cannot_change() {
    let one = run(json!({"responses": [{"id": "q1", "answer": "yes"}]}));
    assert_accepted(cel_update(&one, &one));
    assert_rejected(
        cel_update(
            &one,
            &run(json!({"responses": [{"id": "q1", "answer": "no"}]})),
        ),
        "spec.responses[0]",
        rules::RESPONSE_IMMUTABLE_MESSAGE,
    );
}

#[test]
fn a_stale_report_is_rejected() {
    let with_report = |attempt: u32, seq: u64| {
        let mut object = run(json!({}));
        object["status"] = json!({"report": {"attempt": attempt, "seq": seq, "title": "t"}});
        object
    };
    let current = with_report(2, 5);
    for newer in [with_report(2, 5), with_report(2, 6), with_report(3, 0)] {
        assert_accepted(cel_update(&current, &newer));
    }
    assert_accepted(cel_update(&run(json!({})), &with_report(1, 0)));
    for stale in [with_report(2, 4), with_report(1, 9)] {
        assert_rejected(
            cel_update(&current, &stale),
            "status.report",
            rules::REPORT_NOT_STALE_MESSAGE,
        );
    }
}
