//! `get`/`list` in every output format and selection, `get -w`, `describe` and `delete`,
//! against the real API server on Runs whose status the test writes (no operator): each
//! format is parsed back into typed Runs.

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::run::Run;
use herd_e2e::TestEnv;
use k8s_openapi::api::core::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use herd_e2e::wait::wait_for;

use super::fixtures::{LONG_AGO, create_run, runs, set_run_status};
use super::{kubectl_herd, kubectl_herd_until};

/// How long the garbage collector may take to delete a deleted parent's child.
const CHILD_GONE: Duration = Duration::from_secs(60);

/// `notes` (labelled `herd.dev/user=alice`, running) with its child `notes-a` (succeeded),
/// then `later` of Agent `writer` (pending), created in that order.
async fn family(env: &TestEnv) -> anyhow::Result<()> {
    let parent = create_run(
        env,
        "notes",
        "helper",
        None,
        json!({"herd.dev/user": "alice"}),
    )
    .await?;
    set_run_status(
        env,
        "notes",
        "Unknown",
        "Running",
        json!({"podName": "notes-1", "startTime": LONG_AGO, "report": {"attempt": 1, "seq": 1,
            "title": "Six notes", "usage": {"inputTokens": 1000, "outputTokens": 234,
            "modelCalls": 2, "toolCalls": 1}}}),
    )
    .await?;
    create_run(env, "notes-a", "helper", Some(&parent), json!({})).await?;
    set_run_status(env, "notes-a", "True", "Succeeded", json!({})).await?;
    // Creation times have a resolution of a second: `later` is the newest.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create_run(env, "later", "writer", None, json!({})).await?;
    Ok(())
}

/// The Runs of a `-o json` or `-o yaml` List.
fn items(list: &Value) -> anyhow::Result<Vec<Run>> {
    ensure!(list["kind"] == "List", "a List: {list}");
    let items = list["items"].as_array().context("items")?;
    items
        .iter()
        .map(|item| Ok(serde_json::from_value(item.clone())?))
        .collect()
}

fn names(runs: &[Run]) -> Vec<String> {
    runs.iter().map(ResourceExt::name_any).collect()
}

/// The first cells of a table's rows (the names, with the tree's branches).
fn first_cells(table: &str) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .map(|l| l.split("   ").next().unwrap_or_default().trim().to_owned())
        .collect()
}

