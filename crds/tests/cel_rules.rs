//! One accepting and one rejecting case per CEL rule of the CRDs, evaluated offline.

mod common;

use common::{cel_create, cel_update};
use herd_crds::manifest::parse_manifests;
use herd_crds::report::Clarification;
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
        for good in ["90s", "1h30m", "1s", "1000ms", "24h", "999999ms"] {
            assert_accepted(cel_create(&object(good)));
        }
        for bad in ["1d", "30", "1.5h", "soon", "", "1000000s", "0000001h"] {
            assert_rejected(cel_create(&object(bad)), path, rules::DURATION_MESSAGE);
        }
        let (max, suffix) = if path.ends_with("inputTimeout") {
            ("720h", rules::DURATION_UP_TO_720H_SUFFIX)
        } else {
            ("168h", rules::DURATION_UP_TO_168H_SUFFIX)
        };
        assert_accepted(cel_create(&object(max)));
        for bad in ["999ms", "0s", &format!("{max}1s"), "999999h"] {
            assert_rejected(cel_create(&object(bad)), path, &rules::quoted(bad, suffix));
        }
    }
}

/// Asserts the object is rejected with exactly one error, at `path`, quoting `value`.
/// The pure-Rust `validate()` (through `parse_manifests`) reports the same message.
fn assert_quoted(object: &Value, path: &str, value: &str, suffix: &str) {
    assert_refused(object, path, &rules::quoted(value, suffix));
}

/// Both CEL and the pure-Rust `validate()` accept the object.
fn assert_valid(object: &Value) {
    assert_accepted(cel_create(object));
    if let Err(e) = parse_manifests(&object.to_string()) {
        panic!("validate() refused {object}: {e}");
    }
}

#[test]
fn skills_are_skill_names() {
    assert_valid(&agent(json!({"skills": ["deep-research", "a1"]})));
    assert_valid(&agent(json!({"skills": []})));
    for bad in ["Deep", "a--b", "-a", "a_b", ""] {
        assert_quoted(
            &agent(json!({"skills": ["ok", bad]})),
            "spec.skills",
            bad,
            rules::SKILL_REFS_SUFFIX,
        );
    }
}

#[test]
fn input_paths_and_skill_files_are_relative() {
    let input =
        |path: &str| run(json!({"inputs": [{"configMapRef": {"name": "data"}, "path": path}]}));
    let files = |key: &str| {
        let mut object = skill("checker");
        object["spec"]["files"] = json!({"ok.py": "x", key: "y"});
        object
    };
    for good in ["reports", "a/b", "..a/b..", "a/...", "."] {
        assert_valid(&input(good));
        assert_valid(&files(good));
    }
    for bad in ["/etc", "..", "../x", "a/../b", "a/.."] {
        assert_quoted(
            &input(bad),
            "spec.inputs[0].path",
            bad,
            rules::RELATIVE_PATH_SUFFIX,
        );
        assert_quoted(&files(bad), "spec.files", bad, rules::RELATIVE_PATH_SUFFIX);
    }
}

#[test]
fn cidrs_are_cidrs() {
    let egress = |cidr: &str| {
        agent(json!({"sandbox": {"egress": {"mode": "CIDRs", "cidrs": ["10.0.0.0/8", cidr]}}}))
    };
    let model = |cidr: &str| {
        agent(json!({"model": {"provider": "openai", "name": "m", "egressCIDRs": [cidr]}}))
    };
    for good in ["192.168.1.0/24", "fd00::/8", "0.0.0.0/0", "10.1.2.3/32"] {
        assert_valid(&egress(good));
        assert_valid(&model(good));
    }
    for bad in ["10.0.0.0", "10.0.0.0/33", "vllm.models", "fd00::/129"] {
        assert_quoted(
            &egress(bad),
            "spec.sandbox.egress.cidrs",
            bad,
            rules::CIDRS_SUFFIX,
        );
        assert_quoted(
            &model(bad),
            "spec.model.egressCIDRs",
            bad,
            rules::CIDRS_SUFFIX,
        );
    }
}

