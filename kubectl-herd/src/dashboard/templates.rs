//! The dashboard's templates and assets, embedded in the binary (nothing is read from disk or
//! fetched from elsewhere); HTML is escaped by default (the templates end in `.html`).

use minijinja::{Environment, Value, context};

/// Each template's name and text.
const TEMPLATES: [(&str, &str); 15] = [
    (
        "base.html",
        include_str!("../../templates/dashboard/base.html"),
    ),
    (
        "runs.html",
        include_str!("../../templates/dashboard/runs.html"),
    ),
    (
        "runs_table.html",
        include_str!("../../templates/dashboard/runs_table.html"),
    ),
    (
        "run.html",
        include_str!("../../templates/dashboard/run.html"),
    ),
    (
        "run_summary.html",
        include_str!("../../templates/dashboard/run_summary.html"),
    ),
    (
        "run_question.html",
        include_str!("../../templates/dashboard/run_question.html"),
    ),
    (
        "run_tree.html",
        include_str!("../../templates/dashboard/run_tree.html"),
    ),
    (
        "run_progress.html",
        include_str!("../../templates/dashboard/run_progress.html"),
    ),
    (
        "run_conditions.html",
        include_str!("../../templates/dashboard/run_conditions.html"),
    ),
    (
        "conditions.html",
        include_str!("../../templates/dashboard/conditions.html"),
    ),
    (
        "row.html",
        include_str!("../../templates/dashboard/row.html"),
    ),
    (
        "catalog.html",
        include_str!("../../templates/dashboard/catalog.html"),
    ),
    (
        "catalog_table.html",
        include_str!("../../templates/dashboard/catalog_table.html"),
    ),
    (
        "problem.html",
        include_str!("../../templates/dashboard/problem.html"),
    ),
    (
        "gone.html",
        include_str!("../../templates/dashboard/gone.html"),
    ),
];

/// The stylesheet.
pub const CSS: &str = include_str!("../../assets/dashboard/dashboard.css");
/// The script: live regions, local times, the logs' tail.
pub const JS: &str = include_str!("../../assets/dashboard/dashboard.js");

/// The environment with every template.
pub fn environment() -> Result<Environment<'static>, minijinja::Error> {
    let mut environment = Environment::new();
    environment.set_undefined_behavior(minijinja::UndefinedBehavior::SemiStrict);
    // Block tags leave no blank lines: smaller pages, readable goldens.
    environment.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()?,
    );
    for (name, text) in TEMPLATES {
        environment.add_template(name, text)?;
    }
    Ok(environment)
}

/// What every page is rendered with besides its own data.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// The navigation entry of the page (`runs`, `agents`…).
    pub nav: &'a str,
    /// The URL of its live regions (empty: not live).
    pub live: &'a str,
    /// `namespace x` or `all namespaces`.
    pub scope: &'a str,
    /// Whether the dashboard shows every namespace.
    pub all_namespaces: bool,
}

