//! A rate limit of requests per Run (docs/run-api.md: 20 requests/s, with a burst of as many),
//! so one runner in a loop cannot crowd out the others or the API server behind the run API.
//! `governor`'s keyed GCRA limiter does the counting; the clock is a parameter so the tests
//! move time by hand.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::HashMapStateStore;
use governor::{Quota, RateLimiter as KeyedLimiter};

/// Requests per second each Run may make, and the burst it may save up.
pub const REQUESTS_PER_SECOND: NonZeroU32 = match NonZeroU32::new(20) {
    Some(rate) => rate,
    // Evaluated while compiling: 20 is not zero.
    None => unreachable!(),
};
/// Runs remembered before those whose state is as good as fresh (idle Runs) are forgotten.
const PRUNE_ABOVE: usize = 1024;

/// Requests per Run, limited.
pub struct RateLimiter<C: Clock = DefaultClock> {
    limiter: KeyedLimiter<String, HashMapStateStore<String>, C, NoOpMiddleware<C::Instant>>,
    clock: C,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self::with_clock(REQUESTS_PER_SECOND, DefaultClock::default())
    }
}

impl<C: Clock + Clone> RateLimiter<C> {
    /// `per_second` requests a second per Run, with a burst of as many, timed by `clock`.
    pub fn with_clock(per_second: NonZeroU32, clock: C) -> Self {
        RateLimiter {
            limiter: KeyedLimiter::hashmap_with_clock(Quota::per_second(per_second), clock.clone()),
            clock,
        }
    }

    /// Lets one request of `run` through, or says how long until one may go.
    pub fn take(&self, run: &str) -> Result<(), Duration> {
        if self.limiter.len() > PRUNE_ABOVE {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&run.to_owned())
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

/// The `Retry-After` of a wait: whole seconds, at least 1.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    let whole = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    whole.max(1)
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    fn limiter() -> (RateLimiter<FakeRelativeClock>, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        (
            RateLimiter::with_clock(REQUESTS_PER_SECOND, clock.clone()),
            clock,
        )
    }

    #[test]
    fn a_burst_of_twenty_then_twenty_a_second() {
        let (limiter, clock) = limiter();
        for i in 0..20 {
            assert!(limiter.take("ns/r").is_ok(), "request {i}");
        }
        let wait = limiter.take("ns/r").unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_millis(50),
            "{wait:?}"
        );
        assert!(limiter.take("ns/other").is_ok(), "per Run");
        clock.advance(Duration::from_millis(50));
        assert!(limiter.take("ns/r").is_ok(), "one request more after 50 ms");
        assert!(limiter.take("ns/r").is_err());
        clock.advance(Duration::from_secs(60));
        for i in 0..20 {
            assert!(limiter.take("ns/r").is_ok(), "refilled {i}");
        }
        assert!(limiter.take("ns/r").is_err(), "never above the burst");
    }

    #[test]
    fn a_steady_rate_is_served_and_a_faster_one_is_cut_to_it() {
        let (limiter, clock) = limiter();
        let (mut served, mut refused) = (0, 0);
        // 40 requests a second for 10 seconds.
        for _ in 0..400 {
            match limiter.take("r") {
                Ok(()) => served += 1,
                Err(_) => refused += 1,
            }
            clock.advance(Duration::from_millis(25));
        }
        assert!((210..=221).contains(&served), "served {served}");
        assert_eq!(served + refused, 400);
    }

    #[test]
    fn idle_runs_are_forgotten_past_the_prune_size() {
        let (limiter, clock) = limiter();
        for i in 0..=PRUNE_ABOVE {
            limiter.take(&format!("r{i}")).unwrap();
        }
        clock.advance(Duration::from_secs(10));
        limiter.take("busy").unwrap();
        assert_eq!(limiter.limiter.len(), 1, "only the Run just seen");
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_seconds(Duration::from_secs(3)), 3);
    }
}
