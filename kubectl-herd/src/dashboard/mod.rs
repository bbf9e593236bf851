//! `kubectl herd dashboard`: a web server on 127.0.0.1 that shows and steers Runs with the
//! caller's own kubeconfig — their RBAC applies, nothing runs in the cluster (as `kubectl
//! proxy` or `argo server --auth-mode client`).
//!
//! - [`guard`]: only the loopback address and port, only with the token printed at start.
//! - [`watches`]: one watch per kind, shared by every open page; pages go live through
//!   server-sent events that carry their re-rendered regions ([`server`]).
//! - Pages are server-rendered ([`templates`]) from what `kubectl herd` itself computes: the
//!   columns and tree of `get` ([`runs_page`]), `describe`'s parts, `answer`'s patch and
//!   `cancel`'s decision ([`run_page`]), `agents`, `skills` and `schedules`' rows
//!   ([`catalog_page`]); answers are Markdown rendered and sanitized ([`markdown`]).

pub mod catalog_page;
pub mod guard;
pub mod markdown;
pub mod run_page;
pub mod runs_page;
pub mod server;
pub mod templates;
pub mod watches;

use std::process::Stdio;

use herd_crds::terminal_text::one_line;

use crate::cli::DashboardArgs;
use crate::connect::Cluster;
use crate::error::CliError;
use crate::io::Io;
use crate::outcome::EXIT_ANSWERED;

pub use server::{Started, start};

/// A refusal as the API server said it (`403 Forbidden: runs.herd.dev "x" is forbidden: …`),
/// or why there was no answer.
pub fn said(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!(
            "{} {}: {}",
            status.code,
            one_line(&status.reason),
            one_line(&status.message)
        ),
        other => format!(
            "no answer from the API server: {}",
            one_line(&other.to_string())
        ),
    }
}

/// Serves the dashboard until Ctrl-C: prints its URL and opens it unless `--no-open`.
pub async fn dashboard(
    cluster: &Cluster,
    args: &DashboardArgs,
    io: &mut Io<'_>,
) -> Result<u8, CliError> {
    let started = start(cluster.clone(), args.all_namespaces, args.port).await?;
    let scope = if args.all_namespaces {
        "every namespace".to_owned()
    } else {
        format!("namespace {}", cluster.namespace)
    };
    let _ = writeln!(
        io.stdout,
        "Herd dashboard for {scope}, with your kubeconfig's rights (Ctrl-C stops it):\n{}",
        started.url
    );
    let _ = io.stdout.flush();
    if !args.no_open
        && let Err(why) = open_browser(&started.url)
    {
        let _ = writeln!(
            io.stderr,
            "cannot open a browser ({why}): open the URL above"
        );
    }
    (&mut io.interrupt).await;
    started.stop();
    Ok(EXIT_ANSWERED)
}

/// Opens `url` in the desktop's browser.
fn open_browser(url: &str) -> std::io::Result<()> {
    let (program, first): (&str, &[&str]) = if cfg!(target_os = "macos") {
        ("open", &[])
    } else if cfg!(windows) {
        ("rundll32", &["url.dll,FileProtocolHandler"])
    } else {
        ("xdg-open", &[])
    };
    std::process::Command::new(program)
        .args(first)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
}
