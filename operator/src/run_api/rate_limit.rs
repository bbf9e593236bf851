//! A token bucket of requests per Run (docs/run-api.md: 20 requests/s), so one runner in a loop cannot
//! crowd out the others or the API server behind the run API. Pure: the clock is passed in.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Requests per second each Run may make, and the burst it may save up.
pub const REQUESTS_PER_SECOND: u32 = 20;
/// Buckets kept before the full ones (idle Runs) are forgotten.
const PRUNE_ABOVE: usize = 1024;

/// One Run's bucket: `tokens` left at `updated`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl Bucket {
    fn refilled(self, now: Instant, rate: f64, burst: f64) -> Bucket {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        Bucket {
            tokens: (self.tokens + elapsed * rate).min(burst),
            updated: now,
        }
    }
}

/// Token buckets by Run.
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self::new(REQUESTS_PER_SECOND)
    }
}

impl RateLimiter {
    /// `per_second` requests a second per Run, with a burst of as many.
    pub fn new(per_second: u32) -> Self {
        RateLimiter {
            rate: f64::from(per_second.max(1)),
            burst: f64::from(per_second.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token of `run`'s bucket at `now`, or says how long until one is there.
    pub fn take(&self, run: &str, now: Instant) -> Result<(), Duration> {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() > PRUNE_ABOVE {
            let (rate, burst) = (self.rate, self.burst);
            buckets.retain(|_, bucket| bucket.refilled(now, rate, burst).tokens < burst);
        }
        let full = Bucket {
            tokens: self.burst,
            updated: now,
        };
        let bucket = buckets.entry(run.to_owned()).or_insert(full);
        let current = bucket.refilled(now, self.rate, self.burst);
        if current.tokens >= 1.0 {
            *bucket = Bucket {
                tokens: current.tokens - 1.0,
                ..current
            };
            Ok(())
        } else {
            *bucket = current;
            Err(Duration::from_secs_f64((1.0 - current.tokens) / self.rate))
        }
    }
}

/// The `Retry-After` of a wait: whole seconds, at least 1.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    let whole = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    whole.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_twenty_then_twenty_a_second() {
        let limiter = RateLimiter::default();
        let start = Instant::now();
        for i in 0..20 {
            assert!(limiter.take("ns/r", start).is_ok(), "request {i}");
        }
        let wait = limiter.take("ns/r", start).unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_millis(50),
            "{wait:?}"
        );
        assert!(limiter.take("ns/other", start).is_ok(), "per Run");
        let later = start + Duration::from_millis(50);
        assert!(
            limiter.take("ns/r", later).is_ok(),
            "one token back after 50 ms"
        );
        assert!(limiter.take("ns/r", later).is_err());
        let much_later = start + Duration::from_secs(60);
        for i in 0..20 {
            assert!(limiter.take("ns/r", much_later).is_ok(), "refilled {i}");
        }
        assert!(
            limiter.take("ns/r", much_later).is_err(),
            "never above the burst"
        );
    }

    #[test]
    fn a_steady_rate_is_served_and_a_faster_one_is_cut_to_it() {
        let limiter = RateLimiter::default();
        let start = Instant::now();
        let (mut served, mut refused) = (0, 0);
        // 40 requests a second for 10 seconds.
        for i in 0..400 {
            match limiter.take("r", start + Duration::from_millis(25 * i)) {
                Ok(()) => served += 1,
                Err(_) => refused += 1,
            }
        }
        assert!((210..=221).contains(&served), "served {served}");
        assert_eq!(served + refused, 400);
    }

    #[test]
    fn idle_runs_are_forgotten_past_the_prune_size() {
        let limiter = RateLimiter::default();
        let start = Instant::now();
        for i in 0..=PRUNE_ABOVE {
            limiter.take(&format!("r{i}"), start).unwrap();
        }
        limiter
            .take("busy", start + Duration::from_secs(10))
            .unwrap();
        let kept = limiter.buckets.lock().unwrap().len();
        assert_eq!(kept, 1, "only the bucket just used");
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_seconds(Duration::from_secs(3)), 3);
    }
}
