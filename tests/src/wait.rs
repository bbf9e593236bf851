//! Waiting for the cluster to reach a state, always with a deadline.

use std::future::Future;
use std::time::Duration;

use anyhow::bail;

/// The longest any end-to-end wait may take: a test waiting longer hides a hang.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// First and longest pause between two probes.
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// Calls `probe` until it returns `Some`, for at most `timeout` (capped at [`MAX_WAIT`]).
/// An `Err` from the probe ends the wait at once; running out of time fails naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let timeout = timeout.min(MAX_WAIT);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pause = FIRST_PAUSE;
    loop {
        if let Some(value) = probe().await? {
            return Ok(value);
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn returns_the_first_value() {
        let mut calls = 0;
        let value = wait_for("three calls", Duration::from_secs(5), || {
            calls += 1;
            let done = calls == 3;
            async move { Ok(done.then_some(calls)) }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn fails_at_the_deadline_naming_what_it_waited_for() {
        let error = wait_for::<(), _, _>("the moon", Duration::from_secs(2), || async { Ok(None) })
            .await
            .unwrap_err();
        assert_eq!(error.to_string(), "timed out after 2s waiting for the moon");
    }

    #[tokio::test(start_paused = true)]
    async fn never_waits_longer_than_a_minute() {
        let start = tokio::time::Instant::now();
        let error =
            wait_for::<(), _, _>("forever", Duration::from_secs(3600), || async { Ok(None) })
                .await
                .unwrap_err();
        assert_eq!(error.to_string(), "timed out after 60s waiting for forever");
        assert!(start.elapsed() <= MAX_WAIT + LONGEST_PAUSE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_error_ends_the_wait() {
        let error =
            wait_for::<(), _, _>("x", Duration::from_secs(5), || async { bail!("forbidden") })
                .await
                .unwrap_err();
        assert_eq!(error.to_string(), "forbidden");
    }
}
