//! What several middlewares share; none of these is a middleware itself.

pub mod active_skills;
pub mod circuit_breaker;
pub mod clock;
pub mod last_turn;
pub mod reminders;
pub mod side_call;
#[cfg(test)]
pub(crate) mod test_support;
