//! A circuit breaker for model calls (DeerFlow's `circuit_breaker`): after enough consecutive
//! failures, calls fail fast until a cool-down has passed; then one probe decides whether the
//! provider is back.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Consecutive failures that open the breaker (DeerFlow's `failure_threshold`).
pub const FAILURE_THRESHOLD: u32 = 5;
/// How long an open breaker refuses calls before it lets one probe through
/// (DeerFlow's `recovery_timeout_sec`).
pub const RECOVERY_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
    },
    /// The cool-down passed; `probing` while the one trial call is in flight.
    HalfOpen {
        probing: bool,
    },
}

/// Whether a call may go out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Go ahead.
    Allowed,
    /// The breaker is open; calls resume in about this long.
    Refused { retry_in: Duration },
}

/// The breaker. One per run, shared by the run's agents when they call the same provider.
#[derive(Debug)]
pub struct CircuitBreaker {
    threshold: u32,
    recovery: Duration,
    state: Mutex<State>,
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        CircuitBreaker::new(FAILURE_THRESHOLD, RECOVERY_TIMEOUT)
    }
}

impl CircuitBreaker {
    /// A closed breaker that opens after `threshold` consecutive failures (at least 1) and
    /// probes again after `recovery`.
    pub fn new(threshold: u32, recovery: Duration) -> Self {
        CircuitBreaker {
            threshold: threshold.max(1),
            recovery,
            state: Mutex::new(State::Closed { failures: 0 }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks to make one call. In the half-open state only the first caller is let through
    /// (the probe); the others are refused until it reports back.
    pub fn admit(&self) -> Admission {
        let mut state = self.lock();
        let now = Instant::now();
        match *state {
            State::Closed { .. } => Admission::Allowed,
            State::Open { until } if now < until => Admission::Refused {
                retry_in: until - now,
            },
            State::Open { .. } | State::HalfOpen { probing: false } => {
                *state = State::HalfOpen { probing: true };
                Admission::Allowed
            }
            State::HalfOpen { probing: true } => Admission::Refused {
                retry_in: Duration::ZERO,
            },
        }
    }

    /// The provider answered (even with an error that is the request's fault): close.
    pub fn record_success(&self) {
        *self.lock() = State::Closed { failures: 0 };
    }

    /// The provider failed in a way worth retrying (5xx, 429, connection, timeout).
    pub fn record_failure(&self) {
        let mut state = self.lock();
        let open = State::Open {
            until: Instant::now() + self.recovery,
        };
        *state = match *state {
            State::Closed { failures } if failures.saturating_add(1) < self.threshold => {
                State::Closed {
                    failures: failures.saturating_add(1),
                }
            }
            State::Closed { .. } | State::HalfOpen { .. } | State::Open { .. } => open,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn opens_after_the_threshold_and_probes_after_the_cool_down() {
        let breaker = CircuitBreaker::default();
        for _ in 0..FAILURE_THRESHOLD - 1 {
            breaker.record_failure();
            assert_eq!(breaker.admit(), Admission::Allowed);
        }
        breaker.record_failure();
        assert_eq!(
            breaker.admit(),
            Admission::Refused {
                retry_in: RECOVERY_TIMEOUT
            }
        );
        tokio::time::advance(RECOVERY_TIMEOUT).await;
        assert_eq!(breaker.admit(), Admission::Allowed, "the probe");
        assert!(
            matches!(breaker.admit(), Admission::Refused { .. }),
            "only one probe at a time"
        );
        breaker.record_success();
        assert_eq!(breaker.admit(), Admission::Allowed);
        assert!(matches!(*breaker.lock(), State::Closed { .. }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_opens_again_at_once() {
        let breaker = CircuitBreaker::new(1, RECOVERY_TIMEOUT);
        breaker.record_failure();
        tokio::time::advance(RECOVERY_TIMEOUT).await;
        assert_eq!(breaker.admit(), Admission::Allowed);
        breaker.record_failure();
        assert!(matches!(breaker.admit(), Admission::Refused { .. }));
    }

    #[test]
    fn a_success_resets_the_count() {
        let breaker = CircuitBreaker::new(2, RECOVERY_TIMEOUT);
        breaker.record_failure();
        breaker.record_success();
        breaker.record_failure();
        assert_eq!(breaker.admit(), Admission::Allowed);
    }
}
