//! `herd-runner`: see `herd_runner::cli`.

use std::process::ExitCode;

fn main() -> ExitCode {
    herd_runner::cli::process_main()
}
