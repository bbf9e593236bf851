//! The whole `herd-operator` process: parses flags (each also an environment variable), sets
//! up logs, and runs the operator until SIGTERM/SIGINT or the loss of its Lease. The binary's
//! `main`, and whatever else runs as `herd-operator` (the e2e suite's `local-kubelet`
//! re-executes itself under that name for a container of the operator's image).

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Layer as _, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::config::{Config, LogFormat};

/// Runs the operator on a multi-threaded runtime; exit code 1 when it cannot start or stops
/// on an error (the loss of its Lease included).
pub fn process_main() -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(main()),
        Err(error) => {
            eprintln!("herd-operator: cannot start the async runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn main() -> ExitCode {
    let config = Config::parse();
    let traces = crate::traces::init_from_env();
    init_logging(config.log_format, traces.as_ref());
    let termination_log = config.termination_log.clone();
    // kube's TLS needs exactly one process-wide rustls provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "no Kubernetes client");
            write_termination_message(&termination_log, &format!("no Kubernetes client: {error}"));
            return ExitCode::FAILURE;
        }
    };
    let code = match crate::run(config, client, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "the operator stopped");
            write_termination_message(&termination_log, &format!("the operator stopped: {error}"));
            ExitCode::FAILURE
        }
    };
    if let Some(provider) = traces {
        // Sends the spans still queued; it blocks, so off the async workers.
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
    code
}

/// The most the kubelet keeps of a termination message.
const TERMINATION_MESSAGE_MAX: usize = 4096;

/// Writes why the operator stopped where the kubelet reads it (its status then says it, and
/// `FallbackToLogsOnError` needs no log scraping). Only into an existing file: outside a Pod
/// there is none, and nothing is created.
fn write_termination_message(path: &std::path::Path, message: &str) {
    let Ok(mut file) = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
    else {
        return;
    };
    let mut end = message.len().min(TERMINATION_MESSAGE_MAX);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    if let Err(error) = std::io::Write::write_all(&mut file, &message.as_bytes()[..end]) {
        tracing::warn!(path = %path.display(), %error, "cannot write the termination message");
    }
}

/// Logs in `format`, filtered by `RUST_LOG` (default `info`); with `traces`, the operator's
/// and kube's spans (reconciles, API calls) are exported too, whatever `RUST_LOG` says.
fn init_logging(format: LogFormat, traces: Option<&opentelemetry_sdk::trace::SdkTracerProvider>) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let lines = match format {
        LogFormat::Json => tracing_subscriber::fmt::layer().json().boxed(),
        // Colours only for a person at a terminal, never in a file or a pipe.
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .boxed(),
    };
    // `try_init`: a process that set up logging already keeps its own.
    let _ = tracing_subscriber::registry()
        .with(lines.with_filter(filter))
        .with(traces.map(crate::traces::span_layer))
        .try_init();
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = interrupt => {}
            () = terminate => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_termination_message_goes_into_an_existing_file_only() {
        let folder = tempfile::tempdir().unwrap();
        let missing = folder.path().join("termination-log");
        write_termination_message(&missing, "stopped");
        assert!(!missing.exists(), "nothing is created outside a Pod");

        std::fs::write(&missing, "an older, longer message").unwrap();
        write_termination_message(&missing, "cannot listen on 0.0.0.0:8080 (--http-addr)");
        assert_eq!(
            std::fs::read_to_string(&missing).unwrap(),
            "cannot listen on 0.0.0.0:8080 (--http-addr)"
        );

        let long = "é".repeat(TERMINATION_MESSAGE_MAX);
        write_termination_message(&missing, &long);
        let kept = std::fs::read_to_string(&missing).unwrap();
        assert!(kept.len() <= TERMINATION_MESSAGE_MAX && kept.chars().all(|c| c == 'é'));
    }
}
