//! The run API on the real API server, called as a runner pod calls it: over HTTPS verified
//! against the namespace's `herd-run-api-ca`, with tokens from TokenRequest for `herd-runner`
//! bound to the Run's Pod (audience `herd.dev`), checked by real TokenReviews. Each test runs its
//! own in-process operator under the chart's RBAC; no kubelet runs (Pods stay Pending unless a
//! test plays the kubelet), which the run API does not need.

mod budgets;
mod children;
mod interruptions;
mod memory;
mod questions;
mod refusals;
mod reports;
mod support;

use herd_e2e::E2eTest;

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![
        E2eTest::shared(
            "run_api::budgets_hold_runs_count_once_and_release_at_the_reset",
            budgets::budgets_hold_runs_count_once_and_release_at_the_reset,
        ),
        E2eTest::shared(
            "run_api::config_progress_and_result_end_the_run",
            reports::config_progress_and_result_end_the_run,
        ),
        E2eTest::shared(
            "run_api::usage_split_children_and_cost_reach_status_and_metrics",
            reports::usage_split_children_and_cost_reach_status_and_metrics,
        ),
        E2eTest::shared(
            "run_api::a_result_too_large_fails_the_run",
            reports::a_result_too_large_fails_the_run,
        ),
        E2eTest::shared(
            "run_api::children_start_wait_and_hand_over_files",
            children::children_start_wait_and_hand_over_files,
        ),
        E2eTest::shared(
            "run_api::a_question_waits_for_its_answer_and_the_next_attempt_resumes",
            questions::a_question_waits_for_its_answer_and_the_next_attempt_resumes,
        ),
        E2eTest::shared(
            "run_api::a_checkpoint_too_large_fails_the_run",
            questions::a_checkpoint_too_large_fails_the_run,
        ),
        E2eTest::shared(
            "run_api::an_interrupted_attempts_checkpoint_resumes_the_next_attempt",
            interruptions::an_interrupted_attempts_checkpoint_resumes_the_next_attempt,
        ),
        E2eTest::shared(
            "run_api::memory_updates_of_runs_ending_together_lose_nothing",
            memory::memory_updates_of_runs_ending_together_lose_nothing,
        ),
        E2eTest::shared(
            "run_api::requests_are_refused_as_they_should_be",
            refusals::requests_are_refused_as_they_should_be,
        ),
    ]
}
