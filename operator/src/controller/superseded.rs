//! Read-your-writes for a controller over a cache: the versions of objects this process wrote
//! over. A reconcile of an object whose cached `resourceVersion` is one it already replaced
//! works from the past; it would only repeat the write (and be refused with a 409), so it
//! waits for the watch event of the newer version instead. Versions are compared for equality
//! only, as the API allows.
//!
//! A write the server took as a no-op keeps the old version and sends no event, so a version
//! is only held stale for [`WATCH_GRACE`]; after that the cache is trusted again.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a written-over version waits for its watch event before the cache is trusted.
pub const WATCH_GRACE: Duration = Duration::from_secs(5);

/// The version each object (by uid) had when this process last wrote over it, and when.
#[derive(Debug, Default)]
pub struct Superseded {
    versions: Mutex<HashMap<String, (String, Instant)>>,
}

impl Superseded {
    /// Remembers that the object `uid` at `version` was written over at `now`; entries past
    /// their grace are dropped so deleted objects do not accumulate.
    pub fn wrote_over(&self, uid: &str, version: Option<&str>, now: Instant) {
        let Some(version) = version else { return };
        let mut versions = self.lock();
        versions.retain(|_, (_, at)| now.duration_since(*at) < WATCH_GRACE);
        versions.insert(uid.to_owned(), (version.to_owned(), now));
    }

    /// How much longer the cached `version` of `uid` is to be waited out, if it is one this
    /// process wrote over within the grace; any other version forgets the entry.
    pub fn stale_for(&self, uid: &str, version: Option<&str>, now: Instant) -> Option<Duration> {
        let mut versions = self.lock();
        let (written, at) = versions.get(uid)?;
        let left = WATCH_GRACE.checked_sub(now.duration_since(*at));
        match (version, left) {
            (Some(version), Some(left)) if version == written && !left.is_zero() => Some(left),
            _ => {
                versions.remove(uid);
                None
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, (String, Instant)>> {
        self.versions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_written_over_is_stale_until_a_newer_one_is_seen() {
        let superseded = Superseded::default();
        let now = Instant::now();
        assert_eq!(superseded.stale_for("a", Some("10"), now), None);
        superseded.wrote_over("a", Some("10"), now);
        assert_eq!(
            superseded.stale_for("a", Some("10"), now),
            Some(WATCH_GRACE)
        );
        let later = now + Duration::from_secs(1);
        assert_eq!(
            superseded.stale_for("a", Some("10"), later),
            Some(WATCH_GRACE - Duration::from_secs(1)),
            "until a newer one shows"
        );
        assert_eq!(
            superseded.stale_for("b", Some("10"), now),
            None,
            "per object"
        );
        assert_eq!(superseded.stale_for("a", Some("11"), later), None);
        assert_eq!(
            superseded.stale_for("a", Some("10"), later),
            None,
            "forgotten once newer was seen"
        );
        superseded.wrote_over("a", None, now);
        assert_eq!(superseded.stale_for("a", None, now), None);
    }

    #[test]
    fn a_write_without_an_event_is_trusted_again_after_the_grace() {
        let superseded = Superseded::default();
        let now = Instant::now();
        superseded.wrote_over("a", Some("10"), now);
        assert_eq!(
            superseded.stale_for("a", Some("10"), now + WATCH_GRACE),
            None
        );
        assert_eq!(
            superseded.stale_for("a", Some("10"), now),
            None,
            "forgotten"
        );
    }

    #[test]
    fn entries_past_their_grace_are_dropped_on_the_next_write() {
        let superseded = Superseded::default();
        let now = Instant::now();
        superseded.wrote_over("gone", Some("1"), now);
        superseded.wrote_over("b", Some("2"), now + WATCH_GRACE);
        assert_eq!(superseded.lock().len(), 1);
    }
}
