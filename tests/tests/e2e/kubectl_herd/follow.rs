//! `kubectl herd run --follow` from the Run's creation to its answer, with a file given by
//! `-f` and plan mode; then `kubectl herd result -o DIR` writes the file the agent presented.

use anyhow::{Context, ensure};
use herd_e2e::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::json;

use super::{Ran, kubectl_herd};
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

/// What the `-f` file says; the agent's answer depends on having read it.
const BRIEF: &str = "Scope: Europe only.";
/// The answer when the agent read the brief.
const ANSWER: &str = "Summary written for Europe.";
/// The file the agent presents.
const SUMMARY: &str = "# Summary\nEurope only.\n";

/// Plan mode: the lead writes its todos, reads the uploaded brief, writes and presents the
/// summary, closes its todos and answers.
fn script() -> String {
    let todos = |read: &str, write: &str| {
        json!({"name": "write_todos", "arguments": {"todos": [
            {"content": "Read the brief", "status": read},
            {"content": "Write the summary", "status": write}]}})
    };
    json!({"rules": [
        {"match": {"purpose": "title"}, "respond": {"content": "A summary"}},
        {"match": {"role": "lead", "call": 1},
            "respond": {"toolCalls": [todos("in_progress", "pending")]}},
        {"match": {"role": "lead", "call": 2}, "respond": {"toolCalls": [{"name": "read_file",
            "arguments": {"description": "Read the brief", "path": "/mnt/user-data/uploads/brief.md"}}]}},
        {"match": {"role": "lead", "call": 3, "lastMessage": {"role": "tool", "contains": BRIEF}},
            "respond": {"toolCalls": [{"name": "write_file", "arguments": {
                "description": "Write the summary",
                "path": "/mnt/user-data/outputs/report/summary.md", "content": SUMMARY}}]}},
        {"match": {"role": "lead", "call": 3}, "respond": {"content": "The brief was not there."}},
        {"match": {"role": "lead", "call": 4}, "respond": {"toolCalls": [{"name": "present_files",
            "arguments": {"filepaths": ["/mnt/user-data/outputs/report/summary.md"]}}]}},
        {"match": {"role": "lead", "call": 5},
            "respond": {"toolCalls": [todos("completed", "completed")]}},
        {"match": {"role": "lead", "call": 6},
            "respond": {"content": ANSWER, "usage": {"inputTokens": 500, "outputTokens": 7}}},
    ]})
    .to_string()
}

/// `run --follow --plan --input brief.md` shows the Run until it answers and exits 0 with the answer
/// on stdout; the ConfigMap of the file is the Run's; `result -o` writes the presented file.
pub async fn run_follow_shows_the_run_until_its_answer_and_result_writes_its_files(
    env: TestEnv,
) -> anyhow::Result<()> {
    let scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &script()).await?;
    let dir = tempfile::tempdir()?;
    let brief = dir.path().join("brief.md");
    std::fs::write(&brief, BRIEF)?;
    let brief = brief.display().to_string();
    // `--follow` or `--wait`: the same Run, shown as it goes or only at its end.
    let run_brief = |watching: &'static str| {
        let args = [
            "run",
            "helper",
            "Summarize the brief.",
            "--plan",
            "--input",
            brief.as_str(),
            watching,
        ];
        let env = &env;
        async move { kubectl_herd(env, &args).await }
    };

    let ran = run_brief("--follow").await?.expect_code(0)?;
    ensure!(
        ran.stdout == format!("{ANSWER}\n"),
        "the answer on stdout: {ran:?}"
    );
    let name = ran.created()?;
    ensure!(
        name.starts_with("helper-") && name.len() == "helper-".len() + 5,
        "{name}"
    );
    for shown in ["Succeeded · ", "tokens in", "1 file presented", "todos:"] {
        ensure!(
            ran.stderr.contains(shown),
            "{shown:?} in the progress:\n{}",
            ran.stderr
        );
    }

    let run = scenario.runs().get(&name).await?;
    let inputs = run
        .spec
        .inputs
        .first()
        .context("the Run takes the files as inputs")?;
    let config_maps: Api<ConfigMap> = Api::namespaced(scenario.admin.clone(), &scenario.namespace);
    let uploaded = config_maps.get(&inputs.config_map_ref.name).await?;
    ensure!(
        uploaded
            .data
            .as_ref()
            .and_then(|d| d.get("brief.md"))
            .map(String::as_str)
            == Some(BRIEF),
        "{uploaded:?}"
    );
    ensure!(
        uploaded
            .owner_references()
            .iter()
            .any(|o| o.kind == "Run" && Some(&o.uid) == run.uid().as_ref()),
        "the Run owns the ConfigMap of its files: {:?}",
        uploaded.owner_references()
    );

    let out = dir.path().join("out");
    let out_arg = out.display().to_string();
    let result = kubectl_herd(&env, &["result", &name, "-o", &out_arg])
        .await?
        .expect_code(0)?;
    ensure!(result.stdout == format!("{ANSWER}\n"), "{result:?}");
    let written = std::fs::read_to_string(out.join("report/summary.md"))
        .with_context(|| format!("the presented file under {out_arg}: {result:?}"))?;
    ensure!(written == SUMMARY, "{written:?}");
    ensure!(result.stderr.contains("report/summary.md ("), "{result:?}");

    let again: Ran = kubectl_herd(&env, &["follow", &name])
        .await?
        .expect_code(0)?;
    ensure!(
        again.stdout == format!("{ANSWER}\n"),
        "following a finished Run prints its answer: {again:?}"
    );

    let waited = run_brief("--wait").await?.expect_code(0)?;
    ensure!(waited.stdout == format!("{ANSWER}\n"), "{waited:?}");
    ensure!(
        !waited.stderr.contains("todos:") && waited.stderr.contains("Succeeded · "),
        "--wait shows no progress, only the end:\n{}",
        waited.stderr
    );
    Ok(())
}
