//! `local-kubelet`: see `herd_e2e::kubelet`.

use std::process::ExitCode;

#[cfg(target_os = "linux")]
fn main() -> ExitCode {
    herd_e2e::kubelet::main()
}

#[cfg(not(target_os = "linux"))]
fn main() -> ExitCode {
    eprintln!("local-kubelet runs containers with Linux namespaces: Linux only");
    ExitCode::FAILURE
}
