//! Placeholder library so the e2e crate has a target; the tests live in `tests/`.
