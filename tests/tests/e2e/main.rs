//! Herd's end-to-end tests: one binary, one API server, a module per area. Run with
//! `cargo test -p herd-e2e --test e2e` (see `herd_e2e::harness` for where the server comes
//! from); filters and `--list` work as with any test binary.

mod crds;
mod dashboard;
mod fixture;
mod gitops;
#[cfg(target_os = "linux")]
mod helm;
mod kubectl_herd;
#[cfg(target_os = "linux")]
mod kubelet;
mod node;
mod operator;
mod run_api;
mod scenarios;

use std::process::ExitCode;

fn main() -> ExitCode {
    herd_e2e::run_suite(
        [
            crds::tests(),
            dashboard::tests(),
            fixture::tests(),
            gitops::tests(),
            kubectl_herd::tests(),
            local_kubelet_tests(),
            node::tests(),
            operator::tests(),
            run_api::tests(),
            scenarios::tests(),
        ]
        .into_iter()
        .flatten()
        .collect(),
    )
}

/// `local-kubelet` runs containers with Linux namespaces: its tests, and those that need it to
/// run Pods (the chart's operator), exist on Linux only.
fn local_kubelet_tests() -> Vec<herd_e2e::E2eTest> {
    #[cfg(target_os = "linux")]
    return kubelet::tests().into_iter().chain(helm::tests()).collect();
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}
