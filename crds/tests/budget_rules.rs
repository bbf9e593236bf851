//! The Budget's CEL rules, one accepting and one rejecting case each, evaluated offline.

mod common;

use common::cel_create;
use herd_crds::budget::{Budget, parse_period};
use herd_crds::rules;
use serde_json::{Value, json};

fn budget(extra: Value) -> Value {
    let mut spec = json!({"window": {"period": "24h"}, "limits": {"tokens": 20000000}});
    common::merge_patch(&mut spec, &extra);
    json!({"apiVersion": "herd.dev/v1alpha1", "kind": "Budget", "metadata": {"name": "team-a"}, "spec": spec})
}

fn assert_rejected(errors: Vec<String>, path: &str, message: &str) {
    assert_eq!(errors, vec![format!("{path}: {message}")]);
}

#[test]
fn a_window_is_a_period_or_a_calendar_and_a_zone_goes_with_a_calendar() {
    assert_eq!(cel_create(&budget(json!({}))), Vec::<String>::new());
    let calendar = budget(
        json!({"window": {"period": null, "calendar": "Month", "timeZone": "Europe/Berlin"}}),
    );
    assert_eq!(cel_create(&calendar), Vec::<String>::new());
    for window in [
        json!({"period": "24h", "calendar": "Day"}),
        json!({"period": null}),
        json!({"period": "24h", "timeZone": "UTC"}),
    ] {
        assert_rejected(
            cel_create(&budget(json!({ "window": window }))),
            "spec.window",
            rules::BUDGET_WINDOW_ONE_MESSAGE,
        );
    }
    assert_rejected(
        cel_create(&budget(
            json!({"window": {"period": null, "calendar": "Day", "timeZone": "Europe/Berlin!"}}),
        )),
        "spec.window.timeZone",
        "\"Europe/Berlin!\" is not a time zone name such as Europe/Berlin, America/New_York or UTC",
    );
}

#[test]
fn periods_are_a_number_and_a_unit_from_10s_to_366d_as_the_operator_reads_them() {
    for good in ["24h", "7d", "30d", "10s", "90m", "366d"] {
        assert_eq!(
            cel_create(&budget(json!({"window": {"period": good}}))),
            Vec::<String>::new(),
            "{good}"
        );
        assert!(parse_period(good).is_some(), "{good}");
    }
    for bad in ["9s", "367d", "1w", "1h30m", "24", "1.5h"] {
        assert_rejected(
            cel_create(&budget(json!({"window": {"period": bad}}))),
            "spec.window.period",
            &format!(
                "\"{bad}\" is not a period: a number and one unit of s, m, h or d, such as 24h, 7d or 30d, from 10s to 366d"
            ),
        );
        assert!(parse_period(bad).is_none(), "{bad}");
    }
}

#[test]
fn at_least_one_limit() {
    for (limit, value) in [
        ("tokens", json!(5)),
        ("inputTokens", json!(5)),
        ("outputTokens", json!(5)),
        ("runs", json!(5)),
        ("cost", json!({"amount": "12.50", "currency": "EUR"})),
    ] {
        let mut limits = serde_json::Map::new();
        limits.insert(limit.to_owned(), value);
        let object = budget(json!({"limits": {"tokens": null}}));
        let mut object = object;
        object["spec"]["limits"] = Value::Object(limits);
        assert_eq!(cel_create(&object), Vec::<String>::new(), "{limit}");
    }
    assert_rejected(
        cel_create(&budget(json!({"limits": {"tokens": null}}))),
        "spec.limits",
        rules::BUDGET_SOME_LIMIT_MESSAGE,
    );
}

#[test]
fn selectors_name_agents_and_label_keys() {
    let good = budget(
        json!({"selector": {"agents": ["researcher", "coder.v2"], "runLabels": {"team": "a", "herd.dev/schedule": "nightly"}}}),
    );
    assert_eq!(cel_create(&good), Vec::<String>::new());
    assert_rejected(
        cel_create(&budget(
            json!({"selector": {"agents": ["researcher", "Bad_Name"]}}),
        )),
        "spec.selector.agents",
        "\"Bad_Name\" is not an Agent name: lowercase letters, digits, - and ., starting and ending with a letter or digit",
    );
    assert_rejected(
        cel_create(&budget(json!({"selector": {"runLabels": {"-team": "a"}}}))),
        "spec.selector.runLabels",
        rules::LABEL_KEYS_MESSAGE,
    );
}

#[test]
fn a_budget_reads_back_with_its_defaults() {
    let read: Budget = serde_json::from_value(budget(json!({}))).unwrap();
    assert_eq!(read.spec.on_exceeded, herd_crds::budget::OnExceeded::Queue);
    assert_eq!(read.spec.limits.tokens, Some(20_000_000));
    assert!(read.spec.selects("any", &Default::default()));
    let priced: Budget = serde_json::from_value(budget(
        json!({"limits": {"cost": {"amount": "12.5", "currency": "EUR"}}}),
    ))
    .unwrap();
    assert_eq!(priced.spec.limits.cost.unwrap().micros(), Some(12_500_000));
}

#[test]
fn the_examples_read_as_budgets_pass_cel_and_show_each_window() {
    let files = common::yaml_files(&common::repo_root().join("examples/budgets"));
    let mut windows = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let document = common::yaml(&text);
        assert_eq!(
            cel_create(&document),
            Vec::<String>::new(),
            "{}",
            path.display()
        );
        let budget: Budget =
            serde_json::from_value(document).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Some(period) = &budget.spec.window.period {
            assert!(parse_period(period).is_some(), "{}", path.display());
        }
        windows.push(budget.spec.window.describe());
    }
    windows.sort();
    assert_eq!(
        windows,
        [
            "24h",
            "Day Europe/Berlin",
            "Month UTC",
            "Week America/New_York"
        ],
        "a period and each calendar window"
    );
}
