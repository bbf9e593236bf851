//! Child Runs over the run API: started once, long-polled until they end, their files written
//! into the parent's sandbox under `outputs/<child>/`.

#![cfg(test)]

use anyhow::Context as _;
use herd_crds::wire::{ChildOutcome, ChildRequest, ChildStatus};
use herd_sandbox::{InProcessExecutor, SandboxClient, SandboxHost, SandboxRoots};

use super::super::test_server::{Canned, Reply, canned};
use super::*;

const CHILD: &str = "market-map-1a2b3c4d";
const MIB: usize = 1024 * 1024;

/// A sandbox over a temporary `/mnt`.
struct Sandbox {
    _dir: tempfile::TempDir,
    roots: SandboxRoots,
    executor: Arc<dyn ToolExecutor>,
}

async fn sandbox() -> anyhow::Result<Sandbox> {
    let dir = tempfile::tempdir()?;
    let roots = SandboxRoots::under(&dir.path().canonicalize()?);
    let executor: Arc<dyn ToolExecutor> =
        Arc::new(InProcessExecutor(Arc::new(SandboxHost::new(&roots)?)));
    executor.prepare().await?;
    Ok(Sandbox {
        _dir: dir,
        roots,
        executor,
    })
}

fn request() -> ChildRequest {
    ChildRequest {
        attempt: 1,
        tool_call_id: "call_7".into(),
        description: "Survey vendors".into(),
        prompt: "List the heat-pump vendors of Europe.".into(),
        subagent_type: "general-purpose".into(),
        model_calls_left: None,
        tokens_left: None,
        seconds_left: None,
    }
}

fn parent() -> Budget {
    Budget {
        model_calls_left: 7,
        tokens_left: Some(5000),
        deadline: Some(Instant::now() + Duration::from_secs(120)),
    }
}

/// A poll's answer while the child runs.
fn running() -> Reply {
    Reply::json(200, &json!({"name": CHILD}))
}

/// The child's end, presenting `artifacts` (`[path, size]`).
fn completed(artifacts: &[(&str, usize)]) -> Reply {
    let artifacts: Vec<Value> = artifacts
        .iter()
        .map(|(path, size)| json!({"path": path, "size": size}))
        .collect();
    Reply::json(
        200,
        &json!({"name": CHILD, "status": "completed", "stopReason": "completed",
            "result": "Found 12 vendors.", "usage": {"inputTokens": 900, "outputTokens": 80,
            "modelCalls": 3, "toolCalls": 2}, "artifacts": artifacts}),
    )
}

/// Runs the child of `request()` under `parent()` against a run API answering `replies`,
/// with a fresh sandbox receiving the child's files.
async fn run_child_into_sandbox(replies: Canned) -> anyhow::Result<(Setup, Sandbox, ChildOutcome)> {
    let setup = Setup::new(canned(replies)).await;
    let sandbox = sandbox().await?;
    let control = setup.control(vec![]);
    control.use_sandbox(sandbox.executor.clone());
    let outcome = control.run_child(request(), parent()).await?;
    Ok((setup, sandbox, outcome))
}

fn outputs(sandbox: &Sandbox, path: &str) -> PathBuf {
    sandbox.roots.user_data.join("outputs").join(path)
}