#[test]
fn resources_and_sizes_are_quantities() {
    let resources = |value: Value| {
        agent(
            json!({"sandbox": {"resources": {"requests": {"cpu": "250m", "memory": value}, "limits": {"memory": value}}}}),
        )
    };
    for good in [
        json!("512Mi"),
        json!(2),
        json!("1.5"),
        json!("1e3"),
        json!("100m"),
    ] {
        assert_valid(&resources(good));
    }
    let errors = cel_create(&resources(json!("lots")));
    let expected = |path: &str| {
        format!(
            "{path}: {}",
            rules::quoted("memory", rules::QUANTITY_SUFFIX)
        )
    };
    assert_eq!(
        errors,
        vec![
            expected("spec.sandbox.resources.limits"),
            expected("spec.sandbox.resources.requests")
        ]
    );
    let size = |value: Value| {
        agent(json!({"sandbox": {"workspace": {"persistentVolumeClaim": {"size": value}}}}))
    };
    assert_valid(&size(json!("10Gi")));
    assert_valid(&size(json!(1024)));
    assert_quoted(
        &size(json!("ten-gigs")),
        "spec.sandbox.workspace.persistentVolumeClaim.size",
        "ten-gigs",
        rules::QUANTITY_SUFFIX,
    );
}

#[test]
fn agent_refs_and_class_names_are_dns_names() {
    let reference = |name: &str| run(json!({"agentRef": {"name": name}}));
    let runtime = |name: &str| agent(json!({"sandbox": {"runtimeClassName": name}}));
    let storage = |name: &str| {
        agent(
            json!({"sandbox": {"workspace": {"persistentVolumeClaim": {"storageClassName": name}}}}),
        )
    };
    for good in ["researcher", "a", "r2-d2", "team.researcher"] {
        assert_valid(&reference(good));
        assert_valid(&runtime(good));
        assert_valid(&storage(good));
    }
    for bad in ["Researcher", "-a", "a-", "a_b", "a..b"] {
        assert_quoted(
            &reference(bad),
            "spec.agentRef.name",
            bad,
            rules::AGENT_REF_NAME_SUFFIX,
        );
        assert_quoted(
            &runtime(bad),
            "spec.sandbox.runtimeClassName",
            bad,
            rules::DNS_SUBDOMAIN_SUFFIX,
        );
        assert_quoted(
            &storage(bad),
            "spec.sandbox.workspace.persistentVolumeClaim.storageClassName",
            bad,
            rules::DNS_SUBDOMAIN_SUFFIX,
        );
    }
}

#[test]
fn toleration_operators_are_exists_or_equal() {
    let tolerations = |operator: Value| {
        agent(
            json!({"sandbox": {"tolerations": [{"key": "gpu", "operator": "Exists"}, {"key": "spot", "operator": operator}]}}),
        )
    };
    assert_valid(&tolerations(json!("Equal")));
    assert_valid(&agent(
        json!({"sandbox": {"tolerations": [{"key": "gpu"}]}}),
    ));
    assert_quoted(
        &tolerations(json!("In")),
        "spec.sandbox.tolerations[1]",
        "In",
        rules::TOLERATION_OPERATOR_SUFFIX,
    );
}

#[test]
fn images_have_no_whitespace_and_only_sha256_digests() {
    let image = |image: &str| agent(json!({"sandbox": {"image": image}}));
    let digest = "a".repeat(64);
    for good in [
        "debian:bookworm-slim".to_owned(),
        "ghcr.io/acme/sandbox".to_owned(),
        format!("ghcr.io/acme/sandbox:1.2@sha256:{digest}"),
        "localhost:5000/sandbox".to_owned(),
    ] {
        assert_valid(&image(&good));
    }
    for bad in [
        "sandbox latest".to_owned(),
        "sandbox\tlatest".to_owned(),
        format!("sandbox@sha256:{}", "a".repeat(63)),
        format!("sandbox@sha512:{digest}"),
        "".to_owned(),
    ] {
        assert_quoted(
            &image(&bad),
            "spec.sandbox.image",
            &bad,
            rules::IMAGE_SUFFIX,
        );
    }
}

