//! `kubectl herd get` of a parent whose `task` calls became child Runs: `--follow` shows the
//! children's states as they change, and `get` draws the parent with its children under it.

use std::time::Duration;

use anyhow::ensure;
use herd_e2e::TestEnv;
use kube::ResourceExt;
use serde_json::json;

use super::kubectl_herd;
use super::script::{BOTH, fan_out_script};
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

/// How long a parent with two children takes: three Pods and a few model calls.
const FAMILY_TIME: Duration = Duration::from_secs(150);

/// The parent and its two children, all `Succeeded`, as a tree.
pub async fn get_shows_a_parent_with_its_children(env: TestEnv) -> anyhow::Result<()> {
    let agent = scripted_agent(json!({
        "subagents": {"enabled": true, "maxConcurrent": 2, "maxTotal": 2},
    }));
    let scenario = Scenario::start(&env, agent).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &fan_out_script()).await?;

    let followed = tokio::time::timeout(
        FAMILY_TIME,
        kubectl_herd(&env, &["run", "helper", "Write two notes.", "--follow"]),
    )
    .await??
    .expect_code(0)?;
    ensure!(followed.stdout == format!("{BOTH}\n"), "{followed:?}");
    let parent = followed.created()?;
    let children: Vec<String> = scenario
        .runs()
        .list(&Default::default())
        .await?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .filter(|n| *n != parent)
        .collect();
    ensure!(children.len() == 2, "two children: {children:?}");
    for child in &children {
        ensure!(
            followed.stderr.contains(&format!("child {child}: ")),
            "--follow shows child {child}:\n{}",
            followed.stderr
        );
    }

    let tree = kubectl_herd(&env, &["get", &parent])
        .await?
        .expect_code(0)?;
    let lines: Vec<&str> = tree.stdout.lines().collect();
    ensure!(
        lines.len() == 4,
        "a header, the parent and two children:\n{}",
        tree.stdout
    );
    ensure!(
        lines[0].starts_with("NAME") && lines[0].contains("STATUS") && lines[0].ends_with("AGE"),
        "{}",
        tree.stdout
    );
    ensure!(
        lines[1].starts_with(&format!("{parent} ")),
        "{}",
        tree.stdout
    );
    for (line, branch) in [(lines[2], "├─ "), (lines[3], "└─ ")] {
        ensure!(
            line.starts_with(branch),
            "{line:?} under the parent:\n{}",
            tree.stdout
        );
        let child = line.trim_start_matches(branch).split_whitespace().next();
        ensure!(
            child.is_some_and(|c| children.iter().any(|n| n == c)),
            "{line:?} is a child:\n{}",
            tree.stdout
        );
    }
    for line in &lines[1..] {
        ensure!(
            line.contains("   helper   Succeeded   "),
            "agent and status of {line:?}"
        );
    }
    let wide = kubectl_herd(&env, &["get", &parent, "-o", "wide"])
        .await?
        .expect_code(0)?;
    for line in wide.stdout.lines().skip(2) {
        ensure!(
            line.contains(&format!("   Succeeded   {parent}   ")),
            "a child's reason and parent in {line:?}:\n{}",
            wide.stdout
        );
    }

    let everything = kubectl_herd(&env, &["get"]).await?.expect_code(0)?;
    let names = |table: &str| -> Vec<String> {
        table
            .lines()
            .map(|l| {
                l.split("   ")
                    .next()
                    .unwrap_or_default()
                    .trim_end()
                    .to_owned()
            })
            .collect()
    };
    ensure!(
        names(&everything.stdout) == names(&tree.stdout),
        "the namespace's only top-level Run is the parent, its children under it:\n{}",
        everything.stdout
    );
    let last = kubectl_herd(&env, &["result", "--last"])
        .await?
        .expect_code(0)?;
    ensure!(
        last.stdout == format!("{BOTH}\n"),
        "--last is the parent, not a child: {last:?}"
    );
    let again = kubectl_herd(&env, &["follow", "--last"])
        .await?
        .expect_code(0)?;
    ensure!(again.stdout == format!("{BOTH}\n"), "{again:?}");
    let missing = kubectl_herd(&env, &["get", "no-such-run"])
        .await?
        .expect_code(1)?;
    ensure!(
        missing.stderr.contains("Run no-such-run not found"),
        "{missing:?}"
    );
    Ok(())
}
