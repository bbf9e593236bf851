//! The middleware chain: small cross-cutting behaviours around the loop, one per file.

pub mod placement;
pub mod circuit_breaker;
pub mod last_turn;
pub mod llm_error_handling;
pub mod reminders;