#[test]
fn node_selectors_are_labels() {
    let selector = |key: &str, value: &str| {
        agent(json!({"sandbox": {"nodeSelector": {"kubernetes.io/arch": "amd64", key: value}}}))
    };
    for (key, value) in [
        ("disk", "ssd"),
        ("node.acme.io/pool", "gpu_a100"),
        ("a", ""),
        ("x", &"v".repeat(63)),
    ] {
        assert_valid(&selector(key, value));
    }
    for (key, value) in [
        ("disk type", "ssd"),
        ("/disk", "ssd"),
        ("Acme.io/disk", "ssd"),
        ("disk", "-ssd"),
        ("disk", &"v".repeat(64)),
        (&"k".repeat(64), "x"),
    ] {
        assert_quoted(
            &selector(key, value),
            "spec.sandbox.nodeSelector",
            &format!("{key}={value}"),
            rules::NODE_SELECTOR_SUFFIX,
        );
    }
}

#[test]
fn secret_and_config_map_keys() {
    let secret = |key: &str| {
        agent(
            json!({"model": {"provider": "openai", "name": "m", "apiKeySecretRef": {"name": "s", "key": key}}}),
        )
    };
    let config_map =
        |key: &str| agent(json!({"soulFrom": {"configMapKeyRef": {"name": "c", "key": key}}}));
    for good in ["api-key", "SOUL.md", "a_b"] {
        assert_valid(&secret(good));
        assert_valid(&config_map(good));
    }
    for bad in ["api/key", "SOUL md", "ключ"] {
        assert_quoted(
            &secret(bad),
            "spec.model.apiKeySecretRef.key",
            bad,
            rules::CONFIG_KEY_SUFFIX,
        );
        assert_quoted(
            &config_map(bad),
            "spec.soulFrom.configMapKeyRef.key",
            bad,
            rules::CONFIG_KEY_SUFFIX,
        );
    }
}

#[test]
fn base_urls_are_http_urls() {
    let model =
        |url: &str| agent(json!({"model": {"provider": "openai", "name": "m", "baseURL": url}}));
    let search =
        |url: &str| agent(json!({"tools": {"webSearch": {"provider": "searxng", "baseURL": url}}}));
    for good in [
        "http://vllm.models:8000/v1",
        "https://api.openai.com/v1",
        "http://[::1]:8080",
    ] {
        assert_valid(&model(good));
        assert_valid(&search(good));
    }
    for bad in [
        "ftp://models/v1",
        "vllm.models:8000",
        "/v1",
        "http://",
        "file:///etc/passwd",
    ] {
        assert_quoted(
            &model(bad),
            "spec.model.baseURL",
            bad,
            rules::HTTP_URL_SUFFIX,
        );
        assert_quoted(
            &search(bad),
            "spec.tools.webSearch.baseURL",
            bad,
            rules::HTTP_URL_SUFFIX,
        );
    }
}

