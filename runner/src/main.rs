//! `herd-runner`: see `herd_runner::cli`.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    herd_runner::cli::main().await
}
