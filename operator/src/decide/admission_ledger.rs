//! Admission's memory between two looks at the caches: the Runs that asked to start (their
//! prerequisites met) and the grants not yet visible in the caches. A Run admitted but whose Pod
//! the caches do not show yet counts as active, so a burst of admissions never overshoots a cap
//! while the watches catch up; everything else is rebuilt from the caches on every step, so a
//! new leader starts from what the API server holds.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use jiff::Timestamp;

use super::admission::{Active, Caps, Full, RunKey, Verdict, Waiting, admit};
use super::budget_admission::Hold;

/// How long a grant outlives its Run's end when the caches never showed its Pod (a Pod created
/// and deleted between two list-watches): then it is forgotten.
pub const GRANT_LINGER: Duration = Duration::from_secs(30);

/// A Run that asked to start its Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ready {
    /// The Run, its age and its parent's cap, as admission orders it.
    pub run: Waiting,
    /// Its `metadata.uid`.
    pub uid: String,
    /// The attempt whose Pod it would create.
    pub attempt: u32,
}

/// A Run as the Run caches show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSeen {
    /// The Run.
    pub key: RunKey,
    /// Its `metadata.uid`.
    pub uid: String,
    /// Its parent, for a child Run.
    pub parent: Option<RunKey>,
    /// Whether it has finished.
    pub finished: bool,
    /// Its current attempt.
    pub attempt: u32,
    /// Whether its status names the current attempt's Pod (created, maybe not cached).
    pub pod_named: bool,
    /// Whether it is `Suspended`: it waits for a person without a Pod and holds no slot.
    pub suspended: bool,
}

/// A Run Pod as the Pod caches show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSeen {
    /// The Run it belongs to (its `herd.dev/run` label, its namespace).
    pub run: RunKey,
    /// Its controller owner's uid.
    pub owner_uid: String,
    /// Its `herd.dev/attempt` label.
    pub attempt: u32,
    /// Whether it is neither `Succeeded` nor `Failed`.
    pub running: bool,
}

/// What a Run asking to start hears.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Create the Pod.
    Admitted,
    /// Wait: this cap is full.
    Waiting(Full),
    /// A Budget that selects the Run has a limit reached: wait for its window to reset, or
    /// fail (docs/budgets.md).
    Held(Hold),
    /// Not decided yet: the next step decides and wakes the Run.
    Undecided,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Grant {
    uid: String,
    attempt: u32,
    parent: Option<RunKey>,
    at: Timestamp,
}

/// Admission's state; every method is pure (the clock is passed in).
#[derive(Debug, Default)]
pub struct Ledger {
    ready: HashMap<RunKey, Ready>,
    grants: HashMap<RunKey, Grant>,
    told: HashMap<RunKey, Full>,
    asking: HashSet<RunKey>,
    held: HashMap<RunKey, Hold>,
}

impl Ledger {
    /// A Run asks to start the Pod of `ready.attempt`: admitted if granted, else waiting with
    /// the last verdict, or undecided until the next step. An undecided asker waits for its
    /// answer itself until [`Ledger::stop_asking`], so it needs no wake meanwhile.
    pub fn ask(&mut self, ready: Ready) -> Answer {
        let answer = self.peek(&ready);
        if answer == Answer::Admitted {
            return answer;
        }
        if answer == Answer::Undecided {
            self.asking.insert(ready.run.key.clone());
        }
        self.ready.insert(ready.run.key.clone(), ready);
        answer
    }

    /// The answer `ready` would get now, changing nothing.
    pub fn peek(&self, ready: &Ready) -> Answer {
        if self
            .grants
            .get(&ready.run.key)
            .is_some_and(|g| g.uid == ready.uid && g.attempt == ready.attempt)
        {
            return Answer::Admitted;
        }
        if let Some(hold) = self.held.get(&ready.run.key) {
            return Answer::Held(hold.clone());
        }
        self.told
            .get(&ready.run.key)
            .map_or(Answer::Undecided, |full| Answer::Waiting(*full))
    }

