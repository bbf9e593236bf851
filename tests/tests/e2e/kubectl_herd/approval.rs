//! A Run whose Agent requires approval for `bash`: `run --follow` without a terminal prints the
//! held call as JSON and exits 3 with the commands that decide it; `approve` and `deny` write
//! the decision (the only held call without an ID; an unknown ID is refused, listing those
//! held); with someone at the terminal, `--follow` asks `run `...`? [y/N/reason]` and goes on.

use anyhow::ensure;
use herd_e2e::TestEnv;
use serde_json::{Value, json};

use super::{kubectl_herd, kubectl_herd_typing};
use crate::scenarios::approval::{RAN, cleanup_script};
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

/// No terminal: exit 3 with the held call; an unknown id refused; `deny` and `approve` without
/// an id decide the only held call; `follow` prints the answer. Then the same Run decided at
/// the "terminal".
pub async fn approve_and_deny_decide_held_calls(env: TestEnv) -> anyhow::Result<()> {
    let agent = scripted_agent(json!({"approval": {"tools": ["bash"]}}));
    let scenario = Scenario::start(&env, agent).await?;
    script_config_map(
        &scenario.admin,
        &scenario.namespace,
        &cleanup_script("denied by a person"),
    )
    .await?;

    let held = kubectl_herd(&env, &["run", "helper", "Clean up.", "--follow"])
        .await?
        .expect_code(3)?;
    let name = held.created()?;
    let request: Value = serde_json::from_str(held.stdout.trim())?;
    ensure!(
        request["tool"] == "bash" && request["id"] == "a-call_0_0",
        "the held call as JSON: {held:?}"
    );
    ensure!(
        held.stderr
            .contains(&format!("kubectl herd approve {name} a-call_0_0")),
        "what to do next: {held:?}"
    );

    let unknown = kubectl_herd(&env, &["approve", &name, "a-nope"])
        .await?
        .expect_code(1)?;
    ensure!(
        unknown
            .stderr
            .contains("holds no tool call under the id \"a-nope\"")
            && unknown.stderr.contains("a-call_0_0  bash: rm -rf build/"),
        "{unknown:?}"
    );
    let denied = kubectl_herd(&env, &["deny", &name, "--reason", "keep the build"])
        .await?
        .expect_code(0)?;
    ensure!(
        denied.stdout.starts_with(&format!(
            "denied a-call_0_0 of Run {name} (bash: rm -rf build/)"
        )),
        "{denied:?}"
    );

    let next = kubectl_herd(&env, &["follow", &name])
        .await?
        .expect_code(3)?;
    let request: Value = serde_json::from_str(next.stdout.trim())?;
    ensure!(
        request["id"] == "a-call_1_0",
        "the next held call: {next:?}"
    );
    kubectl_herd(&env, &["approve", &name])
        .await?
        .expect_code(0)?;
    let done = kubectl_herd(&env, &["follow", &name])
        .await?
        .expect_code(0)?;
    ensure!(done.stdout == format!("Done: {RAN}.\n"), "{done:?}");
    let late = kubectl_herd(&env, &["approve", &name])
        .await?
        .expect_code(1)?;
    ensure!(late.stderr.contains("has finished (Succeeded)"), "{late:?}");

    let typed = kubectl_herd_typing(
        &env,
        &["run", "helper", "Clean up again.", "--follow"],
        &["keep the build", "y"],
    )
    .await?
    .expect_code(0)?;
    ensure!(typed.stdout == format!("Done: {RAN}.\n"), "{typed:?}");
    ensure!(
        typed
            .stderr
            .contains("run `bash: rm -rf build/`? [y/N/reason]")
            && typed.stderr.contains("denied a-call_0_0")
            && typed.stderr.contains("approved a-call_1_0"),
        "decided at the terminal: {typed:?}"
    );
    Ok(())
}
