//! The `kubectl-herd` binary on its own, with no cluster: its help, usage errors, completion
//! scripts, the `kubectl_complete-herd` script kubectl calls, and the message for a kubeconfig
//! that cannot be read. (Having an integration test also makes `cargo test` build the binary,
//! which the end-to-end suite runs against a real API server.)

#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kubectl-herd"))
}

fn kubectl_herd(args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        // Never a developer's cluster.
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("kubectl-herd runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_names_every_command_and_the_exit_codes() {
    let out = kubectl_herd(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for command in [
        "run",
        "follow",
        "answer",
        "result",
        "cancel",
        "get",
        "logs",
        "completion",
    ] {
        assert!(
            help.contains(&format!("  {command} ")),
            "{command} in {help}"
        );
    }
    assert!(help.contains("Usage: kubectl herd"), "{help}");
    assert!(help.contains("3 waiting for an answer"), "{help}");
    assert!(!help.contains("__complete"), "hidden: {help}");
}

#[test]
fn bad_usage_exits_2_with_the_usage() {
    let out = kubectl_herd(&["run", "helper"]);
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out.stderr);
    assert!(
        said.contains("<TASK>") && said.contains("Usage: kubectl herd run"),
        "{said}"
    );
    assert_eq!(kubectl_herd(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn an_unreadable_kubeconfig_is_named() {
    let out = kubectl_herd(&["--kubeconfig", "/nonexistent/config", "get"]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(
        said.starts_with("error: cannot read the kubeconfig /nonexistent/config")
            && said.contains("--kubeconfig"),
        "{said}"
    );
    let out = kubectl_herd(&["get"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("KUBECONFIG"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn completion_scripts_complete_kubectl_herd() {
    for shell in ["bash", "zsh", "fish"] {
        let out = kubectl_herd(&["completion", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = text(&out.stdout);
        assert!(
            script.contains("kubectl-herd") && script.contains("answer"),
            "{shell}: {script}"
        );
    }
}

/// `completion zsh | head` and `--help | head`: a reader that stops reading is a normal end of
/// output, not a panic. The pipe is closed before the binary writes, so every write fails.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    for args in [&["completion", "zsh"][..], &["--help"], &["get", "--help"]] {
        let mut child = Command::new(binary())
            .args(args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl-herd runs");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("kubectl-herd ends");
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {stderr}");
    }
}

/// The script as kubectl runs it: found on PATH, given the words after `herd`.
fn complete_script(words: &[&str]) -> Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kubectl_complete-herd");
    let bin_dir = binary().parent().expect("a folder");
    let path = std::env::join_paths(std::iter::once(bin_dir.to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("a PATH");
    Command::new(script)
        .args(words)
        .env("PATH", path)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("the script runs")
}

#[test]
fn kubectl_complete_herd_prints_candidates_and_a_directive() {
    let out = complete_script(&["an"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "answer\tAnswer the question a Run waits on\n:4\n"
    );
    let out = complete_script(&["run", "helper", "--pl"]);
    assert_eq!(
        text(&out.stdout),
        "--plan\tPlan mode: the agent keeps a todo list, shown while it works\n:4\n"
    );
    // Words that look like kubectl-herd's own flags are words to complete, not its flags.
    let out = complete_script(&["-n", ""]);
    assert_eq!(text(&out.stdout), ":4\n", "no namespaces without a cluster");
    let out = complete_script(&["result", "r", "-o", ""]);
    assert_eq!(text(&out.stdout), ":16\n", "folders");
}

#[test]
fn without_a_cluster_names_are_simply_not_offered() {
    let started = std::time::Instant::now();
    let out = complete_script(&["answer", ""]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), ":4\n");
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
}
