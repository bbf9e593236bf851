//! `kubectl herd cancel` stops a Run waiting for an answer: it ends `Cancelled`, `follow`
//! exits 1 saying so, and cancelling or answering it again says it is over. A Run deleted while
//! it is followed ends the follow with exit code 1 too.

use std::time::Duration;

use anyhow::ensure;
use herd_crds::run::{Run, RunPhase};
use herd_e2e::TestEnv;
use herd_e2e::wait::wait_for;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use serde_json::json;

use super::script::ask_script;
use super::{kubectl_herd, kubectl_herd_typing};
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

/// From the Run's creation to its question.
const ASK_TIME: Duration = Duration::from_secs(90);

/// `run` prints the Run's name; `cancel` stops it while it waits.
pub async fn cancel_stops_a_waiting_run(env: TestEnv) -> anyhow::Result<()> {
    let mut scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &ask_script()).await?;

    let started = kubectl_herd(&env, &["run", "helper", "Paint the shed."])
        .await?
        .expect_code(0)?;
    let name = started.stdout.trim().to_owned();
    ensure!(
        name.starts_with("helper-"),
        "the name on stdout: {started:?}"
    );
    ensure!(
        started.stderr
            == format!("Run {name} created; follow it with: kubectl herd follow {name}\n"),
        "{started:?}"
    );
    scenario
        .until(&name, "ask its question", ASK_TIME, |run| {
            run.status.as_ref().and_then(|s| s.phase) == Some(RunPhase::InputRequired)
        })
        .await?;

    let cancelled = kubectl_herd(&env, &["cancel", &name])
        .await?
        .expect_code(0)?;
    ensure!(
        cancelled
            .stdout
            .starts_with(&format!("Run {name} cancelled: its Pod {name}-"))
            && cancelled.stdout.ends_with(" is being deleted\n"),
        "the Run waiting for an answer has a Pod and no children: {cancelled:?}"
    );
    let followed = kubectl_herd(&env, &["follow", &name])
        .await?
        .expect_code(1)?;
    ensure!(
        followed
            .stderr
            .contains(&format!("Run {name} failed (Cancelled)")),
        "{followed:?}"
    );
    let run = scenario.runs().get(&name).await?;
    ensure!(
        run.status.as_ref().and_then(|s| s.phase) == Some(RunPhase::Cancelled),
        "{:?}",
        run.status
    );
    let again = kubectl_herd(&env, &["cancel", &name])
        .await?
        .expect_code(0)?;
    ensure!(
        again.stdout == format!("Run {name} is already cancelled\n"),
        "{again:?}"
    );
    let answer = kubectl_herd(&env, &["answer", &name, "teal"])
        .await?
        .expect_code(1)?;
    ensure!(
        answer
            .stderr
            .contains(&format!("Run {name} has finished (Cancelled)")),
        "{answer:?}"
    );
    let result = kubectl_herd(&env, &["result", &name])
        .await?
        .expect_code(1)?;
    ensure!(
        result
            .stderr
            .starts_with(&format!("error: Run {name} failed (Cancelled: ")),
        "{result:?}"
    );
    let missing = kubectl_herd(&env, &["follow", "no-such-run"])
        .await?
        .expect_code(1)?;
    ensure!(
        missing
            .stderr
            .starts_with("error: Run no-such-run not found in namespace "),
        "{missing:?}"
    );

    // Followed while it waits (the person at the terminal leaves the question open), then
    // deleted.
    let follow = kubectl_herd_typing(
        &env,
        &["run", "helper", "Paint the barn.", "--follow"],
        &[""],
    );
    let delete = async {
        let runs = scenario.runs();
        let name = wait_for("the second Run to ask", ASK_TIME, || async {
            Ok(runs
                .list(&Default::default())
                .await?
                .items
                .iter()
                .find_map(|run| {
                    let waits =
                        run.status.as_ref().and_then(|s| s.phase) == Some(RunPhase::InputRequired);
                    (waits && !run.spec.cancel).then(|| run.name_any())
                }))
        })
        .await?;
        // The follower has seen it by now: it shows the question as soon as it is asked.
        tokio::time::sleep(Duration::from_secs(2)).await;
        Api::<Run>::namespaced(env.client(), env.namespace())
            .delete(&name, &DeleteParams::default())
            .await?;
        anyhow::Ok(name)
    };
    let (followed, deleted) = tokio::join!(follow, delete);
    let (followed, deleted) = (followed?.expect_code(1)?, deleted?);
    ensure!(
        followed.stderr.contains("not answered here")
            && followed.stderr.ends_with(&format!(
                "Run {deleted} was deleted while it was followed\n"
            )),
        "{followed:?}"
    );

    let missing = kubectl_herd(&env, &["cancel", "no-such-run"])
        .await?
        .expect_code(1)?;
    ensure!(
        missing.stderr
            == format!(
                "error: Run no-such-run not found in namespace {} (`kubectl herd get` lists the \
                 Runs there)\n",
                env.namespace()
            ),
        "{missing:?}"
    );
    Ok(())
}