/// `template` rendered with `page` in `frame`.
pub fn render(
    environment: &Environment<'_>,
    template: &str,
    frame: Frame<'_>,
    page: Value,
) -> Result<String, minijinja::Error> {
    let all = context! {
        page => page,
        nav => frame.nav,
        live => frame.live,
        scope => frame.scope,
        all_namespaces => frame.all_namespaces,
    };
    environment.get_template(template)?.render(all)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herd_crds::condition::ConditionStatus;
    use minijinja::value::Serde;

    use super::*;
    use crate::dashboard::catalog_page::CatalogPage;
    use crate::dashboard::run_page::{Extras, FileRow, ResultView, run_page};
    use crate::dashboard::runs_page::{RunsQuery, runs_page};
    use crate::testing::{at, question_run, run_named, run_with};

    fn frame(nav: &'static str) -> Frame<'static> {
        Frame {
            nav,
            live: "/live/x",
            scope: "namespace team",
            all_namespaces: false,
        }
    }

    fn in_team(mut run: herd_crds::run::Run) -> Arc<herd_crds::run::Run> {
        run.metadata.namespace = Some("team".into());
        Arc::new(run)
    }

    #[test]
    fn the_runs_page() {
        let mut done = run_with(Some((ConditionStatus::True, "Succeeded")), None, None);
        done.metadata.name = Some("done <b>".into());
        let runs = vec![in_team(question_run("q1", &[])), in_team(done)];
        let page = runs_page(&runs, &RunsQuery::default(), false, at(90).0).unwrap();
        let html = render(
            &environment().unwrap(),
            "runs.html",
            frame("runs"),
            Value::from(Serde(page)),
        );
        insta::assert_snapshot!(html.unwrap());
    }

    #[test]
    fn a_waiting_run_s_page() {
        let mut run = question_run("q1", &[]);
        if let Some(status) = run.status.as_mut() {
            status.pod_name = Some("r-1".into());
        }
        let run = in_team(run);
        let page = run_page(&run, std::slice::from_ref(&run), at(90).0);
        let extras = Extras {
            result: Some(Ok(ResultView {
                html: "<p>ok</p>".into(),
                cut: false,
                files: Ok(vec![FileRow {
                    index: 0,
                    path: "a.csv".into(),
                    size: 3,
                }]),
            })),
            events: Some(Err("403 Forbidden: events is forbidden".into())),
        };
        let page = context! { extras => Value::from(Serde(extras)), notice => (), ..Value::from(Serde(page)) };
        let html = render(&environment().unwrap(), "run.html", frame("runs"), page);
        insta::assert_snapshot!(html.unwrap());
    }

    #[test]
    fn priced_usage_by_model_and_with_children() {
        let mut run = question_run("q1", &[]);
        if let Some(report) = run.status.as_mut().and_then(|s| s.report.as_mut()) {
            report.usage = serde_json::from_value(serde_json::json!({
                "inputTokens": 1200, "outputTokens": 30, "cachedInputTokens": 200,
                "modelCalls": 2, "toolCalls": 1,
                "cost": {"currency": "USD", "micros": 4210},
                "byModel": [{"model": "small", "inputTokens": 1200, "outputTokens": 30,
                             "modelCalls": 2}],
                "withChildren": {"inputTokens": 5000, "outputTokens": 90, "modelCalls": 6,
                                 "toolCalls": 3, "cost": {"currency": "USD", "micros": 12000}},
            }))
            .unwrap();
        }
        let run = in_team(run);
        let page = run_page(&run, std::slice::from_ref(&run), at(90).0);
        let html = render(
            &environment().unwrap(),
            "run_progress.html",
            frame("runs"),
            Value::from(Serde(page)),
        );
        insta::assert_snapshot!(html.unwrap());
    }

    #[test]
    fn a_held_tool_call_s_form() {
        let mut run = run_with(Some((ConditionStatus::Unknown, "Running")), None, None);
        if let Some(report) = run.status.as_mut().and_then(|s| s.report.as_mut()) {
            report.approvals = serde_json::from_value(serde_json::json!([{
                "id": "r-call_1", "tool": "bash", "callId": "call_1",
                "arguments": "{\"command\":\"rm -rf build/ <now>\"}",
            }]))
            .unwrap();
        }
        let run = in_team(run);
        let page = run_page(&run, std::slice::from_ref(&run), at(90).0);
        assert_eq!(page.approvals.len(), 1);
        let html = render(
            &environment().unwrap(),
            "run_question.html",
            frame("runs"),
            Value::from(Serde(page)),
        );
        insta::assert_snapshot!(html.unwrap());
    }

    #[test]
    fn a_refusal_is_the_page() {
        let page = context! { problem => "403 Forbidden: runs.herd.dev is forbidden" };
        let html = render(&environment().unwrap(), "runs.html", frame("runs"), page).unwrap();
        assert!(
            html.contains(
                "<p class=\"problem\" role=\"alert\">403 Forbidden: runs.herd.dev is forbidden</p>"
            ),
            "{html}"
        );
        let empty = CatalogPage {
            title: "Agents",
            header: vec!["NAME"],
            items: vec![],
        };
        let html = render(
            &environment().unwrap(),
            "catalog.html",
            frame("agents"),
            Value::from(Serde(empty)),
        )
        .unwrap();
        assert!(html.contains("None in namespace team."), "{html}");
        let _ = run_named("unused");
    }
}
