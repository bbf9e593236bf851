//! Whether the followed Run is still there, from the watch's events. kube's watcher lists
//! again when the watch expires (410 Gone): `Init`, an `InitApply` per object, `InitDone`. A
//! Run missing from such a list was deleted while the watch was away, which no `Delete` event
//! will tell; a Run of the same name with another uid is a new one.

use herd_crds::run::Run;
use kube::ResourceExt;
use kube::runtime::watcher::Event;

/// What one event means for the followed Run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Seen<'a> {
    /// Nothing to show.
    Nothing,
    /// The Run as it is now.
    Run(&'a Run),
    /// The first list did not have it: it does not exist.
    NotFound,
    /// It was deleted.
    Deleted,
    /// It was deleted and another Run of that name created.
    Replaced,
}

/// What the follower knows of the Run's existence.
#[derive(Clone, Debug, Default)]
pub struct Presence {
    /// The uid of the Run followed, once seen.
    uid: Option<String>,
    /// Whether the list under way has had the Run.
    listed: bool,
}

impl Presence {
    /// What `event` means, given the events before it.
    pub fn see<'a>(&mut self, event: &'a Event<Run>) -> Seen<'a> {
        match event {
            Event::Init => {
                self.listed = false;
                Seen::Nothing
            }
            Event::InitApply(run) => {
                self.listed = true;
                self.applied(run)
            }
            Event::Apply(run) => self.applied(run),
            Event::InitDone if self.listed => Seen::Nothing,
            Event::InitDone if self.uid.is_some() => Seen::Deleted,
            Event::InitDone => Seen::NotFound,
            Event::Delete(run) if self.uid.is_none() || run.uid() == self.uid => Seen::Deleted,
            Event::Delete(_) => Seen::Nothing,
        }
    }

    fn applied<'a>(&mut self, run: &'a Run) -> Seen<'a> {
        match (&self.uid, run.uid()) {
            (Some(known), Some(uid)) if *known != uid => Seen::Replaced,
            (Some(_), _) => Seen::Run(run),
            (None, uid) => {
                self.uid = uid;
                Seen::Run(run)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run_named;

    fn with_uid(uid: &str) -> Run {
        let mut run = run_named("r");
        run.metadata.uid = Some(uid.into());
        run
    }

    #[test]
    fn a_relist_after_the_watch_expired_goes_on_following() {
        let run = with_uid("u1");
        let mut presence = Presence::default();
        let events = [
            Event::Init,
            Event::InitApply(run.clone()),
            Event::InitDone,
            Event::Apply(run.clone()),
            // 410 Gone: the watcher lists again.
            Event::Init,
            Event::InitApply(run.clone()),
            Event::InitDone,
            Event::Apply(run.clone()),
        ];
        let seen: Vec<Seen<'_>> = events.iter().map(|e| presence.see(e)).collect();
        assert_eq!(
            seen,
            [
                Seen::Nothing,
                Seen::Run(&run),
                Seen::Nothing,
                Seen::Run(&run),
                Seen::Nothing,
                Seen::Run(&run),
                Seen::Nothing,
                Seen::Run(&run),
            ]
        );
    }

    #[test]
    fn a_relist_without_the_run_means_it_was_deleted() {
        let run = with_uid("u1");
        let mut presence = Presence::default();
        let events = [
            Event::Init,
            Event::InitApply(run),
            Event::InitDone,
            Event::Init,
            Event::InitDone,
        ];
        let last = events.iter().map(|e| presence.see(e)).last();
        assert_eq!(last, Some(Seen::Deleted));
    }

    #[test]
    fn a_first_list_without_the_run_is_not_found() {
        let mut presence = Presence::default();
        assert_eq!(presence.see(&Event::Init), Seen::Nothing);
        assert_eq!(presence.see(&Event::InitDone), Seen::NotFound);
    }

    #[test]
    fn deletes_and_replacements() {
        let first = with_uid("u1");
        let second = with_uid("u2");
        let mut presence = Presence::default();
        assert_eq!(
            presence.see(&Event::Apply(first.clone())),
            Seen::Run(&first)
        );
        assert_eq!(
            presence.see(&Event::Delete(second.clone())),
            Seen::Nothing,
            "another Run"
        );
        assert_eq!(
            presence.see(&Event::InitApply(second.clone())),
            Seen::Replaced
        );
        assert_eq!(presence.see(&Event::Delete(first)), Seen::Deleted);
        let mut fresh = Presence::default();
        assert_eq!(fresh.see(&Event::Delete(second)), Seen::Deleted);
    }
}
