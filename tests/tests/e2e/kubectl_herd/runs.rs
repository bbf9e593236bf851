//! `kubectl herd run`'s options, `--dry-run`, `-o`, `-f MANIFEST` and the Agent check, against
//! the real API server without an operator: what lands in the stored Run is read back.

use std::time::Duration;

use anyhow::ensure;
use herd_crds::run::Run;
use herd_e2e::TestEnv;
use herd_e2e::wait::wait_for;
use kube::ResourceExt;
use serde_json::json;

use super::fixtures::{create_agent, runs, set_agent_ready, set_run_status};
use super::kubectl_herd;

/// How long the Run of `run --wait` may take to appear.
const WAIT: Duration = Duration::from_secs(30);

/// Every option that shapes the Run.
const OPTIONS: [&str; 12] = [
    "--model",
    "big",
    "--thinking",
    "--plan",
    "--timeout",
    "30m",
    "--input-timeout",
    "2h",
    "--ttl",
    "1h",
    "-l",
    "herd.dev/user=alice",
];

/// Checks that `run` carries [`OPTIONS`].
fn has_the_options(run: &Run) -> anyhow::Result<()> {
    let spec = serde_json::to_value(&run.spec)?;
    ensure!(
        spec == json!({"agentRef": {"name": "helper"}, "task": "Go.", "planMode": true,
            "thinking": true, "model": {"name": "big"}, "timeout": "30m", "inputTimeout": "2h",
            "ttlSecondsAfterFinished": 3600, "responses": [], "cancel": false}),
        "{spec}"
    );
    ensure!(
        run.labels().get("herd.dev/user").map(String::as_str) == Some("alice"),
        "{run:?}"
    );
    Ok(())
}

