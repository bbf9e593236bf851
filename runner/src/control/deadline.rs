//! A run's deadline, shared by everything that must end with the run (the lead's loop, the
//! timer around it, the run API's retries) and movable: in a cluster the time a question waits
//! for its answer counts against the Run's `inputTimeout`, not its `timeout`, so the clock
//! stops while the question waits and the run API re-bases it on the time it says is left.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Where the clock stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Clock {
    /// Running: the deadline falls then.
    At(Instant),
    /// Stopped (a question waits for its answer) with this much left.
    Paused { left: Duration },
}

/// One run's deadline; clones share it, so a re-based deadline reaches every holder.
#[derive(Clone, Debug)]
pub struct Deadline {
    clock: Arc<watch::Sender<Clock>>,
    /// How much earlier than the shared deadline this view of it falls.
    earlier_by: Duration,
}

impl PartialEq for Deadline {
    /// The same deadline seen the same way (not merely the same instant now).
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.clock, &other.clock) && self.earlier_by == other.earlier_by
    }
}

impl Eq for Deadline {}

impl Deadline {
    /// A deadline falling at `at`.
    pub fn at(at: Instant) -> Self {
        Deadline {
            clock: Arc::new(watch::Sender::new(Clock::At(at))),
            earlier_by: Duration::ZERO,
        }
    }

    /// The same deadline, falling `by` earlier (time kept for posting the result); it moves
    /// with this one.
    pub fn earlier_by(&self, by: Duration) -> Self {
        Deadline {
            clock: self.clock.clone(),
            earlier_by: self.earlier_by.saturating_add(by),
        }
    }

    /// When the deadline falls if the clock runs from now on.
    pub fn instant(&self) -> Instant {
        let now = Instant::now();
        match *self.clock.borrow() {
            Clock::At(at) => at.checked_sub(self.earlier_by).unwrap_or(now.min(at)),
            Clock::Paused { left } => now + left.saturating_sub(self.earlier_by),
        }
    }

    /// The time left (zero once it has passed).
    pub fn left(&self) -> Duration {
        self.instant().saturating_duration_since(Instant::now())
    }

    /// Whether it has passed (never while the clock is stopped).
    pub fn has_passed(&self) -> bool {
        match *self.clock.borrow() {
            Clock::At(_) => self.left().is_zero(),
            Clock::Paused { .. } => false,
        }
    }

    /// Stops the clock until the guard is dropped; then it runs on from what is left.
    pub fn pause(&self) -> Paused {
        let now = Instant::now();
        let mut paused_here = false;
        self.clock.send_if_modified(|clock| match *clock {
            Clock::At(at) => {
                *clock = Clock::Paused {
                    left: at.saturating_duration_since(now),
                };
                paused_here = true;
                true
            }
            Clock::Paused { .. } => false,
        });
        Paused {
            clock: paused_here.then(|| self.clock.clone()),
        }
    }

    /// Re-bases the shared deadline (not this view's): `left` from now, or from when the
    /// clock runs again if it is stopped.
    pub fn rebase(&self, left: Duration) {
        let now = Instant::now();
        self.clock.send_modify(|clock| {
            *clock = match *clock {
                Clock::At(_) => Clock::At(now + left),
                Clock::Paused { .. } => Clock::Paused { left },
            };
        });
    }

    /// Resolves once the deadline has passed, following every move of it.
    pub async fn passed(&self) {
        let mut clock = self.clock.subscribe();
        loop {
            let current = *clock.borrow_and_update();
            match current {
                Clock::At(_) => {
                    let due = self.instant();
                    tokio::select! {
                        () = tokio::time::sleep_until(due) => {
                            if self.has_passed() {
                                return;
                            }
                        }
                        changed = clock.changed() => {
                            if changed.is_err() {
                                // The sender lives as long as `self`.
                                std::future::pending::<()>().await;
                            }
                        }
                    }
                }
                Clock::Paused { .. } => {
                    if clock.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            }
        }
    }
}

/// Keeps a deadline's clock stopped; dropping it starts the clock again.
#[derive(Debug)]
#[must_use = "the clock runs again as soon as the guard is dropped"]
pub struct Paused {
    /// The clock this guard stopped (`None`: it was stopped already, another guard restarts it).
    clock: Option<Arc<watch::Sender<Clock>>>,
}

impl Drop for Paused {
    fn drop(&mut self) {
        let Some(clock) = &self.clock else {
            return;
        };
        let now = Instant::now();
        clock.send_modify(|clock| {
            if let Clock::Paused { left } = *clock {
                *clock = Clock::At(now + left);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn a_deadline_passes_at_its_instant_and_an_earlier_view_before_it() {
        let start = Instant::now();
        let deadline = Deadline::at(start + 10 * SECOND);
        let early = deadline.earlier_by(3 * SECOND);
        assert_eq!(early.instant(), start + 7 * SECOND);
        early.passed().await;
        assert_eq!(start.elapsed(), 7 * SECOND);
        assert!(early.has_passed() && !deadline.has_passed());
        deadline.passed().await;
        assert_eq!(start.elapsed(), 10 * SECOND);
        assert_eq!(deadline.left(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_clock_never_passes_and_runs_on_from_what_was_left() {
        let start = Instant::now();
        let deadline = Deadline::at(start + 10 * SECOND);
        let early = deadline.earlier_by(2 * SECOND);
        let watcher = {
            let early = early.clone();
            tokio::spawn(async move {
                early.passed().await;
                Instant::now()
            })
        };
        tokio::time::sleep(4 * SECOND).await;
        let paused = deadline.pause();
        assert!(
            deadline.pause().clock.is_none(),
            "a second pause restarts nothing"
        );
        tokio::time::sleep(100 * SECOND).await;
        assert!(!early.has_passed() && !watcher.is_finished());
        assert_eq!(deadline.left(), 6 * SECOND, "the clock stood still");
        drop(paused);
        let passed = watcher.await.unwrap();
        assert_eq!(passed - start, 104 * SECOND + 4 * SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rebased_deadline_reaches_every_view_and_waiter() {
        let start = Instant::now();
        let deadline = Deadline::at(start + 10 * SECOND);
        let early = deadline.earlier_by(SECOND);
        let watcher = {
            let early = early.clone();
            tokio::spawn(async move {
                early.passed().await;
                Instant::now()
            })
        };
        tokio::time::sleep(2 * SECOND).await;
        {
            let _paused = deadline.pause();
            tokio::time::sleep(60 * SECOND).await;
            // What the run API says is left after the wait.
            deadline.rebase(30 * SECOND);
            assert_eq!(early.left(), 29 * SECOND);
        }
        assert_eq!(early.instant(), start + 62 * SECOND + 29 * SECOND);
        assert_eq!(watcher.await.unwrap() - start, 91 * SECOND);

        // A running clock is re-based from now.
        deadline.rebase(5 * SECOND);
        assert_eq!(deadline.instant(), Instant::now() + 5 * SECOND);
        assert_eq!(deadline, deadline.clone());
        assert_ne!(deadline, early);
    }

    #[tokio::test(start_paused = true)]
    async fn a_view_earlier_than_the_whole_time_has_passed_at_once() {
        let deadline = Deadline::at(Instant::now() + SECOND);
        let early = deadline.earlier_by(5 * SECOND);
        assert!(early.has_passed());
        tokio::time::timeout(Duration::from_millis(1), early.passed())
            .await
            .unwrap();
    }
}
