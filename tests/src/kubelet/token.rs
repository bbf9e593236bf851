//! A projected ServiceAccount token and when the kubelet renews it: once 80 % of its
//! lifetime has passed, or 24 hours after it was issued, whichever comes first.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// The latest a token is kept, whatever its lifetime.
const MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// A token from a TokenRequest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The JWT.
    pub value: String,
    /// When it was requested.
    pub issued: Timestamp,
    /// When it expires (`status.expirationTimestamp`).
    pub expires: Timestamp,
}

impl Token {
    /// When to request a new one.
    pub fn renew_at(&self) -> Timestamp {
        let lifetime = self.expires.duration_since(self.issued);
        let renew = lifetime
            .checked_mul(4)
            .map(|d| d / 5)
            .unwrap_or(lifetime)
            .min(SignedDuration::try_from(MAX_AGE).unwrap_or(SignedDuration::MAX));
        self.issued.checked_add(renew).unwrap_or(self.expires)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(lifetime: i64) -> Token {
        let issued = Timestamp::from_second(1_700_000_000).unwrap();
        Token {
            value: "jwt".into(),
            issued,
            expires: issued + SignedDuration::from_secs(lifetime),
        }
    }

    #[test]
    fn renewed_at_eighty_percent_of_its_life_or_after_a_day() {
        let ten_minutes = token(600);
        assert_eq!(
            ten_minutes.renew_at(),
            ten_minutes.issued + SignedDuration::from_secs(480)
        );
        let a_year = token(365 * 24 * 3600);
        assert_eq!(
            a_year.renew_at(),
            a_year.issued + SignedDuration::from_secs(24 * 3600)
        );
        let expired = token(-5);
        assert!(expired.renew_at() <= expired.issued, "renewed at once");
    }
}
