//! How long a failing object waits before its next reconcile.

use std::time::Duration;

/// First retry after a failure.
pub const MIN: Duration = Duration::from_secs(1);
/// Longest wait between retries.
pub const MAX: Duration = Duration::from_secs(300);

/// The wait after `failures` consecutive failures (1 = the first): 1 s, doubling, at most
/// 5 min.
pub fn after(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    MIN.saturating_mul(1 << exponent).min(MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_one_second_to_five_minutes() {
        let waits: Vec<u64> = (0..=12).map(|n| after(n).as_secs()).collect();
        assert_eq!(waits, [1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(after(u32::MAX), MAX);
    }
}
