//! The clock the date-aware middlewares read, injectable so tests can cross midnight.

use std::sync::Arc;

/// The current local date and time.
pub type Clock = Arc<dyn Fn() -> jiff::Zoned + Send + Sync>;

/// The system clock in the process's time zone (`TZ`, else the system's; UTC in most pods).
pub fn system_clock() -> Clock {
    Arc::new(jiff::Zoned::now)
}

/// A clock stopped at `time` (RFC 9557, e.g. `2026-03-01T09:00:00+00:00[UTC]`).
#[cfg(test)]
pub fn fixed(time: &str) -> Clock {
    let zoned: jiff::Zoned = time.parse().expect("a valid zoned time");
    Arc::new(move || zoned.clone())
}

/// The date as the model sees it: `YYYY-MM-DD, Weekday`.
pub fn date_line(now: &jiff::Zoned) -> String {
    now.strftime("%Y-%m-%d, %A").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_date_line_names_the_weekday() {
        let clock = fixed("2026-03-01T09:00:00+00:00[UTC]");
        assert_eq!(date_line(&clock()), "2026-03-01, Sunday");
    }
}