    /// The asker stops waiting: its answer now; later changes wake it.
    pub fn stop_asking(&mut self, ready: &Ready) -> Answer {
        self.asking.remove(&ready.run.key);
        self.peek(ready)
    }

    /// Whether a Run waits inside its ask for its answer (it needs no wake).
    pub fn is_asking(&self, key: &RunKey) -> bool {
        self.asking.contains(key)
    }

    /// A Run no longer asks (a prerequisite went missing): its place in line and any grant go.
    pub fn withdraw(&mut self, key: &RunKey) {
        self.ready.remove(key);
        self.grants.remove(key);
        self.told.remove(key);
        self.asking.remove(key);
        self.held.remove(key);
    }

    /// How many Runs wait for admission (the queue's depth).
    pub fn waiting(&self) -> usize {
        self.ready.len()
    }

    /// The Runs that asked and wait for admission.
    pub fn asked(&self) -> impl Iterator<Item = &Waiting> {
        self.ready.values().map(|ready| &ready.run)
    }

    /// The Runs granted whose Pod the caches do not show yet.
    pub fn granted(&self) -> impl Iterator<Item = &RunKey> {
        self.grants.keys()
    }

    /// The Runs Budgets hold now (of those that asked): they stay out of the queue until
    /// released. Returns the Runs whose hold changed, to be woken.
    pub fn hold(&mut self, held: HashMap<RunKey, Hold>) -> Vec<RunKey> {
        let mut changed: Vec<RunKey> = held
            .iter()
            .filter(|(key, hold)| self.held.get(*key) != Some(*hold))
            .map(|(key, _)| key.clone())
            .collect();
        changed.extend(
            self.held
                .keys()
                .filter(|key| !held.contains_key(*key) && self.ready.contains_key(*key))
                .cloned(),
        );
        self.held = held;
        changed
    }

    /// How many grants wait for their Pod to show in the caches.
    pub fn pending_grants(&self) -> usize {
        self.grants.len()
    }

    /// Looks at the caches, admits what the caps allow, and returns the Runs whose verdict
    /// changed (each to be woken), in admission order.
    pub fn step(
        &mut self,
        runs: &[RunSeen],
        pods: &[PodSeen],
        caps: &Caps,
        now: Timestamp,
    ) -> Vec<(RunKey, Verdict)> {
        let seen: HashMap<&RunKey, &RunSeen> = runs.iter().map(|r| (&r.key, r)).collect();
        let pod_of: HashSet<(&RunKey, &str, u32)> = pods
            .iter()
            .map(|p| (&p.run, p.owner_uid.as_str(), p.attempt))
            .collect();
        self.forget_settled(&seen, &pod_of, now);
        let active = self.active(runs, pods, &seen);
        let counted: HashSet<&RunKey> = active.iter().map(|a| &a.key).collect();
        let waiting = self
            .ready
            .values()
            .map(|r| &r.run)
            .filter(|r| !counted.contains(&r.key) && !self.held.contains_key(&r.key));
        // Decided on borrowed Runs; only what changes is copied, then applied.
        let decided: Vec<(RunKey, Verdict)> = admit(&active, waiting, caps)
            .into_iter()
            .filter(|(key, verdict)| match verdict {
                Verdict::Admitted => true,
                Verdict::Waiting(full) => self.told.get(*key) != Some(full),
            })
            .map(|(key, verdict)| (key.clone(), verdict))
            .collect();
        self.record(&decided, now);
        decided
    }