// Over 80 lines: one child's life (started once, polled until it ends, its files copied and
// named in the result) checked step by step in the order it happens.
#[tokio::test]
async fn a_child_is_started_once_awaited_and_its_files_land_in_outputs_child() -> anyhow::Result<()>
{
    let (setup, sandbox, outcome) = run_child_into_sandbox(Canned {
        child_polls: vec![
            running(),
            running(),
            completed(&[
                ("/mnt/user-data/outputs/report.md", 12),
                ("/mnt/user-data/outputs/charts/q1 été.png", 5),
            ]),
        ],
        child_files: vec![
            Reply::file("/mnt/user-data/outputs/report.md", b"# Vendors\n12\n"),
            Reply::file(
                "/mnt/user-data/outputs/charts/q1%20%C3%A9t%C3%A9.png",
                b"\x89PNG\0",
            ),
        ],
        ..Canned::default()
    })
    .await?;

    assert_eq!(outcome.status, Some(ChildStatus::Completed));
    assert_eq!(outcome.usage.input_tokens, 900);
    let started = setup.server.requests_to("/children");
    assert_eq!(started.len(), 1, "one child");
    let body = started[0].json();
    assert_eq!(body["toolCallId"], "call_7");
    assert_eq!(body["subagentType"], "general-purpose");
    assert_eq!(body["modelCallsLeft"], 7);
    assert_eq!(body["tokensLeft"], 5000);
    let seconds = body["secondsLeft"].as_u64().context("secondsLeft")?;
    assert!(
        (28..=30).contains(&seconds),
        "the Run's 30 s, not the tool's 120: {seconds}"
    );
    let polls = setup.server.requests_to("/children/call_7");
    assert_eq!(polls.len(), 3, "polled until the child ended");
    for poll in &polls {
        let wait: u64 = poll
            .query
            .as_deref()
            .and_then(|q| q.strip_prefix("wait="))
            .context("a wait= query")?
            .parse()?;
        assert!(
            (27..=30).contains(&wait),
            "no longer than the Run has: {wait}"
        );
    }

    assert_eq!(
        std::fs::read(outputs(&sandbox, &format!("{CHILD}/report.md")))?,
        b"# Vendors\n12\n"
    );
    assert_eq!(
        std::fs::read(outputs(&sandbox, &format!("{CHILD}/charts/q1 été.png")))?,
        b"\x89PNG\0"
    );
    let where_to = format!("/mnt/user-data/outputs/{CHILD}");
    assert!(
        outcome.result.starts_with("Found 12 vendors.\n\n"),
        "{}",
        outcome.result
    );
    assert!(
        outcome.result.contains(&format!(
            "The subagent's files were copied into {where_to}/:\n\
             - {where_to}/report.md (13 bytes)\n\
             - {where_to}/charts/q1 été.png (5 bytes)"
        )),
        "{}",
        outcome.result
    );
    let paths: Vec<&str> = outcome.artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            format!("{where_to}/report.md"),
            format!("{where_to}/charts/q1 été.png")
        ]
    );
    Ok(())
}

// Over 80 lines: one child's artifacts, each hostile or oversized kind next to the file that
// is still copied, so the refusals read against what passes.
#[tokio::test]
async fn files_past_10_mib_are_skipped_and_hostile_ones_refused() -> anyhow::Result<()> {
    let artifacts = [
        ("/mnt/user-data/outputs/a.bin", 6 * MIB),
        ("/mnt/user-data/outputs/b.bin", 5 * MIB),
        ("/mnt/user-data/outputs/evil.sh", 10),
        ("/mnt/user-data/outputs/c.bin", MIB),
        ("/mnt/user-data/outputs/d.bin", 3 * MIB),
        ("/mnt/user-data/outputs/e.bin", 2 * MIB),
        ("/mnt/user-data/workspace/f.txt", 1),
    ];
    let (setup, sandbox, outcome) = run_child_into_sandbox(Canned {
        child_polls: vec![completed(&artifacts)],
        child_files: vec![
            Reply::file("/mnt/user-data/outputs/a.bin", &vec![b'a'; 6 * MIB]),
            Reply::file("/mnt/user-data/outputs/b.bin", b"never fetched"),
            Reply::file(
                "/mnt/user-data/outputs/%2E%2E/%2E%2E/workspace/evil.sh",
                b"rm -rf /",
            ),
            // Declares 1 MiB, sends 5: more than the 4 MiB the cap leaves.
            Reply::file("/mnt/user-data/outputs/c.bin", &vec![b'c'; 5 * MIB]),
            Reply::file("/mnt/user-data/outputs/d.bin", &vec![b'd'; 3 * MIB]),
            Reply::file("/mnt/user-data/outputs/e.bin", b"never fetched"),
            Reply::file("/mnt/user-data/workspace/f.txt", b"f"),
        ],
        ..Canned::default()
    })
    .await?;

    let fetched: Vec<String> = setup
        .server
        .requests()
        .into_iter()
        .filter_map(|r| r.path.split("/files/").nth(1).map(str::to_owned))
        .collect();
    assert_eq!(
        fetched,
        ["0", "2", "3", "4", "6"],
        "b and e are never fetched"
    );
    let folder = outputs(&sandbox, CHILD);
    let mut written: Vec<String> = std::fs::read_dir(&folder)?
        .map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()))
        .collect::<anyhow::Result<_>>()?;
    written.sort();
    assert_eq!(written, ["a.bin", "d.bin"]);
    assert_eq!(
        std::fs::metadata(folder.join("d.bin"))?.len(),
        3 * MIB as u64
    );
    assert!(!sandbox.roots.user_data.join("workspace/evil.sh").exists());
    assert!(!sandbox.roots.user_data.join("outputs/evil.sh").exists());

    let note = &outcome.result;
    let skipped = note
        .split("Not copied, over the 10 MiB per subagent (the subagent's paths):\n")
        .nth(1)
        .context(note.clone())?;
    assert!(
        skipped.starts_with(
            "- /mnt/user-data/outputs/b.bin (5242880 bytes)\n\
             - /mnt/user-data/outputs/e.bin (2097152 bytes)\n\n"
        ),
        "{note}"
    );
    let failed = note
        .split("Could not be copied (the subagent's paths):\n")
        .nth(1)
        .context(note.clone())?;
    let lines: Vec<&str> = failed.lines().collect();
    assert_eq!(lines.len(), 3, "{note}");
    assert!(
        lines[0].starts_with("- /mnt/user-data/outputs/evil.sh: ") && lines[0].contains("'..'"),
        "{note}"
    );
    assert!(
        lines[1].starts_with("- /mnt/user-data/outputs/c.bin: ")
            && lines[1].contains("over 4194304 bytes"),
        "{note}"
    );
    assert!(
        lines[2].starts_with("- /mnt/user-data/workspace/f.txt: ")
            && lines[2].contains("only files under /mnt/user-data/outputs/"),
        "{note}"
    );
    Ok(())
}

