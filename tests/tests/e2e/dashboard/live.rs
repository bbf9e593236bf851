//! The dashboard on live Runs (the in-process operator, Pods on the node or `local-kubelet`, a
//! scripted model): a fan-out's page grows its tree without a reload, a question answered
//! through the form resumes its Run, and the cancel button cancels one.

use std::time::Duration;

use anyhow::ensure;
use fantoccini::Locator;
use herd_crds::run::RunPhase;
use herd_e2e::TestEnv;
use herd_e2e::wait::wait_for;
use kubectl_herd::connect::Cluster;
use serde_json::json;

use super::browser::Browser;
use super::pages::answer_with;
use crate::kubectl_herd::script::{BOTH, PAINTED, QUESTION, ask_script, fan_out_script};
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

/// From a Run's creation to its end, Pods included.
const LIVE_TIME: Duration = Duration::from_secs(180);

/// Rows of the Run page's tree.
async fn tree_rows(browser: &Browser) -> anyhow::Result<usize> {
    Ok(browser
        .client
        .find_all(Locator::Css("#tree tbody tr"))
        .await?
        .len())
}

fn dashboard_cluster(env: &TestEnv) -> Cluster {
    Cluster {
        client: env.client(),
        namespace: env.namespace().to_owned(),
    }
}

pub async fn a_fan_out_s_tree_grows_live(env: TestEnv) -> anyhow::Result<()> {
    let test = "dashboard::a_fan_out_s_tree_grows_live";
    let Some(browser) = Browser::start(test).await? else {
        return Ok(());
    };
    let agent = scripted_agent(json!({
        "subagents": {"enabled": true, "maxConcurrent": 2, "maxTotal": 2},
    }));
    let mut scenario = Scenario::start(&env, agent).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &fan_out_script()).await?;
    let dashboard = kubectl_herd::dashboard::start(dashboard_cluster(&env), false, 0).await?;
    browser.client.goto(&dashboard.url).await?;

    scenario.create_run("notes", "Write two notes.").await?;
    let page = format!(
        "http://127.0.0.1:{}/runs/{}/notes",
        dashboard.port,
        env.namespace()
    );
    browser.client.goto(&page).await?;
    browser.until_text("Run notes", LIVE_TIME).await?;
    ensure!(tree_rows(&browser).await? == 1, "no child yet");
    // A mark on the page's window: a reload would lose it.
    browser
        .client
        .execute("window.herdMark = 'kept'; return true;", vec![])
        .await?;
    wait_for("the children in the tree", LIVE_TIME, || async {
        Ok((tree_rows(&browser).await? == 3).then_some(()))
    })
    .await?;
    let mark = browser
        .client
        .execute("return window.herdMark || null;", vec![])
        .await?;
    let text = browser.text().await?;
    ensure!(mark == "kept", "the children came without a reload: {text}");
    ensure!(text.contains("└─ notes-"), "the tree's branches: {text}");
    browser.screenshot("run-fan-out").await?;

    scenario.finished("notes", LIVE_TIME).await?;
    let done = browser.until_text(BOTH, LIVE_TIME).await?;
    ensure!(
        done.contains("Succeeded"),
        "the finished Run reloads with its result: {done}"
    );
    browser.screenshot("run-fan-out-done").await?;
    dashboard.stop();
    browser.close().await
}

pub async fn the_form_answers_and_the_button_cancels(env: TestEnv) -> anyhow::Result<()> {
    let test = "dashboard::the_form_answers_and_the_button_cancels";
    let Some(browser) = Browser::start(test).await? else {
        return Ok(());
    };
    let mut scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &ask_script()).await?;
    let dashboard = kubectl_herd::dashboard::start(dashboard_cluster(&env), false, 0).await?;
    browser.client.goto(&dashboard.url).await?;
    let page = |name: &str| {
        format!(
            "http://127.0.0.1:{}/runs/{}/{name}",
            dashboard.port,
            env.namespace()
        )
    };

    scenario.create_run("fence", "Paint the fence.").await?;
    browser.client.goto(&page("fence")).await?;
    // The question appears live, then the form answers it.
    browser.until_text(QUESTION, LIVE_TIME).await?;
    browser.screenshot("run-question").await?;
    answer_with(&browser, "teal").await?;
    browser
        .until_text("Answered: the Run resumes", LIVE_TIME)
        .await?;
    let run = scenario.finished("fence", LIVE_TIME).await?;
    ensure!(
        kubectl_herd::view::view(&run).phase == RunPhase::Succeeded,
        "answered through the form, the Run resumed and answered"
    );
    let done = browser.until_text(PAINTED, LIVE_TIME).await?;
    ensure!(done.contains("Succeeded"), "{done}");

    scenario.create_run("shed", "Paint the shed.").await?;
    browser.client.goto(&page("shed")).await?;
    browser.until_text(QUESTION, LIVE_TIME).await?;
    browser.click("form.cancel button").await?;
    browser.until_text("Cancel requested", LIVE_TIME).await?;
    let cancelled = scenario
        .until("shed", "be cancelled", LIVE_TIME, |run| {
            kubectl_herd::view::view(run).phase == RunPhase::Cancelled
        })
        .await?;
    ensure!(cancelled.spec.cancel, "spec.cancel is set");
    browser.until_text("Cancelled", LIVE_TIME).await?;
    browser.screenshot("run-cancelled").await?;
    dashboard.stop();
    browser.close().await
}
