//! `herd-runner`: see `herd_runner::cli`.

use std::process::ExitCode;

fn main() -> ExitCode {
    // A confined sandbox child unshares namespaces, which the kernel allows only while the
    // process has a single thread: before the tokio runtime starts its workers.
    #[cfg(target_os = "linux")]
    if let herd_runner::sandbox::confine::Entry::Exit(code) =
        herd_runner::sandbox::confine::enter_if_requested()
    {
        return code;
    }
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(herd_runner::cli::main()),
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            ExitCode::FAILURE
        }
    }
}
