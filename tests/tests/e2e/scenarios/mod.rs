//! Runs executed for real on the API server: the operator (in-process, under the chart's RBAC,
//! its run API on HTTPS) creates each Run's Pod, `local-kubelet` plays the node and runs the
//! Pod's `agent` and `sandbox` containers as `herd-runner pod` and `herd-runner sandbox`, the
//! runner reports through the run API, and the Run ends with the report in its status.

mod cluster;
mod leaks;
mod llama;
mod mcp;
mod scripted;

use herd_e2e::E2eTest;

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![
        E2eTest::shared(
            "scenarios::a_scripted_run_succeeds_and_keeps_its_key_secret",
            scripted::a_scripted_run_succeeds_and_keeps_its_key_secret,
        ),
        E2eTest::shared(
            "scenarios::a_crashing_runner_fails_the_run_with_its_message",
            scripted::a_crashing_runner_fails_the_run_with_its_message,
        ),
        E2eTest::shared(
            "scenarios::a_run_calls_a_real_model_server",
            llama::a_run_calls_a_real_model_server,
        ),
        E2eTest::shared(
            "scenarios::a_run_calls_an_http_mcp_server_with_a_secret_header",
            mcp::a_run_calls_an_http_mcp_server_with_a_secret_header,
        ),
    ]
}
