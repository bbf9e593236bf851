//! The `kubectl-herd` binary as a person runs it: a process with the kubeconfig, its exit codes
//! the process's. It is the one `cargo test` built next to this test binary
//! (`target/debug/kubectl-herd`, beside `target/debug/deps/`): `cargo test --workspace` builds
//! it because the crate has integration tests of its own. Cargo cannot build another package's
//! binary for this one (`CARGO_BIN_EXE_*` is only for the same package's binaries), so with
//! `cargo test -p herd-e2e` alone it may be missing or older than its sources: this test then
//! fails and says to run `cargo build -p kubectl-herd` first, rather than test a stale binary.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use anyhow::{Context, ensure};
use herd_e2e::TestEnv;
use serde_json::{Value, json};

use super::Ran;
use super::script::{COLOUR, PAINTED, QUESTION, ask_script};
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

/// The longest one command may take.
const COMMAND_TIME: Duration = Duration::from_secs(120);

/// `target/debug/kubectl-herd`, checked to be at least as new as the sources it is built from.
fn built_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let target = exe
        .parent()
        .and_then(Path::parent)
        .context("this test binary is not in target/<profile>/deps/")?;
    let binary = target.join(format!("kubectl-herd{}", std::env::consts::EXE_SUFFIX));
    let rebuild = "`cargo test --workspace` builds it; with `cargo test -p herd-e2e`, run \
                   `cargo build -p kubectl-herd` first";
    let built = std::fs::metadata(&binary)
        .and_then(|m| m.modified())
        .with_context(|| format!("{} is missing: {rebuild}", binary.display()))?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("tests/ has a parent")?;
    // What cargo rebuilds the binary for (its own crate and the API types it links).
    let sources = ["kubectl-herd/src", "kubectl-herd/Cargo.toml", "crds/src"];
    for source in sources {
        if let Some((path, changed)) = newest(&workspace.join(source))?
            && changed > built
        {
            anyhow::bail!(
                "{} is older than {}: {rebuild}",
                binary.display(),
                path.display()
            );
        }
    }
    Ok(binary)
}

/// The most recently changed file at or under `path`.
fn newest(path: &Path) -> anyhow::Result<Option<(PathBuf, SystemTime)>> {
    let mut found: Option<(PathBuf, SystemTime)> = None;
    for entry in walkdir::WalkDir::new(path) {
        let entry = entry?;
        if !entry.file_type().is_file() {
            continue;
        }
        let changed = entry.metadata()?.modified()?;
        if found.as_ref().is_none_or(|(_, newest)| changed > *newest) {
            found = Some((entry.path().to_owned(), changed));
        }
    }
    Ok(found)
}

/// Runs the binary with `args` on the test's namespace, stdin closed (no terminal).
async fn binary(env: &TestEnv, program: &Path, args: &[&str]) -> anyhow::Result<Ran> {
    let mut command = tokio::process::Command::new(program);
    command
        .arg("--kubeconfig")
        .arg(env.cluster().kubeconfig())
        .args(["-n", env.namespace()])
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(COMMAND_TIME, command.output())
        .await
        .with_context(|| {
            format!(
                "kubectl-herd {} did not end in {COMMAND_TIME:?}",
                args.join(" ")
            )
        })??;
    let code = output
        .status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .with_context(|| format!("kubectl-herd {} ended by {}", args.join(" "), output.status))?;
    Ok(Ran {
        code,
        stdout: String::from_utf8(output.stdout)?,
        stderr: String::from_utf8(output.stderr)?,
    })
}

/// Through the binary: `run --follow` exits 3 with the question, `answer` answers it, `follow`
/// exits 0 with the answer, `get` shows the Run.
pub async fn the_binary_runs_answers_and_follows(env: TestEnv) -> anyhow::Result<()> {
    let program = built_binary()?;
    let scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &ask_script()).await?;

    let asked = binary(
        &env,
        &program,
        &["run", "helper", "Paint the door.", "--follow"],
    )
    .await?
    .expect_code(3)?;
    let name = asked.created()?;
    let question: Value = serde_json::from_str(asked.stdout.trim())?;
    ensure!(question["question"] == QUESTION, "{asked:?}");

    binary(&env, &program, &["answer", &name, COLOUR])
        .await?
        .expect_code(0)?;
    let done = binary(&env, &program, &["follow", &name])
        .await?
        .expect_code(0)?;
    ensure!(done.stdout == format!("{PAINTED}\n"), "{done:?}");
    ensure!(done.stderr.contains("Succeeded · "), "{done:?}");

    let table = binary(&env, &program, &["get"]).await?.expect_code(0)?;
    ensure!(
        table
            .stdout
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with(&format!("{name} ")) && l.contains("Succeeded")),
        "{table:?}"
    );
    let usage = binary(&env, &program, &["answer", &name])
        .await?
        .expect_code(2)?;
    ensure!(usage.stderr.contains("<TEXT>"), "{usage:?}");
    Ok(())
}