pub async fn get_prints_every_format_and_selection(env: TestEnv) -> anyhow::Result<()> {
    family(&env).await?;
    let ns = env.namespace();

    let table = kubectl_herd(&env, &["get"]).await?.expect_code(0)?;
    let header = table.header();
    ensure!(
        header
            == [
                "NAME", "AGENT", "STATUS", "TITLE", "TOKENS", "DURATION", "AGE"
            ],
        "{table:?}"
    );
    ensure!(
        first_cells(&table.stdout) == ["notes", "└─ notes-a", "later"],
        "{table:?}"
    );
    let notes = table.stdout.lines().nth(1).unwrap_or_default();
    let cells: Vec<&str> = notes
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    ensure!(
        cells.get(..5) == Some(&["notes", "helper", "Running", "Six notes", "1.2k"][..]),
        "agent, status, title and tokens of {notes:?}"
    );
    let listed = kubectl_herd(&env, &["list"]).await?.expect_code(0)?;
    ensure!(
        first_cells(&listed.stdout) == first_cells(&table.stdout),
        "list is get: {listed:?}"
    );

    let wide = kubectl_herd(&env, &["get", "-o", "wide"])
        .await?
        .expect_code(0)?;
    ensure!(
        wide.stdout
            .lines()
            .next()
            .is_some_and(|h| h.ends_with("REASON      PARENT   POD")),
        "{wide:?}"
    );
    ensure!(
        wide.stdout
            .lines()
            .nth(1)
            .is_some_and(|l| l.ends_with("Running     <none>   notes-1")),
        "{wide:?}"
    );

    let json = kubectl_herd(&env, &["get", "-o", "json"])
        .await?
        .expect_code(0)?;
    let all = items(&serde_json::from_str(&json.stdout)?)?;
    ensure!(names(&all) == ["notes", "notes-a", "later"], "{json:?}");
    let stored = runs(&env).get("notes").await?;
    ensure!(
        all[0].spec == stored.spec && all[0].status == stored.status,
        "{json:?}"
    );
    ensure!(
        all[0].metadata.managed_fields.is_none(),
        "managedFields are left out"
    );

    let yaml = kubectl_herd(&env, &["get", "-o", "yaml"])
        .await?
        .expect_code(0)?;
    let from_yaml: Value = serde_saphyr::from_str(&yaml.stdout)?;
    ensure!(names(&items(&from_yaml)?) == names(&all), "{yaml:?}");

    let one = kubectl_herd(&env, &["get", "notes", "-o", "yaml"])
        .await?
        .expect_code(0)?;
    let one: Run = serde_saphyr::from_str(&one.stdout)?;
    ensure!(
        one.spec == stored.spec && one.status == stored.status,
        "a named Run alone"
    );

    let name = kubectl_herd(&env, &["get", "-o", "name"])
        .await?
        .expect_code(0)?;
    ensure!(
        name.stdout == "run.herd.dev/notes\nrun.herd.dev/notes-a\nrun.herd.dev/later\n",
        "{name:?}"
    );
    let path = kubectl_herd(
        &env,
        &[
            "get",
            "notes",
            "-o",
            "jsonpath={.status.report.title}/{.spec.agentRef.name}",
        ],
    )
    .await?
    .expect_code(0)?;
    ensure!(path.stdout == "Six notes/helper", "{path:?}");
    let bad = kubectl_herd(&env, &["get", "-o", "jsonpath={range .items[*]}"])
        .await?
        .expect_code(2)?;
    ensure!(bad.stderr.contains("jq"), "{bad:?}");

    let alice = kubectl_herd(&env, &["get", "-l", "herd.dev/user=alice", "-o", "name"])
        .await?
        .expect_code(0)?;
    ensure!(alice.stdout == "run.herd.dev/notes\n", "{alice:?}");
    let writer = kubectl_herd(
        &env,
        &[
            "get",
            "--field-selector",
            "spec.agentRef.name=writer",
            "-o",
            "name",
        ],
    )
    .await?
    .expect_code(0)?;
    ensure!(writer.stdout == "run.herd.dev/later\n", "{writer:?}");
    let last = kubectl_herd(&env, &["get", "--last", "-o", "name"])
        .await?
        .expect_code(0)?;
    ensure!(
        last.stdout == "run.herd.dev/later\n",
        "the newest top-level Run: {last:?}"
    );
    let limited = kubectl_herd(&env, &["get", "--limit", "1"])
        .await?
        .expect_code(0)?;
    ensure!(first_cells(&limited.stdout) == ["later"], "{limited:?}");
    let sorted = kubectl_herd(&env, &["get", "--sort-by", ".metadata.name", "-o", "name"])
        .await?
        .expect_code(0)?;
    ensure!(
        sorted.stdout == "run.herd.dev/later\nrun.herd.dev/notes\nrun.herd.dev/notes-a\n",
        "{sorted:?}"
    );
    let everywhere = kubectl_herd(&env, &["get", "-A", "-l", "herd.dev/user=alice"])
        .await?
        .expect_code(0)?;
    let row = everywhere.stdout.lines().nth(1).unwrap_or_default();
    ensure!(
        everywhere.stdout.starts_with("NAMESPACE") && row.starts_with(&format!("{ns}   notes ")),
        "{everywhere:?}"
    );

    let none = kubectl_herd(&env, &["get", "-l", "herd.dev/user=nobody"])
        .await?
        .expect_code(0)?;
    ensure!(
        none.stdout.is_empty() && none.stderr.contains("No Runs found"),
        "{none:?}"
    );
    let missing = kubectl_herd(&env, &["get", "gone"]).await?.expect_code(1)?;
    ensure!(missing.stderr.contains("Run gone not found"), "{missing:?}");
    Ok(())
}

pub async fn get_watch_prints_each_change(env: TestEnv) -> anyhow::Result<()> {
    family(&env).await?;
    let changer = env.clone();
    // The watch lists first: the change comes once it watches, and Ctrl-C after it is shown.
    let change = Box::pin(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        // A failed change shows as a missing line below.
        let _ = set_run_status(&changer, "later", "True", "Succeeded", json!({})).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
    });
    let watched = kubectl_herd_until(&env, &["get", "-w"], change)
        .await?
        .expect_code(130)?;
    let lines: Vec<&str> = watched.stdout.lines().collect();
    ensure!(
        lines.len() == 5,
        "the table, then one line for the change:\n{}",
        watched.stdout
    );
    ensure!(
        lines[4].starts_with("later   writer   Succeeded"),
        "{:?}:\n{}",
        lines[4],
        watched.stdout
    );
    Ok(())
}

