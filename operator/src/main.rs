//! `herd-operator`: see `herd_operator::cli`.

use std::process::ExitCode;

fn main() -> ExitCode {
    herd_operator::cli::process_main()
}