#[test]
fn asked_at_is_a_date_time() {
    let asked = |at: &str| {
        let mut object = run(json!({}));
        object["status"] = json!({"report": {"attempt": 1, "seq": 1, "clarification": {
            "id": "q1", "question": "Which region?", "type": "missing_info", "askedAt": at}}});
        object
    };
    for good in [
        "2026-01-31T09:30:00Z",
        "2026-01-31T09:30:00.123456789Z",
        "2026-01-31T09:30:00+02:00",
    ] {
        assert_accepted(cel_update(&run(json!({})), &asked(good)));
        let clarification: Clarification =
            serde_json::from_value(asked(good)["status"]["report"]["clarification"].clone())
                .unwrap();
        assert_eq!(clarification.validate(), Ok(()));
    }
    for bad in [
        "yesterday",
        "2026-01-31",
        "2026-01-31 09:30:00Z",
        "2026-01-31T09:30:00",
    ] {
        let message = rules::quoted(bad, rules::DATE_TIME_SUFFIX);
        assert_rejected(
            cel_update(&run(json!({})), &asked(bad)),
            "status.report.clarification.askedAt",
            &message,
        );
        let clarification: Clarification =
            serde_json::from_value(asked(bad)["status"]["report"]["clarification"].clone())
                .unwrap();
        assert_eq!(
            clarification.validate().unwrap_err().to_string(),
            format!("status.report.clarification.askedAt: {message}")
        );
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

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// The CEL rule and the Rust check agree on input paths, `..` segments and leading slashes
    /// included.
    #[test]
    fn cel_and_rust_agree_on_input_paths(
        segments in proptest::collection::vec("(\\.\\.|\\.|[a-z.]{1,3}|)", 1..4),
        leading_slash in proptest::bool::ANY,
    ) {
        let path = format!("{}{}", if leading_slash { "/" } else { "" }, segments.join("/"));
        let object = run(json!({"inputs": [{"configMapRef": {"name": "data"}, "path": path}]}));
        let cel_accepts = cel_create(&object).is_empty();
        proptest::prop_assert_eq!(
            cel_accepts,
            herd_crds::formats::is_relative_path(&path),
            "{}", path
        );
    }
}

fn mcp(server: Value) -> Value {
    agent(json!({"mcp": {"servers": [server]}}))
}

/// Both CEL and `validate()` reject the object with `message` at `path`.
fn assert_refused(object: &Value, path: &str, message: &str) {
    assert_rejected(cel_create(object), path, message);
    let offline = match parse_manifests(&object.to_string()) {
        Ok(_) => panic!("validate() accepted {object}"),
        Err(e) => e.to_string(),
    };
    assert!(
        offline.contains(&format!("{path}: {message}")),
        "validate() said {offline:?}, CEL said {path}: {message}"
    );
}

#[test]
fn mcp_servers_are_http_or_stdio_and_secrets_stay_with_http() {
    let http = json!({"name": "docs", "url": "https://mcp.example.com/mcp",
        "headers": [{"name": "X-Api-Key", "secretKeyRef": {"name": "k", "key": "key"}}],
        "egressCIDRs": ["10.0.0.0/8"], "tools": ["search"], "timeout": "2m"});
    let stdio = json!({"name": "time-2", "command": ["python3", "-m", "mcp_server_time"],
        "env": [{"name": "TZ_NAME", "value": "UTC"}]});
    assert_valid(&agent(
        json!({"mcp": {"servers": [http, stdio], "deferred": true}}),
    ));
    let path = "spec.mcp.servers[0]";
    assert_refused(
        &mcp(json!({"name": "x", "url": "http://h/mcp", "command": ["x"]})),
        path,
        rules::MCP_TRANSPORT_MESSAGE,
    );
    assert_refused(
        &mcp(json!({"name": "x"})),
        path,
        rules::MCP_TRANSPORT_MESSAGE,
    );
    let stdio_with_secret = json!({"name": "x", "command": ["x"],
        "headers": [{"name": "A", "secretKeyRef": {"name": "k", "key": "v"}}]});
    assert_refused(&mcp(stdio_with_secret), path, rules::MCP_HTTP_ONLY_MESSAGE);
    assert_refused(
        &mcp(json!({"name": "x", "command": ["x"], "egressCIDRs": ["10.0.0.0/8"]})),
        path,
        rules::MCP_HTTP_ONLY_MESSAGE,
    );
    assert_refused(
        &mcp(json!({"name": "x", "url": "http://h/mcp", "env": [{"name": "A", "value": "b"}]})),
        path,
        rules::MCP_STDIO_ONLY_MESSAGE,
    );
}

#[test]
fn mcp_names_headers_env_and_urls_are_checked() {
    for good in ["time", "a1-b2", "x"] {
        assert_valid(&mcp(json!({"name": good, "command": ["x"]})));
    }
    for bad in ["Time", "a__b", "a_b", "-a", "a--b"] {
        assert_quoted(
            &mcp(json!({"name": bad, "command": ["x"]})),
            "spec.mcp.servers[0].name",
            bad,
            rules::MCP_SERVER_NAME_SUFFIX,
        );
    }
    let header = |name: &str| {
        mcp(json!({"name": "d", "url": "http://h/mcp",
            "headers": [{"name": name, "secretKeyRef": {"name": "k", "key": "v"}}]}))
    };
    assert_valid(&header("Authorization"));
    for bad in ["X Api", "X_Api", "-X", "X:"] {
        assert_quoted(
            &header(bad),
            "spec.mcp.servers[0].headers[0].name",
            bad,
            rules::HEADER_NAME_SUFFIX,
        );
    }
    for reserved in [
        "Host",
        "content-length",
        "CONTENT-TYPE",
        "Accept",
        "Mcp-Session-Id",
    ] {
        assert_quoted(
            &header(reserved),
            "spec.mcp.servers[0].headers[0].name",
            reserved,
            rules::MCP_HEADER_NOT_RESERVED_SUFFIX,
        );
    }
    assert_valid(&header("X-Content-Type"));
    let env = |name: &str| {
        mcp(json!({"name": "t", "command": ["x"], "env": [{"name": name, "value": "v"}]}))
    };
    assert_valid(&env("_A1"));
    for bad in ["1A", "A-B", "A B"] {
        assert_quoted(
            &env(bad),
            "spec.mcp.servers[0].env[0].name",
            bad,
            rules::ENV_NAME_SUFFIX,
        );
    }
    assert_quoted(
        &mcp(json!({"name": "d", "url": "mcp.example.com"})),
        "spec.mcp.servers[0].url",
        "mcp.example.com",
        rules::HTTP_URL_SUFFIX,
    );
    assert_quoted(
        &mcp(json!({"name": "d", "url": "http://h/mcp", "egressCIDRs": ["h"]})),
        "spec.mcp.servers[0].egressCIDRs",
        "h",
        rules::CIDRS_SUFFIX,
    );
}

fn schedule(extra: Value) -> Value {
    let mut spec = json!({
        "schedule": "0 9 * * 1-5",
        "runTemplate": {"spec": {"agentRef": {"name": "researcher"}, "task": "Brief me"}},
    });
    common::merge_patch(&mut spec, &extra);
    json!({"apiVersion": "herd.dev/v1alpha1", "kind": "Schedule", "metadata": {"name": "brief"}, "spec": spec})
}

#[test]
fn schedule_name_at_most_52() {
    assert_accepted(cel_create(&renamed(schedule(json!({})), &"a".repeat(52))));
    assert_rejected(
        cel_create(&renamed(schedule(json!({})), &"a".repeat(53))),
        "",
        rules::NAME_52_MESSAGE,
    );
}

#[test]
fn schedules_have_the_shape_of_cron_or_a_macro() {
    for good in [
        "0 9 * * 1-5",
        "*/15 * * * *",
        "@hourly",
        "@midnight",
        "@every 15m",
        "@every 1h30m",
    ] {
        assert_accepted(cel_create(&schedule(json!({"schedule": good}))));
    }
    for bad in [
        "* * * *",
        "* * * * * *",
        "@every",
        "@every 5",
        "@every 500ms",
        "@often",
    ] {
        assert_rejected(
            cel_create(&schedule(json!({"schedule": bad}))),
            "spec.schedule",
            &rules::quoted(bad, rules::CRON_SHAPE_SUFFIX),
        );
    }
}

#[test]
fn time_zones_are_zone_names() {
    for good in [
        "UTC",
        "Europe/Berlin",
        "America/Argentina/Buenos_Aires",
        "Etc/GMT+5",
    ] {
        assert_accepted(cel_create(&schedule(json!({"timeZone": good}))));
    }
    for bad in ["Europe/", "/Berlin", "Europe Berlin", "../etc/passwd"] {
        let errors = cel_create(&schedule(json!({"timeZone": bad})));
        assert_eq!(
            errors,
            [format!(
                "spec.timeZone: \"{bad}\" is not a time zone name such as Europe/Berlin, America/New_York or UTC"
            )]
        );
    }
}

#[test]
fn a_schedule_or_one_time() {
    assert_accepted(cel_create(&schedule(
        json!({"schedule": null, "at": "2026-03-01T09:00:00+01:00"}),
    )));
    let both = schedule(json!({"at": "2026-03-01T09:00:00+01:00"}));
    assert_rejected(cel_create(&both), "spec", rules::SCHEDULE_OR_AT_MESSAGE);
    let neither = schedule(json!({"schedule": null}));
    assert_rejected(cel_create(&neither), "spec", rules::SCHEDULE_OR_AT_MESSAGE);
}

#[test]
fn history_limits_are_0_to_100() {
    for field in ["successfulRunsHistoryLimit", "failedRunsHistoryLimit"] {
        assert_accepted(cel_create(&schedule(json!({field: 0}))));
        assert_accepted(cel_create(&schedule(json!({field: 100}))));
        assert_rejected(
            cel_create(&schedule(json!({field: 101}))),
            &format!("spec.{field}"),
            rules::HISTORY_LIMIT_MESSAGE,
        );
    }
}

#[test]
fn a_run_template_may_change() {
    let old = schedule(json!({}));
    let new = patched(
        &old,
        json!({"spec": {"runTemplate": {"spec": {"task": "Brief me twice", "timeout": "1h"}}}}),
    );
    assert_accepted(cel_update(&old, &new));
}

#[test]
fn a_response_is_an_answer_or_a_decision() {
    use herd_crds::approval::RESPONSE_KIND_MESSAGE;
    for good in [
        json!({"id": "q1", "answer": "yes"}),
        json!({"id": "q1", "answer": ""}),
        json!({"id": "a-1", "decision": "approve"}),
        json!({"id": "a-1", "decision": "deny", "reason": "not on main"}),
    ] {
        assert_accepted(cel_create(&run(json!({"responses": [good]}))));
    }
    for bad in [
        json!({"id": "a-1"}),
        json!({"id": "a-1", "answer": "yes", "decision": "approve"}),
        json!({"id": "q1", "answer": "yes", "reason": "why"}),
    ] {
        assert_rejected(
            cel_create(&run(json!({"responses": [bad]}))),
            "spec.responses[0]",
            RESPONSE_KIND_MESSAGE,
        );
    }
}

#[test]
fn approval_tools_are_tool_patterns_and_commands_regexes() {
    use herd_crds::approval::{COMMAND_REGEXES_MESSAGE, TOOL_PATTERNS_MESSAGE};
    let with = |approval: Value| agent(json!({"approval": approval}));
    assert_accepted(cel_create(&with(json!({
        "tools": ["bash", "write_file", "mcp:github/*", "mcp:*/delete_*"],
        "commands": ["git push|kubectl", "^rm\\s+-rf"],
        "timeout": "15m",
        "onTimeout": "fail",
    }))));
    for bad in ["mcp:GitHub/*", "mcp:github", "two words", "mcp:/x"] {
        assert_rejected(
            cel_create(&with(json!({"tools": [bad]}))),
            "spec.approval.tools",
            TOOL_PATTERNS_MESSAGE,
        );
    }
    // A pattern that does not compile fails the rule (CEL compiles it when it runs), on a Run
    // as on an Agent.
    let errors = cel_create(&run(json!({"approval": {"commands": ["git (push"]}})));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("spec.approval.commands"),
        "{errors:?} ({COMMAND_REGEXES_MESSAGE})"
    );
}

#[test]
fn cel_and_rust_agree_on_approval_rules() {
    use herd_crds::approval::{COMMAND_REGEXES_MESSAGE, TOOL_PATTERNS_MESSAGE};
    assert_refused(
        &agent(json!({"approval": {"tools": ["mcp:GitHub/*"]}})),
        "spec.approval.tools",
        TOOL_PATTERNS_MESSAGE,
    );
    let offline =
        parse_manifests(&agent(json!({"approval": {"commands": ["git (push"]}})).to_string())
            .unwrap_err()
            .to_string();
    assert!(
        offline.contains(&format!(
            "spec.approval.commands: {COMMAND_REGEXES_MESSAGE}"
        )),
        "{offline}"
    );
    assert_valid(&agent(
        json!({"approval": {"tools": ["bash"], "commands": ["kubectl"]}}),
    ));
}