pub async fn describe_shows_the_question_children_and_events(env: TestEnv) -> anyhow::Result<()> {
    family(&env).await?;
    set_run_status(
        &env,
        "notes",
        "Unknown",
        "WaitingForInput",
        json!({"phase": "InputRequired", "children": [{"name": "notes-a", "state": "Succeeded"}],
            "report": {"attempt": 1, "seq": 2, "title": "Six notes",
                "todos": [{"content": "Outline", "status": "completed"}],
                "stopReason": "inputRequired",
                "clarification": {"id": "q-1", "question": "Which colour?",
                    "type": "missing_info", "options": ["teal", "red"]}}}),
    )
    .await?;
    let events: Api<Event> = Api::namespaced(env.client(), env.namespace());
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "notes.1"},
        "involvedObject": {"apiVersion": "herd.dev/v1alpha1", "kind": "Run", "name": "notes",
            "namespace": env.namespace()},
        "reason": "PodCreated", "message": "created Pod notes-1", "type": "Normal",
        "lastTimestamp": LONG_AGO, "firstTimestamp": LONG_AGO, "count": 1,
        "source": {"component": "herd-operator"},
    }))?;
    events.create(&PostParams::default(), &event).await?;

    let described = kubectl_herd(&env, &["describe", "notes"])
        .await?
        .expect_code(0)?;
    let text = &described.stdout;
    for expected in [
        "Name:           notes\n",
        "Status:         Waiting for answer\n",
        "Labels:         herd.dev/user=alice\n",
        "  Task:             Task of notes.\n",
        "Waiting for an answer:\n  Question q-1 (MissingInfo):\n",
        "      1. teal\n",
        "  [x] Outline\n",
        "Children:\n",
        "  notes-a   Succeeded",
        "Pod notes-1: deleted\n",
        "PodCreated   run/notes   created Pod notes-1\n",
    ] {
        ensure!(text.contains(expected), "{expected:?} in:\n{text}");
    }
    let last = kubectl_herd(&env, &["describe", "--last"])
        .await?
        .expect_code(0)?;
    ensure!(
        last.stdout.starts_with("Name:           later\n"),
        "{last:?}"
    );
    let missing = kubectl_herd(&env, &["describe", "gone"])
        .await?
        .expect_code(1)?;
    ensure!(missing.stderr.contains("Run gone not found"), "{missing:?}");
    Ok(())
}

pub async fn delete_removes_runs_with_their_children(env: TestEnv) -> anyhow::Result<()> {
    family(&env).await?;
    create_run(
        &env,
        "solo",
        "helper",
        None,
        json!({"herd.dev/user": "bob"}),
    )
    .await?;

    let missing = kubectl_herd(&env, &["delete", "gone"])
        .await?
        .expect_code(1)?;
    ensure!(missing.stderr.contains("Run gone not found"), "{missing:?}");
    let by_label = kubectl_herd(&env, &["delete", "-l", "herd.dev/user=bob"])
        .await?
        .expect_code(0)?;
    ensure!(
        by_label.stdout == "run.herd.dev \"solo\" deleted\n",
        "{by_label:?}"
    );
    let parent = kubectl_herd(&env, &["delete", "notes"])
        .await?
        .expect_code(0)?;
    ensure!(
        parent.stdout == "run.herd.dev \"notes\" deleted (and its child Run)\n",
        "{parent:?}"
    );
    let api = runs(&env);
    wait_for(
        "the garbage collector to delete the child",
        CHILD_GONE,
        || {
            let api = api.clone();
            async move { Ok(api.get_opt("notes-a").await?.is_none().then_some(())) }
        },
    )
    .await?;
    let rest = kubectl_herd(&env, &["delete", "--all"])
        .await?
        .expect_code(0)?;
    ensure!(
        rest.stdout == "run.herd.dev \"later\" deleted\n",
        "{rest:?}"
    );
    let none = kubectl_herd(&env, &["delete", "--all"])
        .await?
        .expect_code(0)?;
    ensure!(
        none.stdout.is_empty() && none.stderr.contains("No Runs found"),
        "{none:?}"
    );
    Ok(())
}