#[tokio::test]
async fn a_child_still_running_at_the_parents_deadline_counts_as_timed_out() -> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned {
        child_polls: vec![running().after(Duration::from_millis(300))],
        ..Canned::default()
    }))
    .await;
    let control = setup.control(vec![]);
    let started = Instant::now();
    let budget = Budget {
        deadline: Some(Instant::now() + Duration::from_millis(1500)),
        ..parent()
    };
    let outcome = control.run_child(request(), budget).await?;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(outcome.status, Some(ChildStatus::TimedOut));
    assert!(
        outcome
            .error
            .as_deref()
            .is_some_and(|e| e.contains("time ran out")),
        "{outcome:?}"
    );
    let polls = setup.server.requests_to("/children/call_7");
    assert!(polls.len() >= 2, "{}", polls.len());
    assert_eq!(
        polls[0].query.as_deref(),
        Some("wait=1"),
        "a poll never waits past the deadline"
    );
    Ok(())
}

#[tokio::test]
async fn a_stale_attempt_starting_a_child_stops_the_run() -> anyhow::Result<()> {
    let setup = Setup::new(Arc::new(|_: &Recorded, _| {
        Reply::error(409, "StaleAttempt", "attempt 2 is current")
    }))
    .await;
    let control = setup.control(vec![]);
    let error = control.run_child(request(), parent()).await.unwrap_err();
    assert!(matches!(error, ControlError::StaleAttempt(_)), "{error:?}");
    let said = tokio::time::timeout(Duration::from_secs(5), control.superseded()).await?;
    assert!(said.contains("attempt 2 is current"), "{said}");
    Ok(())
}

#[tokio::test]
async fn without_a_sandbox_the_files_are_listed_as_not_copied() -> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned {
        child_polls: vec![completed(&[("/mnt/user-data/outputs/report.md", 3)])],
        child_files: vec![Reply::file("/mnt/user-data/outputs/report.md", b"abc")],
        ..Canned::default()
    }))
    .await;
    let outcome = setup.control(vec![]).run_child(request(), parent()).await?;
    assert!(
        outcome
            .result
            .contains("- /mnt/user-data/outputs/report.md: there is no sandbox to write it into"),
        "{}",
        outcome.result
    );
    assert!(outcome.artifacts.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_tool_call_id_is_one_encoded_path_segment_or_refused() -> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned {
        child_polls: vec![completed(&[])],
        ..Canned::default()
    }))
    .await;
    let control = setup.control(vec![]);
    let odd = ChildRequest {
        tool_call_id: "call/../x?y#z".into(),
        ..request()
    };
    control.run_child(odd, parent()).await?;
    let polls = setup.server.requests_to("/children/call%2F..%2Fx%3Fy%23z");
    assert_eq!(polls.len(), 1);

    for id in ["", ".", ".."] {
        let request = ChildRequest {
            tool_call_id: id.into(),
            ..request()
        };
        let error = control.run_child(request, parent()).await.unwrap_err();
        assert!(
            matches!(error, ControlError::Refused(_)),
            "{id:?}: {error:?}"
        );
    }
    assert_eq!(
        setup.server.requests_to("/children").len(),
        1,
        "no child started for an id no route can hold"
    );
    Ok(())
}
