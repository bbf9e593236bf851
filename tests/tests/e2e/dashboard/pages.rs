//! The dashboard on the API server alone, on Runs, Agents and Skills whose status the test
//! writes: the token and Host checks, the Runs list, a finished Run's sanitized result and its
//! files, the catalog pages, the answer form's patch, and a user whose RBAC forbids patching
//! Runs who sees the API server's refusal on the form.

use std::time::Duration;

use anyhow::{Context, ensure};
use fantoccini::Locator;
use herd_crds::run::Run;
use herd_e2e::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use kubectl_herd::connect::Cluster;
use serde_json::json;

use super::browser::Browser;
use crate::kubectl_herd::fixtures::{
    LONG_AGO, create_agent, create_run, create_skill, runs, set_agent_ready, set_run_status,
};

/// The test's name, for its SKIPPED line.
const TEST: &str = "dashboard::pages_need_the_token_and_show_refusals_as_the_api_server_said";
/// How long a page may take to show what the API server holds.
const SHOWN: Duration = Duration::from_secs(30);

/// The answer of the finished Run: Markdown with what must not survive.
const ANSWER: &str = "# Vendor memo\n\nThe **three** vendors compared.\n\n\
                      <script>document.title = 'owned'</script>\n\n\
                      ![the chart](https://tracker.invalid/pixel.png)\n";

/// `waiting` asks a question; `memo` has finished with a Markdown answer and a file; `fan`
/// has two children.
async fn fixtures(env: &TestEnv) -> anyhow::Result<()> {
    create_agent(env, "helper", &["web"]).await?;
    set_agent_ready(env, "helper", true, "Ready", "").await?;
    create_agent(env, "writer", &["missing-skill"]).await?;
    set_agent_ready(
        env,
        "writer",
        false,
        "SkillNotFound",
        "Skill missing-skill not found",
    )
    .await?;
    create_skill(env, "web", "Searches the web.").await?;

    let fan = create_run(
        env,
        "fan",
        "helper",
        None,
        json!({"herd.dev/user": "alice"}),
    )
    .await?;
    set_run_status(
        env,
        "fan",
        "Unknown",
        "Running",
        json!({"podName": "fan-1", "startTime": LONG_AGO, "children": [
            {"name": "fan-a", "state": "Succeeded"}, {"name": "fan-b", "state": "Running"}],
            "report": {"attempt": 1, "seq": 3, "title": "Two notes",
                "todos": [{"content": "Delegate", "status": "completed"},
                          {"content": "Merge", "status": "in_progress"}],
                "usage": {"inputTokens": 1500, "outputTokens": 90, "modelCalls": 2,
                          "toolCalls": 2}}}),
    )
    .await?;
    create_run(env, "fan-a", "helper", Some(&fan), json!({})).await?;
    set_run_status(env, "fan-a", "True", "Succeeded", json!({})).await?;
    create_run(env, "fan-b", "helper", Some(&fan), json!({})).await?;

    create_run(env, "waiting", "helper", None, json!({})).await?;
    set_run_status(
        env,
        "waiting",
        "Unknown",
        "WaitingForInput",
        json!({"phase": "InputRequired", "report": {"attempt": 1, "seq": 2,
            "stopReason": "inputRequired",
            "clarification": {"id": "q-1", "question": "Which colour?", "type": "missing_info",
                "options": ["teal", "red"]}}}),
    )
    .await?;

    let memo = create_run(env, "memo", "writer", None, json!({})).await?;
    set_run_status(
        env,
        "memo",
        "True",
        "Succeeded",
        json!({"phase": "Succeeded", "completionTime": LONG_AGO, "report": {"attempt": 1,
            "seq": 4, "stopReason": "completed", "result": {"text": "Vendor memo"}}}),
    )
    .await?;
    let result: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "memo-result", "ownerReferences": [{"apiVersion": "herd.dev/v1alpha1",
            "kind": "Run", "name": "memo", "uid": memo.uid().context("memo's uid")?}]},
        "data": {"answer.md": ANSWER, "files.json":
            "[{\"key\":\"f0\",\"path\":\"/mnt/user-data/outputs/memo.csv\",\"size\":6}]"},
        "binaryData": {"f0": "YSxiCjEsMgo="},
    }))?;
    Api::<ConfigMap>::namespaced(env.client(), env.namespace())
        .create(&PostParams::default(), &result)
        .await?;
    Ok(())
}

