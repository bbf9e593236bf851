//! The whole `herd-operator` process: parses flags (each also an environment variable), sets
//! up logs, and runs the operator until SIGTERM/SIGINT or the loss of its Lease. The binary's
//! `main`, and whatever else runs as `herd-operator` (the e2e suite's `local-kubelet`
//! re-executes itself under that name for a container of the operator's image).

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

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
    init_logging(config.log_format);
    // kube's TLS needs exactly one process-wide rustls provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "no Kubernetes client");
            return ExitCode::FAILURE;
        }
    };
    match crate::run(config, client, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "the operator stopped");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // `try_init`: a process that set up logging already keeps its own.
    let _ = match format {
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .try_init(),
        // Colours only for a person at a terminal, never in a file or a pipe.
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .try_init(),
    };
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