    /// Drops grants whose Pod the caches now show (or whose Run is gone, recreated, on a later
    /// attempt, or finished), and ready Runs that are no longer waiting for a Pod.
    fn forget_settled(
        &mut self,
        seen: &HashMap<&RunKey, &RunSeen>,
        pod_of: &HashSet<(&RunKey, &str, u32)>,
        now: Timestamp,
    ) {
        self.grants.retain(|key, grant| {
            let Some(run) = seen.get(key).filter(|r| r.uid == grant.uid) else {
                return false;
            };
            let observed = pod_of.contains(&(key, grant.uid.as_str(), grant.attempt));
            let lingered =
                Duration::try_from(now.duration_since(grant.at)).is_ok_and(|d| d >= GRANT_LINGER);
            !observed
                && run.attempt <= grant.attempt
                && !(run.finished && (!run.pod_named || lingered))
        });
        self.ready.retain(|key, ready| {
            seen.get(key).is_some_and(|run| {
                run.uid == ready.uid
                    && !run.finished
                    && run.attempt == ready.attempt
                    && !run.pod_named
                    && !pod_of.contains(&(key, ready.uid.as_str(), ready.attempt))
            })
        });
        self.told.retain(|key, _| self.ready.contains_key(key));
    }

    /// The Runs that hold a slot: a running Pod (even of a finished Run: its Pod still works),
    /// an unfinished Run whose status names its Pod, a grant; each Run once.
    fn active(
        &self,
        runs: &[RunSeen],
        pods: &[PodSeen],
        seen: &HashMap<&RunKey, &RunSeen>,
    ) -> Vec<Active> {
        let mut active: Vec<Active> = Vec::new();
        let mut counted: HashSet<&RunKey> = HashSet::new();
        for pod in pods.iter().filter(|p| p.running) {
            if counted.insert(&pod.run) {
                let parent = seen
                    .get(&pod.run)
                    .filter(|r| r.uid == pod.owner_uid)
                    .and_then(|r| r.parent.clone());
                active.push(Active {
                    key: pod.run.clone(),
                    parent,
                });
            }
        }
        for run in runs.iter().filter(|r| holds_slot(r)) {
            if counted.insert(&run.key) {
                active.push(Active {
                    key: run.key.clone(),
                    parent: run.parent.clone(),
                });
            }
        }
        for (key, grant) in &self.grants {
            if counted.insert(key) {
                active.push(Active {
                    key: key.clone(),
                    parent: grant.parent.clone(),
                });
            }
        }
        active
    }

    /// Turns an admitted Run into a grant, and remembers what a waiting one was told.
    fn record(&mut self, decided: &[(RunKey, Verdict)], now: Timestamp) {
        for (key, verdict) in decided {
            match verdict {
                Verdict::Admitted => {
                    self.told.remove(key);
                    if let Some(ready) = self.ready.remove(key) {
                        self.grants.insert(
                            key.clone(),
                            Grant {
                                uid: ready.uid,
                                attempt: ready.attempt,
                                parent: ready.run.parent.map(|p| p.key),
                                at: now,
                            },
                        );
                    }
                }
                Verdict::Waiting(full) => {
                    self.told.insert(key.clone(), *full);
                }
            }
        }
    }
}

