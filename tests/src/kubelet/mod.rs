//! `local-kubelet`: plays the kubelet for Herd's Pods on a node-less cluster (the e2e suite's
//! control plane, or `../shared/envtest/start`).

pub mod container_view;
pub mod lifecycle;
pub mod runtime;

use std::process::ExitCode;

/// The binary's `main`: `herd-runner` when started under that name (a container's command),
/// a runtime role when the first argument names one, else the kubelet.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args
        .first()
        .is_some_and(|arg0| runtime::spec::is_herd_runner(arg0))
    {
        return herd_runner_main();
    }
    if let Some(code) = runtime::dispatch(args.get(1..).unwrap_or_default()) {
        return code;
    }
    ExitCode::SUCCESS
}

/// What `herd-runner`'s own `main` does.
fn herd_runner_main() -> ExitCode {
    // A confined sandbox child unshares namespaces, which the kernel allows only while the
    // process has a single thread: before the tokio runtime starts its workers.
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
