//! Test doubles of the sandbox, for this crate's tests and, with the `test-support` feature,
//! for the tests of the crates that use it.

mod fake_executor;
mod fake_socket;

pub use fake_executor::FakeExecutor;
pub use fake_socket::{ConnectEachTime, fake_sandbox, hello};
