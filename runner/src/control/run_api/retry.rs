//! Retrying run-API requests: what one attempt came to, and jittered exponential backoff
//! (each wait capped, `Retry-After` honoured) until the run's deadline.

use std::future::Future;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::control::ControlError;

/// What one attempt of a request came to.
#[derive(Debug)]
pub(crate) enum Try<T> {
    /// The answer.
    Done(T),
    /// Worth another attempt (no connection, 429, 502-504): why, and how long the server
    /// asked to wait.
    Again {
        why: String,
        retry_after: Option<Duration>,
    },
    /// Not worth another attempt.
    Fail(ControlError),
}

/// How long to wait between attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// Before the first retry (doubled for each further one).
    pub first: Duration,
    /// The longest single wait, `Retry-After` included.
    pub cap: Duration,
}

impl Backoff {
    /// The contract's backoff: 200 ms, doubling, never more than 5 s per wait.
    pub const RUN_API: Backoff = Backoff {
        first: Duration::from_millis(200),
        cap: Duration::from_secs(5),
    };

    /// The wait before retry number `retry` (0 for the first): the doubled wait, capped,
    /// scaled into its upper half by `jitter` (0..=1) so that runners failing together do not
    /// come back together; at least what the server asked for, still capped.
    pub fn wait(&self, retry: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
        let doubled = self
            .first
            .saturating_mul(2u32.saturating_pow(retry.min(31)))
            .min(self.cap);
        let jittered = doubled.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0));
        jittered.max(retry_after.unwrap_or_default()).min(self.cap)
    }
}

/// Runs `attempt` until it is done or fails, waiting as `backoff` says between attempts that
/// are worth repeating; gives up when the next wait would end after `until`. The first
/// attempt is always made.
pub(crate) async fn retrying<T, F, Fut>(
    backoff: Backoff,
    until: Instant,
    what: &str,
    mut attempt: F,
) -> Result<T, ControlError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Try<T>>,
{
    let mut retries = 0u32;
    loop {
        match attempt().await {
            Try::Done(answer) => return Ok(answer),
            Try::Fail(error) => return Err(error),
            Try::Again { why, retry_after } => {
                let jitter = rand::rng().random_range(0.0..=1.0);
                let wait = backoff.wait(retries, retry_after, jitter);
                if Instant::now() + wait > until {
                    let attempts = retries + 1;
                    return Err(ControlError::Unavailable(format!(
                        "{what}: gave up at the run's deadline after {attempts} attempt{}: {why}",
                        if attempts == 1 { "" } else { "s" }
                    )));
                }
                tokio::time::sleep(wait).await;
                retries += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use proptest::prelude::*;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn waits_double_from_200ms_and_stop_at_5s() {
        let b = Backoff::RUN_API;
        let full: Vec<u128> = (0..7).map(|n| b.wait(n, None, 1.0).as_millis()).collect();
        assert_eq!(full, [200, 400, 800, 1600, 3200, 5000, 5000]);
        let least: Vec<u128> = (0..7).map(|n| b.wait(n, None, 0.0).as_millis()).collect();
        assert_eq!(least, [100, 200, 400, 800, 1600, 2500, 2500]);
        assert_eq!(b.wait(u32::MAX, None, 1.0), 5 * SECOND);
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let b = Backoff::RUN_API;
        assert_eq!(b.wait(0, Some(3 * SECOND), 0.0), 3 * SECOND);
        assert_eq!(b.wait(0, Some(60 * SECOND), 0.5), 5 * SECOND);
        // A shorter Retry-After than the backoff does not shorten it.
        assert_eq!(
            b.wait(4, Some(Duration::from_millis(10)), 1.0),
            Duration::from_millis(3200)
        );
    }

    proptest! {
        #[test]
        fn every_wait_is_capped_and_at_least_half_the_backoff(
            retry in 0u32..64,
            after in proptest::option::of(0u64..100_000),
            jitter in -1.0f64..2.0,
        ) {
            let b = Backoff::RUN_API;
            let after = after.map(Duration::from_millis);
            let wait = b.wait(retry, after, jitter);
            prop_assert!(wait <= b.cap);
            prop_assert!(wait >= b.wait(retry, None, 0.0));
            if let Some(after) = after {
                prop_assert!(wait >= after.min(b.cap));
            }
        }
    }

    fn again(retry_after: Option<Duration>) -> Try<u32> {
        Try::Again {
            why: "503 Service Unavailable".into(),
            retry_after,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_is_repeated_until_it_is_done() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        let answer = retrying(Backoff::RUN_API, start + 60 * SECOND, "POST result", || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move { if n < 3 { again(None) } else { Try::Done(n) } }
        })
        .await
        .unwrap();
        assert_eq!(answer, 3);
        // Three waits: at least 100+200+400 ms, at most 200+400+800 ms of (paused) time.
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(700) && waited <= Duration::from_millis(1400),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_servers_retry_after_is_waited_for() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        retrying(
            Backoff::RUN_API,
            start + 60 * SECOND,
            "POST progress",
            || {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n < 2 {
                        again(Some(3 * SECOND))
                    } else {
                        Try::Done(n)
                    }
                }
            },
        )
        .await
        .unwrap();
        let waited = start.elapsed();
        assert!(waited >= 6 * SECOND && waited < 7 * SECOND, "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_at_the_deadline_with_the_last_reason() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        let until = start + 20 * SECOND;
        let error = retrying(Backoff::RUN_API, until, "POST result", || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { again(None) }
        })
        .await
        .unwrap_err();
        assert!(Instant::now() <= until);
        let attempts = calls.load(Ordering::SeqCst);
        // 20 s of waits of at most 5 s each, most of them at the cap: between 6 and 12 tries.
        assert!((6..=12).contains(&attempts), "{attempts}");
        let text = error.to_string();
        assert!(matches!(error, ControlError::Unavailable(_)), "{text}");
        assert!(
            text.contains(&format!(
                "POST result: gave up at the run's deadline after {attempts} attempts: 503"
            )),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_is_not_repeated_and_a_passed_deadline_still_gets_one_attempt() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        let error = retrying(Backoff::RUN_API, start + 60 * SECOND, "GET config", || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Try::<u32>::Fail(ControlError::Refused("403 Forbidden".into())) }
        })
        .await
        .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(matches!(error, ControlError::Refused(_)));
        assert_eq!(start.elapsed(), Duration::ZERO);

        let late = retrying(Backoff::RUN_API, start, "POST result", || async {
            Try::Done(7)
        })
        .await;
        assert_eq!(late.unwrap(), 7);
    }
}