/// Whether a Run counts as active by its status alone: unfinished, not suspended, its Pod
/// named.
fn holds_slot(run: &RunSeen) -> bool {
    !run.finished && !run.suspended && run.pod_named
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::admission::ParentCap;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn key(name: &str) -> RunKey {
        RunKey::new("ns", name)
    }

    fn ready(name: &str, created: i64) -> Ready {
        Ready {
            run: Waiting {
                key: key(name),
                created: at(created),
                parent: None,
            },
            uid: format!("uid-{name}"),
            attempt: 1,
        }
    }

    fn seen(name: &str) -> RunSeen {
        RunSeen {
            key: key(name),
            uid: format!("uid-{name}"),
            parent: None,
            finished: false,
            attempt: 1,
            pod_named: false,
            suspended: false,
        }
    }

    fn pod(name: &str, running: bool) -> PodSeen {
        PodSeen {
            run: key(name),
            owner_uid: format!("uid-{name}"),
            attempt: 1,
            running,
        }
    }

    const TWO: Caps = Caps {
        per_namespace: None,
        total: Some(2),
    };

    fn names(changed: &[(RunKey, Verdict)]) -> Vec<(String, Verdict)> {
        changed.iter().map(|(k, v)| (k.name.clone(), *v)).collect()
    }

    const FULL: Verdict = Verdict::Waiting(Full::Operator { active: 2, cap: 2 });

    #[test]
    fn budget_holds_keep_runs_out_of_the_queue_and_wake_them_when_they_change() {
        let mut ledger = Ledger::default();
        let runs: Vec<RunSeen> = ["a", "b"].map(seen).to_vec();
        ledger.ask(ready("a", 0));
        ledger.ask(ready("b", 1));
        assert_eq!(ledger.asked().count(), 2);
        let hold = Hold {
            budget: "daily".into(),
            refuse: false,
            resets: at(100),
            message: "held".into(),
        };
        let woken = ledger.hold(HashMap::from([(key("a"), hold.clone())]));
        assert_eq!(woken, [key("a")]);
        assert_eq!(
            ledger.hold(HashMap::from([(key("a"), hold.clone())])),
            Vec::<RunKey>::new()
        );
        let changed = ledger.step(&runs, &[], &TWO, at(10));
        assert_eq!(
            names(&changed),
            [("b".into(), Verdict::Admitted)],
            "a is held, not queued"
        );
        assert_eq!(ledger.ask(ready("a", 0)), Answer::Held(hold));
        assert_eq!(ledger.granted().collect::<Vec<_>>(), [&key("b")]);
        // The window resets: a is released, woken, and admitted at the next step.
        assert_eq!(ledger.hold(HashMap::new()), [key("a")]);
        let changed = ledger.step(&runs, &[], &TWO, at(11));
        assert_eq!(names(&changed), [("a".into(), Verdict::Admitted)]);
    }

    #[test]
    fn a_burst_is_admitted_up_to_the_cap_while_the_caches_lag() {
        let mut ledger = Ledger::default();
        let runs: Vec<RunSeen> = ["a", "b", "c", "d"].map(seen).to_vec();
        for (i, name) in ["a", "b", "c", "d"].iter().enumerate() {
            let created = i64::try_from(i).unwrap();
            assert_eq!(ledger.ask(ready(name, created)), Answer::Undecided);
        }
        let changed = ledger.step(&runs, &[], &TWO, at(10));
        assert_eq!(
            names(&changed),
            [
                ("a".into(), Verdict::Admitted),
                ("b".into(), Verdict::Admitted),
                ("c".into(), FULL),
                ("d".into(), FULL)
            ]
        );
        assert_eq!(ledger.ask(ready("a", 0)), Answer::Admitted);
        assert_eq!(
            ledger.ask(ready("c", 2)),
            Answer::Waiting(Full::Operator { active: 2, cap: 2 })
        );
        // Nothing is cached yet: the grants still count, and nobody is told anything new.
        assert!(ledger.step(&runs, &[], &TWO, at(11)).is_empty());
        assert_eq!(ledger.pending_grants(), 2);

        // The Pods show up: the grants are done, the Pods count instead.
        let pods = [pod("a", true), pod("b", true)];
        assert!(ledger.step(&runs, &pods, &TWO, at(12)).is_empty());
        assert_eq!(ledger.pending_grants(), 0);

        // a's Pod ends and a finishes: c, the oldest waiting, takes its place.
        let mut runs = runs;
        runs[0].finished = true;
        runs[0].pod_named = true;
        let pods = [pod("a", false), pod("b", true)];
        assert_eq!(
            names(&ledger.step(&runs, &pods, &TWO, at(13))),
            [("c".into(), Verdict::Admitted)]
        );
    }

    #[test]
    fn an_asker_waiting_for_its_answer_is_not_woken() {
        let mut ledger = Ledger::default();
        let runs = [seen("a"), seen("b")];
        assert_eq!(ledger.ask(ready("a", 0)), Answer::Undecided);
        ledger.ask(ready("b", 1));
        assert!(ledger.is_asking(&key("a")));
        ledger.step(&runs, &[], &TWO, at(10));
        assert_eq!(ledger.peek(&ready("a", 0)), Answer::Admitted);
        assert_eq!(ledger.stop_asking(&ready("a", 0)), Answer::Admitted);
        assert!(!ledger.is_asking(&key("a")));
        assert!(ledger.is_asking(&key("b")));
        ledger.withdraw(&key("b"));
        assert!(!ledger.is_asking(&key("b")));
    }

    #[test]
    fn a_finished_run_whose_pod_still_runs_counts() {
        let mut ledger = Ledger::default();
        let mut done = seen("a");
        done.finished = true;
        done.pod_named = true;
        let runs = [done, seen("b"), seen("c")];
        ledger.ask(ready("b", 1));
        ledger.ask(ready("c", 2));
        let pods = [pod("a", true)];
        let one = Caps {
            per_namespace: Some(1),
            total: None,
        };
        assert_eq!(
            names(&ledger.step(&runs, &pods, &one, at(10))),
            [
                (
                    "b".into(),
                    Verdict::Waiting(Full::Namespace { active: 1, cap: 1 })
                ),
                (
                    "c".into(),
                    Verdict::Waiting(Full::Namespace { active: 1, cap: 1 })
                )
            ]
        );
    }

    #[test]
    fn suspended_runs_hold_no_slot_and_their_resumption_waits_its_turn() {
        let mut ledger = Ledger::default();
        // Two suspended Runs (one whose status still names its ended Pod) under a cap of 2,
        // their Pods Succeeded: a new Run starts.
        let mut a = seen("a");
        a.suspended = true;
        let mut b = seen("b");
        b.suspended = true;
        b.pod_named = true;
        let runs = [a.clone(), b, seen("c"), seen("d")];
        let pods = [pod("a", false), pod("b", false)];
        ledger.ask(ready("c", 2));
        assert_eq!(
            names(&ledger.step(&runs, &pods, &TWO, at(10))),
            [("c".into(), Verdict::Admitted)]
        );
        // a is answered: its next attempt asks like any start and waits behind c and d.
        let mut resumed = a;
        resumed.suspended = false;
        resumed.attempt = 2;
        let runs = [resumed, seen("b"), seen("c"), seen("d")];
        let pods = [pod("c", true), pod("d", true)];
        ledger.ask(Ready {
            attempt: 2,
            ..ready("a", 0)
        });
        assert_eq!(
            names(&ledger.step(&runs, &pods, &TWO, at(11))),
            [("a".into(), FULL)]
        );
    }

    #[test]
    fn a_new_leader_counts_what_the_api_server_holds() {
        let mut ledger = Ledger::default();
        let mut named = seen("b");
        named.pod_named = true;
        let runs = [seen("a"), named, seen("c")];
        // a's Pod exists (its status not written yet), b's status names its Pod (not cached).
        let pods = [pod("a", true)];
        ledger.ask(ready("c", 5));
        assert_eq!(
            names(&ledger.step(&runs, &pods, &TWO, at(10))),
            [("c".into(), FULL)]
        );
    }

    #[test]
    fn the_same_reason_is_told_once() {
        let mut ledger = Ledger::default();
        let runs = [seen("a"), seen("b"), seen("c")];
        let pods = [pod("a", true), pod("b", true)];
        ledger.ask(ready("c", 5));
        assert_eq!(ledger.step(&runs, &pods, &TWO, at(10)).len(), 1);
        ledger.ask(ready("c", 5));
        assert!(ledger.step(&runs, &pods, &TWO, at(11)).is_empty());
        let three = Caps {
            per_namespace: Some(2),
            total: Some(3),
        };
        assert_eq!(
            names(&ledger.step(&runs, &pods, &three, at(12))),
            [(
                "c".into(),
                Verdict::Waiting(Full::Namespace { active: 2, cap: 2 })
            )],
            "another reason is told"
        );
    }

    #[test]
    fn grants_go_with_a_withdrawal_a_refusal_a_retry_or_a_deletion() {
        let one = Caps {
            per_namespace: None,
            total: Some(1),
        };
        let admitted = |ledger: &mut Ledger, runs: &[RunSeen]| {
            ledger.ask(ready("a", 0));
            let changed = ledger.step(runs, &[], &one, at(10));
            assert_eq!(names(&changed), [("a".into(), Verdict::Admitted)]);
        };

        let mut ledger = Ledger::default();
        admitted(&mut ledger, &[seen("a")]);
        ledger.withdraw(&key("a"));
        assert_eq!(ledger.pending_grants(), 0, "a prerequisite went missing");

        let mut ledger = Ledger::default();
        admitted(&mut ledger, &[seen("a")]);
        let mut refused = seen("a");
        refused.finished = true;
        ledger.step(&[refused], &[], &one, at(11));
        assert_eq!(
            ledger.pending_grants(),
            0,
            "the Pod was refused: InvalidSpec"
        );

        let mut ledger = Ledger::default();
        admitted(&mut ledger, &[seen("a")]);
        let mut retried = seen("a");
        retried.attempt = 2;
        ledger.step(&[retried], &[], &one, at(11));
        assert_eq!(ledger.pending_grants(), 0, "a later attempt asks again");

        let mut ledger = Ledger::default();
        admitted(&mut ledger, &[seen("a")]);
        ledger.step(&[], &[], &one, at(11));
        assert_eq!(ledger.pending_grants(), 0, "the Run was deleted");

        let mut ledger = Ledger::default();
        admitted(&mut ledger, &[seen("a")]);
        let mut recreated = seen("a");
        recreated.uid = "another".into();
        ledger.step(&[recreated], &[], &one, at(11));
        assert_eq!(ledger.pending_grants(), 0, "another Run of the same name");
    }

    #[test]
    fn a_grant_whose_pod_the_caches_never_showed_lingers_then_goes() {
        let one = Caps {
            per_namespace: None,
            total: Some(1),
        };
        let mut ledger = Ledger::default();
        ledger.ask(ready("a", 0));
        ledger.step(&[seen("a")], &[], &one, at(10));
        let mut ended = seen("a");
        ended.finished = true;
        ended.pod_named = true;
        ledger.step(std::slice::from_ref(&ended), &[], &one, at(20));
        assert_eq!(
            ledger.pending_grants(),
            1,
            "its Pod may still be on its way"
        );
        ledger.step(&[ended], &[], &one, at(41));
        assert_eq!(ledger.pending_grants(), 0);
    }

    #[test]
    fn a_stale_ask_is_dropped() {
        let mut ledger = Ledger::default();
        ledger.ask(ready("a", 0));
        let mut later = seen("a");
        later.attempt = 2;
        assert!(ledger.step(&[later], &[], &TWO, at(10)).is_empty());
        assert_eq!(ledger.ask(ready("b", 1)), Answer::Undecided);
        let mut started = seen("b");
        started.pod_named = true;
        assert!(
            ledger.step(&[started], &[], &TWO, at(11)).is_empty(),
            "its Pod exists already"
        );
    }

    #[test]
    fn children_count_against_their_parent_only() {
        let mut ledger = Ledger::default();
        let parent = key("p");
        let mut child = seen("c1");
        child.parent = Some(parent.clone());
        let runs = [seen("p"), child, seen("c2")];
        let pods = [pod("p", true), pod("c1", true)];
        let mut second = ready("c2", 3);
        second.run.parent = Some(ParentCap {
            key: parent,
            max_concurrent: 2,
        });
        ledger.ask(second);
        let one = Caps {
            per_namespace: Some(1),
            total: Some(1),
        };
        assert_eq!(
            names(&ledger.step(&runs, &pods, &one, at(10))),
            [("c2".into(), Verdict::Admitted)]
        );
    }
}