fn with_options<'a>(head: &[&'a str], tail: &[&'a str]) -> Vec<&'a str> {
    let options = OPTIONS.iter().copied();
    head.iter()
        .copied()
        .chain(options)
        .chain(tail.iter().copied())
        .collect()
}

pub async fn run_options_land_in_the_run_and_dry_run_creates_nothing(
    env: TestEnv,
) -> anyhow::Result<()> {
    create_agent(&env, "helper", &[]).await?;
    let api = runs(&env);

    let args = with_options(&["run", "helper", "Go."], &["--dry-run", "-o", "yaml"]);
    let client = kubectl_herd(&env, &args).await?.expect_code(0)?;
    let printed: Run = serde_saphyr::from_str(&client.stdout)?;
    has_the_options(&printed)?;
    ensure!(
        printed.metadata.generate_name.as_deref() == Some("helper-"),
        "{client:?}"
    );

    let args = with_options(
        &["run", "helper", "Go."],
        &["--dry-run=server", "-o", "json"],
    );
    let server = kubectl_herd(&env, &args).await?.expect_code(0)?;
    let checked: Run = serde_json::from_str(&server.stdout)?;
    has_the_options(&checked)?;
    ensure!(
        checked.name_any().starts_with("helper-"),
        "the server names it: {server:?}"
    );
    ensure!(
        api.list(&Default::default()).await?.items.is_empty(),
        "a dry run creates nothing"
    );

    let args = with_options(&["run", "helper", "Go."], &["--name", "mine", "-o", "json"]);
    let created = kubectl_herd(&env, &args).await?.expect_code(0)?;
    let printed: Run = serde_json::from_str(&created.stdout)?;
    let stored = api.get("mine").await?;
    has_the_options(&stored)?;
    ensure!(
        printed.spec == stored.spec && printed.uid() == stored.uid(),
        "{created:?}"
    );

    let nightly = kubectl_herd(
        &env,
        &[
            "run",
            "helper",
            "Go.",
            "--generate-name",
            "nightly-",
            "-o",
            "name",
        ],
    )
    .await?
    .expect_code(0)?;
    ensure!(
        nightly.stdout.starts_with("run.herd.dev/nightly-"),
        "{nightly:?}"
    );

    let dir = tempfile::tempdir()?;
    let yaml = dir.path().join("run.yaml");
    std::fs::write(
        &yaml,
        "apiVersion: herd.dev/v1alpha1\nkind: Run\nmetadata:\n  generateName: from-file-\n  \
         labels:\n    herd.dev/user: bob\nspec:\n  agentRef:\n    name: helper\n  task: From a \
         file.\n",
    )?;
    let from_yaml = kubectl_herd(&env, &["run", "-f", &yaml.display().to_string()])
        .await?
        .expect_code(0)?;
    let name = from_yaml.stdout.trim().to_owned();
    let stored = api.get(&name).await?;
    ensure!(
        name.starts_with("from-file-")
            && stored.spec.task == "From a file."
            && stored.labels()["herd.dev/user"] == "bob",
        "{from_yaml:?}"
    );
    // Creation times have a resolution of a second: `from-json` is the newest, for --last.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let json_file = dir.path().join("run.json");
    std::fs::write(
        &json_file,
        json!({"apiVersion": "herd.dev/v1alpha1", "kind": "Run", "metadata": {"name": "from-json"},
            "spec": {"agentRef": {"name": "helper"}, "task": "From JSON."}})
        .to_string(),
    )?;
    kubectl_herd(
        &env,
        &["run", "-f", &json_file.display().to_string(), "-o", "name"],
    )
    .await?
    .expect_code(0)?;
    ensure!(
        api.get("from-json").await?.spec.task == "From JSON.",
        "created from JSON"
    );
    let not_a_run = dir.path().join("agent.yaml");
    std::fs::write(
        &not_a_run,
        "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata:\n  name: a\n",
    )?;
    let refused = kubectl_herd(&env, &["run", "-f", &not_a_run.display().to_string()])
        .await?
        .expect_code(1)?;
    ensure!(
        refused.stderr.contains("not a Run of herd.dev/v1alpha1"),
        "{refused:?}"
    );

    let bad = kubectl_herd(&env, &["run", "helper", "Go.", "--timeout", "soon"])
        .await?
        .expect_code(2)?;
    ensure!(
        bad.stderr.contains("--timeout \"soon\" is not a duration"),
        "{bad:?}"
    );

    let cancelled = kubectl_herd(&env, &["cancel", "mine"])
        .await?
        .expect_code(0)?;
    ensure!(
        cancelled.stdout == "Run mine cancelled: it had no Pod yet\n",
        "a Run that never had a Pod: {cancelled:?}"
    );
    let newest = kubectl_herd(&env, &["cancel", "--last"])
        .await?
        .expect_code(0)?;
    ensure!(
        newest.stdout == "Run from-json cancelled: it had no Pod yet\n",
        "--last is the newest Run: {newest:?}"
    );
    Ok(())
}

pub async fn run_warns_of_an_agent_not_ready_and_wait_refuses_it(
    env: TestEnv,
) -> anyhow::Result<()> {
    create_agent(&env, "helper", &["notes"]).await?;
    set_agent_ready(
        &env,
        "helper",
        false,
        "SkillNotFound",
        "Skill notes not found",
    )
    .await?;
    let why = "Agent helper is not ready (SkillNotFound): Skill notes not found";

    let warned = kubectl_herd(&env, &["run", "helper", "Go."])
        .await?
        .expect_code(0)?;
    let lines: Vec<&str> = warned.stderr.lines().collect();
    ensure!(
        lines.first() == Some(&format!("warning: {why}; the Run waits until it is ready").as_str())
            && lines.get(1).is_some_and(|l| l.starts_with("Run helper-")),
        "the warning before the Run is created: {warned:?}"
    );
    let waited = kubectl_herd(&env, &["run", "helper", "Go.", "--wait"])
        .await?
        .expect_code(1)?;
    ensure!(
        waited.stderr.starts_with(&format!("error: {why}")),
        "{waited:?}"
    );
    let created = runs(&env).list(&Default::default()).await?.items;
    ensure!(
        created.len() == 1,
        "--wait created no Run for an Agent not ready: {created:?}"
    );
    // An Agent the operator has not judged yet passes the check; --wait still stops as soon
    // as the Run says it waits for its Agent.
    create_agent(&env, "late", &[]).await?;
    let operator = env.clone();
    let says_not_ready = tokio::spawn(async move {
        let api = runs(&operator);
        let run = wait_for("the Run of Agent late", WAIT, || {
            let api = api.clone();
            async move {
                let all = api.list(&Default::default()).await?.items;
                Ok(all.into_iter().find(|r| r.spec.agent_ref.name == "late"))
            }
        })
        .await?;
        set_run_status(
            &operator,
            &run.name_any(),
            "Unknown",
            "AgentNotReady",
            json!({}),
        )
        .await
    });
    let stopped = kubectl_herd(&env, &["run", "late", "Go.", "--wait"])
        .await?
        .expect_code(1)?;
    says_not_ready.await??;
    ensure!(
        stopped
            .stderr
            .contains("waits for its Agent (AgentNotReady)"),
        "{stopped:?}"
    );
    let missing = kubectl_herd(&env, &["run", "nobody", "Go."])
        .await?
        .expect_code(1)?;
    ensure!(
        missing.stderr.contains("Agent nobody not found"),
        "{missing:?}"
    );
    Ok(())
}
