//! The dashboard's Runs page with 5,000 Runs (1,000 fan-outs of a parent and four children),
//! filtered, built into a tree, paged and rendered to HTML, against serializing the same
//! Runs to JSON (what any list of them costs) in the same run. The target: under
//! 300 ms of server time; the ratio says how far from a plain serialization it is.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use herd_crds::condition::{Condition, ConditionStatus};
use herd_crds::report::{Todo, TodoStatus, Usage};
use herd_crds::run::{ParentRef, Run, RunReport, RunSpec, RunStatus, phase_of};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubectl_herd::dashboard::runs_page::{RunsQuery, runs_page};
use kubectl_herd::dashboard::templates::{Frame, environment, render};
use minijinja::Value;
use minijinja::value::Serde;

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn run(name: &str, parent: Option<&str>, second: i64, reason: &str) -> Run {
    let spec: RunSpec = serde_json::from_value(serde_json::json!({
        "agentRef": {"name": if parent.is_some() { "helper" } else { "researcher" }},
        "task": "Compare the five vendors and write a one-page memo.",
    }))
    .unwrap_or_else(|e| panic!("a valid spec: {e}"));
    let mut run = Run::new(name, spec);
    run.metadata.namespace = Some("team".into());
    run.metadata.uid = Some(format!("uid-{name}"));
    run.metadata.creation_timestamp = Some(at(second));
    run.spec.parent_ref = parent.map(|p| ParentRef {
        name: p.into(),
        tool_call_id: format!("call-{name}"),
    });
    let status = if reason == "Succeeded" {
        ConditionStatus::True
    } else {
        ConditionStatus::Unknown
    };
    let conditions = vec![Condition::new(
        "Succeeded",
        status,
        reason,
        format!("said {reason}"),
        None,
        at(second),
    )];
    run.status = Some(RunStatus {
        phase: Some(phase_of(&conditions)),
        conditions,
        start_time: Some(at(second + 1)),
        report: Some(RunReport {
            attempt: 1,
            seq: 7,
            title: Some(format!("Vendor memo {name}")),
            todos: vec![
                Todo {
                    content: "Read the vendors' pages".into(),
                    status: TodoStatus::Completed,
                },
                Todo {
                    content: "Write the memo".into(),
                    status: TodoStatus::InProgress,
                },
            ],
            usage: Usage {
                input_tokens: 12_000,
                output_tokens: 800,
                model_calls: 4,
                tool_calls: 6,
                ..Usage::default()
            },
            ..RunReport::default()
        }),
        ..RunStatus::default()
    });
    run
}

fn runs() -> Vec<Arc<Run>> {
    let mut runs = Vec::new();
    for family in 0..1_000 {
        let parent = format!("fan-{family:04}");
        let second = family * 10;
        runs.push(Arc::new(run(&parent, None, second, "Running")));
        for child in 0..4 {
            let name = format!("{parent}-{child}");
            let reason = if child % 2 == 0 {
                "Succeeded"
            } else {
                "Running"
            };
            runs.push(Arc::new(run(
                &name,
                Some(&parent),
                second + child + 1,
                reason,
            )));
        }
    }
    runs
}

fn bench(c: &mut Criterion) {
    let runs = runs();
    let templates = environment().unwrap_or_else(|e| panic!("templates: {e}"));
    let now = at(20_000).0;
    let frame = Frame {
        nav: "runs",
        live: "/live/runs",
        scope: "namespace team",
        all_namespaces: false,
    };
    let mut group = c.benchmark_group("runs_page_5000");
    group.sample_size(20);
    group.bench_function("baseline_serialize_json", |b| {
        b.iter(|| {
            serde_json::to_string(&runs)
                .map(|s| s.len())
                .unwrap_or_default()
        })
    });
    group.bench_function("dashboard_runs_page", |b| {
        b.iter(|| {
            let page = runs_page(&runs, &RunsQuery::default(), false, now)
                .unwrap_or_else(|e| panic!("{e}"));
            render(&templates, "runs.html", frame, Value::from(Serde(page)))
                .map(|html| html.len())
                .unwrap_or_default()
        })
    });
    group.bench_function("dashboard_runs_page_filtered", |b| {
        let query = RunsQuery {
            agent: "helper".into(),
            phase: "Succeeded".into(),
            ..RunsQuery::default()
        };
        b.iter(|| {
            let page = runs_page(&runs, &query, false, now).unwrap_or_else(|e| panic!("{e}"));
            render(&templates, "runs.html", frame, Value::from(Serde(page)))
                .map(|html| html.len())
                .unwrap_or_default()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