/// A client for the ServiceAccount `viewer`, which may read Runs (and what their pages show)
/// but not patch them: admin credentials impersonating it.
async fn viewer(env: &TestEnv) -> anyhow::Result<Client> {
    let namespace = env.namespace();
    let admin = env.client();
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "viewer"}}))?;
    Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &account)
        .await?;
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "run-viewer"},
        "rules": [
            {"apiGroups": ["herd.dev"], "resources": ["runs", "agents", "skills", "schedules"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["events", "configmaps", "pods", "pods/log"],
             "verbs": ["get", "list", "watch"]},
        ],
    }))?;
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "run-viewer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "run-viewer"},
        "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": namespace}],
    }))?;
    Api::<RoleBinding>::namespaced(admin, namespace)
        .create(&PostParams::default(), &binding)
        .await?;
    let file = kube::config::Kubeconfig::read_from(env.cluster().kubeconfig())?;
    let mut config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await?;
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{namespace}:viewer"));
    Ok(Client::try_from(config)?)
}

/// A plain HTTP GET of the dashboard with `host` as its Host header; status and body.
async fn get(port: u16, path: &str, host: &str) -> anyhow::Result<(u16, String)> {
    let client = reqwest::Client::new();
    let response = client
        .get(format!("http://127.0.0.1:{port}{path}"))
        .header("Host", host)
        .send()
        .await?;
    Ok((response.status().as_u16(), response.text().await?))
}

