//! Runs executed for real on the API server: the operator (in-process, under the chart's RBAC,
//! its run API on HTTPS) creates each Run's Pod, `local-kubelet` plays the node and runs the
//! Pod's `agent` and `sandbox` containers as `herd-runner pod` and `herd-runner sandbox`, the
//! runner reports through the run API, and the Run ends with the report in its status.

pub(crate) mod approval;
mod clarification;
pub(crate) mod cluster;
mod fan_out;
mod leaks;
mod llama;
mod mcp;
mod memory;
pub(crate) mod script;
mod scripted;
mod suspension;
mod traces;

use herd_e2e::E2eTest;

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![
        E2eTest::shared(
            "scenarios::a_scripted_run_succeeds_and_keeps_its_key_secret",
            scripted::a_scripted_run_succeeds_and_keeps_its_key_secret,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::a_crashing_runner_fails_the_run_with_its_message",
            scripted::a_crashing_runner_fails_the_run_with_its_message,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::a_run_calls_a_real_model_server",
            llama::a_run_calls_a_real_model_server,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::six_children_in_three_rounds_bring_their_files_back",
            fan_out::six_children_in_three_rounds_bring_their_files_back,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::an_operator_restart_mid_fan_out_loses_nothing",
            fan_out::an_operator_restart_mid_fan_out_loses_nothing,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::a_child_cannot_ask_or_widen_its_tools",
            fan_out::a_child_cannot_ask_or_widen_its_tools,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::an_answer_resumes_the_waiting_pod",
            clarification::an_answer_resumes_the_waiting_pod,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::a_denied_call_is_told_and_an_approved_one_runs",
            approval::a_denied_call_is_told_and_an_approved_one_runs,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::a_lost_pod_resumes_from_the_checkpoint",
            clarification::a_lost_pod_resumes_from_the_checkpoint,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::a_suspended_run_resumes_with_its_files_and_its_working_time",
            suspension::a_suspended_run_resumes_with_its_files_and_its_working_time,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::plan_mode_todos_show_while_the_run_waits",
            clarification::plan_mode_todos_show_while_the_run_waits,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::runs_ending_together_lose_no_memory",
            memory::runs_ending_together_lose_no_memory,
        )
        .on_node(),
        // Alone: the operator's tracer is process-wide while it runs.
        E2eTest::exclusive(
            "scenarios::a_fan_out_is_one_trace_from_operator_to_every_model_call",
            traces::a_fan_out_is_one_trace_from_operator_to_every_model_call,
        )
        .on_node(),
        E2eTest::shared(
            "scenarios::a_run_calls_an_http_mcp_server_with_a_secret_header",
            mcp::a_run_calls_an_http_mcp_server_with_a_secret_header,
        )
        .on_node(),
    ]
}
