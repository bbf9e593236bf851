//! What several middlewares share; none of these is a middleware itself.

pub(crate) mod active_skills;
pub(crate) mod circuit_breaker;
pub(crate) mod clock;
pub(crate) mod last_turn;
pub(crate) mod reminders;
pub(crate) mod side_call;
#[cfg(test)]
mod side_call_tests;
#[cfg(test)]
pub(crate) mod test_doubles;
