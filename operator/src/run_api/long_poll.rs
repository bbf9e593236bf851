//! The run API's long polls (`?wait=`, docs/run-api.md): a request waits at most 55 s for its answer
//! (a child's outcome, an answer to a question), looking again only when a Run it watches
//! changes in the cache, never on a timer.

use std::time::Duration;

use herd_crds::run::Run;
use kube::runtime::reflector::ObjectRef;
use serde::Deserialize;
use tokio::time::Instant;

use super::failure::Failure;
use crate::controller::run_changes::RunChanges;

/// The longest a poll waits: under the usual 60 s of proxies and load balancers.
pub const MAX_WAIT: Duration = Duration::from_secs(55);

/// The `?wait=<seconds>` of a long poll; absent or 0 answers at once.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct WaitQuery {
    /// Seconds to wait for an answer, capped at [`MAX_WAIT`].
    #[serde(default)]
    pub wait: Option<u64>,
}

impl WaitQuery {
    /// The `wait` of a request's query string (`None`: no query), other parameters ignored;
    /// refused unless it is a number of seconds.
    pub fn from_query(query: Option<&str>) -> Result<Self, Failure> {
        let mut wait = None;
        for pair in query.unwrap_or_default().split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if key == "wait" {
                let seconds = value.parse::<u64>().map_err(|_| {
                    Failure::bad_request(format!("wait={value} is not a number of seconds"))
                })?;
                wait = Some(seconds);
            }
        }
        Ok(WaitQuery { wait })
    }

    /// How long this poll may wait.
    pub fn duration(self) -> Duration {
        Duration::from_secs(self.wait.unwrap_or(0)).min(MAX_WAIT)
    }
}

/// Looks with `look` until it finds something or `wait` has passed (then `None`), looking again
/// each time one of `runs` may have changed.
pub async fn long_poll<T, E, Look>(
    changes: &RunChanges,
    runs: &[&ObjectRef<Run>],
    wait: Duration,
    mut look: impl FnMut() -> Look,
) -> Result<Option<T>, E>
where
    Look: Future<Output = Result<Option<T>, E>>,
{
    let deadline = Instant::now() + wait;
    // Listening starts before the first look, so no change slips between the two.
    let mut listener = changes.listen();
    loop {
        if let Some(found) = look().await? {
            return Ok(Some(found));
        }
        if tokio::time::timeout_at(deadline, listener.changed(runs))
            .await
            .is_err()
        {
            return Ok(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::controller::run_changes::tests::run;
    use kube::runtime::watcher;

    #[test]
    fn the_wait_is_capped_and_defaults_to_none() {
        assert_eq!(WaitQuery::default().duration(), Duration::ZERO);
        assert_eq!(
            WaitQuery { wait: Some(10) }.duration(),
            Duration::from_secs(10)
        );
        assert_eq!(WaitQuery { wait: Some(3600) }.duration(), MAX_WAIT);
    }

    #[test]
    fn the_wait_is_read_from_the_query() {
        let wait = |query| WaitQuery::from_query(query).map(|q| q.wait);
        assert_eq!(wait(None), Ok(None));
        assert_eq!(wait(Some("")), Ok(None));
        assert_eq!(wait(Some("wait=30")), Ok(Some(30)));
        assert_eq!(wait(Some("x=1&wait=2&y")), Ok(Some(2)), "others ignored");
        assert_eq!(wait(Some("wait=0")), Ok(Some(0)));
        for bad in ["wait=", "wait", "wait=-1", "wait=1.5", "wait=abc"] {
            let refused = wait(Some(bad)).unwrap_err();
            assert_eq!(refused.status.as_u16(), 400, "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_query_is_read_or_refused_never_a_panic(query in ".{0,40}") {
            let _ = WaitQuery::from_query(Some(&query));
        }

        #[test]
        fn a_number_of_seconds_reads_back(seconds: u64, before in "[a-z]{0,5}") {
            let query = format!("{before}=1&wait={seconds}");
            let read = WaitQuery::from_query(Some(&query)).map(|q| q.wait);
            proptest::prop_assert_eq!(read, Ok(Some(seconds)));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_poll_looks_again_only_when_its_run_changes() {
        let changes = RunChanges::default();
        let (mine, other) = (run("mine"), run("other"));
        let looks = Arc::new(AtomicU32::new(0));
        let poll = {
            let (changes, looks) = (changes.clone(), looks.clone());
            let watched = ObjectRef::from_obj(&mine);
            tokio::spawn(async move {
                long_poll(&changes, &[&watched], MAX_WAIT, || {
                    let n = looks.fetch_add(1, Ordering::SeqCst) + 1;
                    async move { Ok::<_, Infallible>((n == 2).then_some(n)) }
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(looks.load(Ordering::SeqCst), 1, "the first look");
        changes.observe(&Ok(watcher::Event::Apply(other)));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(looks.load(Ordering::SeqCst), 1, "another Run changed");
        changes.observe(&Ok(watcher::Event::Apply(mine)));
        assert_eq!(poll.await.ok(), Some(Ok(Some(2))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_poll_ends_empty_when_its_wait_is_over() {
        let changes = RunChanges::default();
        let watched = ObjectRef::from_obj(&run("mine"));
        let started = Instant::now();
        let found = long_poll(&changes, &[&watched], Duration::from_secs(5), || async {
            Ok::<Option<()>, Infallible>(None)
        })
        .await;
        assert_eq!(found, Ok(None));
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }
}