pub async fn pages_need_the_token_and_show_refusals_as_the_api_server_said(
    env: TestEnv,
) -> anyhow::Result<()> {
    let Some(browser) = Browser::start(TEST).await? else {
        return Ok(());
    };
    fixtures(&env).await?;
    let cluster = Cluster {
        client: env.client(),
        namespace: env.namespace().to_owned(),
    };
    let dashboard = kubectl_herd::dashboard::start(cluster, false, 0).await?;
    let port = dashboard.port;
    let own = format!("127.0.0.1:{port}");

    let (status, body) = get(port, "/runs", &own).await?;
    ensure!(
        status == 401 && body.contains("open the URL"),
        "no token: {status} {body}"
    );
    let first = dashboard.url.replace(&format!("http://{own}"), "");
    let (status, body) = get(port, &first, &format!("evil.example:{port}")).await?;
    ensure!(
        status == 403 && body.contains("Host"),
        "a rebound name is refused even with the token: {status} {body}"
    );
    browser.client.goto(&format!("http://{own}/runs")).await?;
    let refused = browser.text().await?;
    ensure!(
        refused.contains("refused: open the URL"),
        "a page without the token is refused: {refused}"
    );

    browser.client.goto(&dashboard.url).await?;
    let listed = browser.until_text("fan-b", SHOWN).await?;
    let address = browser.client.current_url().await?;
    ensure!(
        address.path() == "/runs" && address.query().is_none(),
        "the token leaves the address bar: {address}"
    );
    for expected in [
        "NAME",
        "AGENT",
        "STATUS",
        "TOKENS",
        "Two notes",
        "├─ fan-a",
        "└─ fan-b",
        "Waiting for answer",
        "memo",
    ] {
        ensure!(
            listed.contains(expected),
            "{expected:?} in the Runs page:\n{listed}"
        );
    }
    browser.screenshot("runs").await?;

    browser
        .client
        .goto(&format!("http://{own}/runs?agent=writer"))
        .await?;
    let filtered = browser.until_text("1 Run", SHOWN).await?;
    ensure!(
        filtered.contains("memo") && !filtered.contains("fan-b"),
        "the Agent filter: {filtered}"
    );

    browser
        .client
        .goto(&format!("http://{own}/runs/{}/memo", env.namespace()))
        .await?;
    let memo = browser.until_text("Vendor memo", SHOWN).await?;
    ensure!(
        memo.contains("[image: the chart]"),
        "the image is a link: {memo}"
    );
    let title = browser.client.title().await?;
    ensure!(title != "owned", "the answer's script did not run");
    let markup = browser
        .client
        .find(Locator::Css("article.markdown"))
        .await?
        .html(true)
        .await?;
    ensure!(
        markup.contains("<h1>Vendor memo</h1>")
            && !markup.contains("<script")
            && !markup.contains("<img"),
        "rendered and sanitized: {markup}"
    );
    let file = browser.client.find(Locator::LinkText("memo.csv")).await?;
    let href = file.attr("href").await?.context("the file's link")?;
    ensure!(
        href.ends_with("/memo/files/0"),
        "the file's download: {href}"
    );
    browser.screenshot("run-result").await?;

    browser.client.goto(&format!("http://{own}/agents")).await?;
    let agents = browser.until_text("writer", SHOWN).await?;
    ensure!(
        agents.contains("Skill missing-skill not found") && agents.contains("SkillNotFound"),
        "what the Agent misses: {agents}"
    );
    browser.screenshot("agents").await?;
    browser.client.goto(&format!("http://{own}/skills")).await?;
    browser.until_text("Searches the web.", SHOWN).await?;
    for kind in ["schedules", "budgets"] {
        browser.client.goto(&format!("http://{own}/{kind}")).await?;
        browser.until_text("None in namespace", SHOWN).await?;
    }

    // A user who may read but not patch Runs: the form's answer is the API server's 403.
    let restricted = kubectl_herd::dashboard::start(
        Cluster {
            client: viewer(&env).await?,
            namespace: env.namespace().to_owned(),
        },
        false,
        0,
    )
    .await?;
    browser.client.goto(&restricted.url).await?;
    browser.until_text("waiting", SHOWN).await?;
    browser
        .client
        .goto(&format!(
            "http://127.0.0.1:{}/runs/{}/waiting",
            restricted.port,
            env.namespace()
        ))
        .await?;
    browser.until_text("Which colour?", SHOWN).await?;
    answer_with(&browser, "teal").await?;
    let refused = browser.until_text("cannot patch resource", SHOWN).await?;
    ensure!(
        refused.contains(&format!(
            "User \"system:serviceaccount:{}:viewer\" cannot patch resource \"runs\"",
            env.namespace()
        )),
        "the API server's refusal, as it said it: {refused}"
    );
    browser.screenshot("answer-forbidden").await?;
    let unchanged = runs(&env).get("waiting").await?;
    ensure!(unchanged.spec.responses.is_empty(), "nothing was written");

    // The same form as the Run's owner writes the answer `kubectl herd answer` writes.
    browser
        .client
        .goto(&format!("http://{own}/runs/{}/waiting", env.namespace()))
        .await?;
    browser.until_text("Which colour?", SHOWN).await?;
    answer_with(&browser, "teal").await?;
    browser
        .until_text("Answered: the Run resumes", SHOWN)
        .await?;
    let answered: Run = runs(&env).get("waiting").await?;
    let given = serde_json::to_value(&answered.spec.responses)?;
    ensure!(
        given == json!([{"id": "q-1", "answer": "teal"}]),
        "the answer's patch: {given}"
    );

    restricted.stop();
    dashboard.stop();
    browser.close().await
}

/// Types `text` into the question's form and sends it.
pub async fn answer_with(browser: &Browser, text: &str) -> anyhow::Result<()> {
    browser.type_into("#answer-text", text).await?;
    browser
        .click("form[action$='/answer'] > button[type=submit]")
        .await
}
