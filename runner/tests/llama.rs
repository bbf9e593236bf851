//! Tests against a real llama.cpp `llama-server` (SmolLM2-135M), both of its APIs: Chat
//! Completions for `provider: openai` and the Messages API for `provider: anthropic`.
//!
//! One binary with its own `main` (`harness = false`), so the one server it starts is stopped
//! after the last test: see `llama/harness.rs` for how tests get the server. A new module
//! `llama/x.rs` is declared below as `#[path = "llama/x.rs"] mod x;` (a crate root looks for
//! its modules beside itself) and its `x::tests()` added to the trials in `main`.

// Test helpers outside #[test] functions report failures through `Failed`; the few
// invariants of the test data itself may `expect`.
#![allow(clippy::expect_used)]

#[path = "llama/harness.rs"]
mod harness;
#[path = "otlp/mod.rs"]
mod otlp;
#[path = "llama/prompt_size.rs"]
mod prompt_size;
#[path = "llama/side_calls.rs"]
mod side_calls;
#[path = "llama/traces.rs"]
mod traces;
#[path = "llama/wire.rs"]
mod wire;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = libtest_mimic::Arguments::from_args();
    let mut trials = wire::tests();
    trials.extend(prompt_size::tests());
    trials.extend(side_calls::tests());
    trials.extend(traces::tests());
    let conclusion = libtest_mimic::run(&args, trials);
    harness::stop();
    conclusion.exit_code()
}
