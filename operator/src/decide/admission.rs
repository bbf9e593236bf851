//! Which waiting Runs may start their Pod now (docs/operator.md, step 2): a child only while its parent
//! has fewer than `maxConcurrent` active children; a top-level Run only under the namespace cap
//! and the operator-wide cap, which count top-level Runs alone (a child whose ancestors are
//! active is bounded by its parent's cap, so parents never deadlock on children queued behind
//! them). Oldest first, by `creationTimestamp` then name; a Run refused by one cap never holds
//! back a Run that cap does not bound.

use std::collections::HashMap;
use std::fmt;

use jiff::Timestamp;

/// A Run, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    /// The Run's namespace.
    pub namespace: String,
    /// The Run's name.
    pub name: String,
}

impl RunKey {
    /// The Run `name` in `namespace`.
    pub fn new(namespace: &str, name: &str) -> Self {
        RunKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for RunKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A Run whose Pod counts against the caps (created, being created, or still running).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Active {
    /// The Run.
    pub key: RunKey,
    /// Its parent, for a child Run.
    pub parent: Option<RunKey>,
}

/// A Run ready for its Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The Run.
    pub key: RunKey,
    /// Its `creationTimestamp`.
    pub created: Timestamp,
    /// Its parent and the parent's `maxConcurrent`, for a child Run.
    pub parent: Option<ParentCap>,
}

/// The cap a parent puts on its children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentCap {
    /// The parent Run.
    pub key: RunKey,
    /// Most of its children active at once.
    pub max_concurrent: u32,
}

/// The caps on top-level Runs (`None`: unlimited).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Most active top-level Runs per namespace (`--max-active-per-namespace`).
    pub per_namespace: Option<u32>,
    /// Most active top-level Runs of the operator (`--max-active`).
    pub total: Option<u32>,
}

/// Why a Run waits: the cap that is full, with its count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// Its parent has `maxConcurrent` active children.
    Parent {
        /// Active children.
        active: u32,
        /// The parent's `maxConcurrent`.
        cap: u32,
    },
    /// Its namespace has as many active top-level Runs as `--max-active-per-namespace`.
    Namespace {
        /// Active top-level Runs of the namespace.
        active: u32,
        /// The cap.
        cap: u32,
    },
    /// The operator has as many active top-level Runs as `--max-active`.
    Operator {
        /// Active top-level Runs.
        active: u32,
        /// The cap.
        cap: u32,
    },
}

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Full::Parent { active, cap } => write!(f, "parent at {active}/{cap}"),
            Full::Namespace { active, cap } => write!(f, "namespace at {active}/{cap}"),
            Full::Operator { active, cap } => write!(f, "operator at {active}/{cap}"),
        }
    }
}

/// What admission says about a waiting Run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its Pod may be created now.
    Admitted,
    /// It waits for room under this cap.
    Waiting(Full),
}

/// The counts the caps are checked against.
#[derive(Default)]
struct Counts<'a> {
    children: HashMap<&'a RunKey, u32>,
    namespaces: HashMap<&'a str, u32>,
    total: u32,
}

impl<'a> Counts<'a> {
    fn add(&mut self, key: &'a RunKey, parent: Option<&'a RunKey>) {
        match parent {
            Some(parent) => *self.children.entry(parent).or_default() += 1,
            None => {
                *self.namespaces.entry(&key.namespace).or_default() += 1;
                self.total += 1;
            }
        }
    }

    /// The full cap `key` meets, if any.
    fn full(&self, key: &RunKey, parent: Option<&ParentCap>, caps: &Caps) -> Option<Full> {
        if let Some(parent) = parent {
            let active = self.children.get(&parent.key).copied().unwrap_or(0);
            return (active >= parent.max_concurrent).then_some(Full::Parent {
                active,
                cap: parent.max_concurrent,
            });
        }
        let in_namespace = self
            .namespaces
            .get(key.namespace.as_str())
            .copied()
            .unwrap_or(0);
        if let Some(cap) = caps.per_namespace.filter(|cap| in_namespace >= *cap) {
            return Some(Full::Namespace {
                active: in_namespace,
                cap,
            });
        }
        caps.total
            .filter(|cap| self.total >= *cap)
            .map(|cap| Full::Operator {
                active: self.total,
                cap,
            })
    }
}

/// The verdict on each waiting Run, oldest first, given the Runs already active.
pub fn admit<'a>(
    active: &[Active],
    waiting: impl IntoIterator<Item = &'a Waiting>,
    caps: &Caps,
) -> Vec<(&'a RunKey, Verdict)> {
    let mut counts = Counts::default();
    for run in active {
        counts.add(&run.key, run.parent.as_ref());
    }
    let mut order: Vec<&Waiting> = waiting.into_iter().collect();
    order.sort_by(|a, b| {
        (a.created, &a.key.name, &a.key.namespace).cmp(&(b.created, &b.key.name, &b.key.namespace))
    });
    order
        .into_iter()
        .map(|run| {
            let parent = run.parent.as_ref();
            match counts.full(&run.key, parent, caps) {
                Some(full) => (&run.key, Verdict::Waiting(full)),
                None => {
                    counts.add(&run.key, parent.map(|p| &p.key));
                    (&run.key, Verdict::Admitted)
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn key(namespace: &str, name: &str) -> RunKey {
        RunKey::new(namespace, name)
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn top(namespace: &str, name: &str, created: i64) -> Waiting {
        Waiting {
            key: key(namespace, name),
            created: at(created),
            parent: None,
        }
    }

    fn child(parent: &RunKey, name: &str, created: i64, max_concurrent: u32) -> Waiting {
        Waiting {
            key: key(&parent.namespace, name),
            created: at(created),
            parent: Some(ParentCap {
                key: parent.clone(),
                max_concurrent,
            }),
        }
    }

    fn verdicts(active: &[Active], waiting: &[Waiting], caps: Caps) -> Vec<(String, String)> {
        admit(active, waiting, &caps)
            .into_iter()
            .map(|(key, verdict)| {
                let said = match verdict {
                    Verdict::Admitted => "admitted".to_owned(),
                    Verdict::Waiting(full) => full.to_string(),
                };
                (key.to_string(), said)
            })
            .collect()
    }

    fn pairs(all: &[(&str, &str)]) -> Vec<(String, String)> {
        all.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn a_parent_admits_up_to_max_concurrent_children_oldest_first() {
        let parent = key("ns", "p");
        let active = [Active {
            key: parent.clone(),
            parent: None,
        }];
        let waiting = [
            child(&parent, "c3", 3, 2),
            child(&parent, "c1", 1, 2),
            child(&parent, "c2", 1, 2),
        ];
        let caps = Caps {
            per_namespace: Some(1),
            total: Some(1),
        };
        assert_eq!(
            verdicts(&active, &waiting, caps),
            pairs(&[
                ("ns/c1", "admitted"),
                ("ns/c2", "admitted"),
                ("ns/c3", "parent at 2/2")
            ]),
            "children pass the namespace and operator caps their parent fills"
        );
    }

    #[test]
    fn namespace_and_operator_caps_count_top_level_runs_only() {
        let parent = key("a", "p");
        let active = [
            Active {
                key: parent.clone(),
                parent: None,
            },
            Active {
                key: key("a", "p-child"),
                parent: Some(parent.clone()),
            },
        ];
        let waiting = [
            top("a", "a1", 1),
            top("b", "b1", 2),
            top("b", "b2", 3),
            top("c", "c1", 4),
        ];
        let caps = Caps {
            per_namespace: Some(1),
            total: Some(3),
        };
        assert_eq!(
            verdicts(&active, &waiting, caps),
            pairs(&[
                ("a/a1", "namespace at 1/1"),
                ("b/b1", "admitted"),
                ("b/b2", "namespace at 1/1"),
                ("c/c1", "admitted"),
            ])
        );
        let tight = Caps {
            per_namespace: None,
            total: Some(2),
        };
        assert_eq!(
            verdicts(&active, &waiting, tight),
            pairs(&[
                ("a/a1", "admitted"),
                ("b/b1", "operator at 2/2"),
                ("b/b2", "operator at 2/2"),
                ("c/c1", "operator at 2/2"),
            ])
        );
        let unlimited = Caps {
            per_namespace: None,
            total: None,
        };
        assert!(
            verdicts(&active, &waiting, unlimited)
                .iter()
                .all(|(_, v)| v == "admitted")
        );
    }

    #[test]
    fn ties_go_by_name_then_namespace() {
        let waiting = [top("b", "x", 5), top("a", "y", 5), top("a", "x", 5)];
        let caps = Caps {
            per_namespace: None,
            total: Some(1),
        };
        assert_eq!(
            verdicts(&[], &waiting, caps),
            pairs(&[
                ("a/x", "admitted"),
                ("b/x", "operator at 1/1"),
                ("a/y", "operator at 1/1"),
            ])
        );
    }

    #[test]
    fn a_run_blocked_by_its_parent_holds_back_no_one() {
        let full = key("ns", "full");
        let free = key("ns", "free");
        let active = [
            Active {
                key: full.clone(),
                parent: None,
            },
            Active {
                key: free.clone(),
                parent: None,
            },
            Active {
                key: key("ns", "busy"),
                parent: Some(full.clone()),
            },
        ];
        let waiting = [
            child(&full, "old", 1, 1),
            child(&free, "young", 2, 1),
            top("ns", "top", 3),
        ];
        let caps = Caps {
            per_namespace: Some(3),
            total: None,
        };
        assert_eq!(
            verdicts(&active, &waiting, caps),
            pairs(&[
                ("ns/old", "parent at 1/1"),
                ("ns/young", "admitted"),
                ("ns/top", "admitted"),
            ])
        );
    }

    /// One Run of the model: it works `work` steps once admitted, spawning its children at
    /// `spawn_at` steps, and ends only once its work is done and all its children ended (a
    /// parent waiting on its children: the case that would deadlock under naive caps).
    #[derive(Clone, Debug)]
    struct Plan {
        namespace: usize,
        work: u32,
        max_concurrent: u32,
        children: Vec<(u32, Plan)>,
    }

    fn plan(depth: u32) -> BoxedStrategy<Plan> {
        let leaf =
            (0usize..3, 1u32..4, 1u32..=4).prop_map(|(namespace, work, max_concurrent)| Plan {
                namespace,
                work,
                max_concurrent,
                children: vec![],
            });
        if depth == 0 {
            return leaf.boxed();
        }
        (
            leaf,
            prop::collection::vec((0u32..4, plan(depth - 1)), 0..4),
        )
            .prop_map(|(mut parent, children)| {
                parent.children = children;
                parent
            })
            .boxed()
    }

    struct Live {
        key: RunKey,
        created: i64,
        parent: Option<usize>,
        plan: Plan,
        started: Option<u32>,
        spawned: usize,
        done: bool,
    }

    /// More rounds than the slowest plan needs with every cap at 1.
    const ROUNDS: u32 = 2000;

    /// Plays admission step by step; every admitted Run advances one step per round.
    fn simulate(roots: &[Plan], caps: Caps, choose: &[bool]) -> Result<u32, TestCaseError> {
        let mut runs: Vec<Live> = roots
            .iter()
            .enumerate()
            .map(|(i, plan)| Live {
                key: key(&format!("ns{}", plan.namespace), &format!("r{i}")),
                created: 0,
                parent: None,
                plan: plan.clone(),
                started: None,
                spawned: 0,
                done: false,
            })
            .collect();
        for round in 0..ROUNDS {
            if runs.iter().all(|r| r.done) {
                return Ok(round);
            }
            let active: Vec<Active> = runs
                .iter()
                .filter(|r| r.started.is_some() && !r.done)
                .map(|r| Active {
                    key: r.key.clone(),
                    parent: r.parent.map(|p| runs[p].key.clone()),
                })
                .collect();
            // Some ready Runs are not offered this round (reconciles come in any order).
            let waiting: Vec<Waiting> = runs
                .iter()
                .enumerate()
                .filter(|(_, r)| r.started.is_none())
                .filter(|(i, _)| choose.get(*i + round as usize).copied().unwrap_or(true))
                .map(|(_, r)| Waiting {
                    key: r.key.clone(),
                    created: at(r.created),
                    parent: r.parent.map(|p| ParentCap {
                        key: runs[p].key.clone(),
                        max_concurrent: runs[p].plan.max_concurrent,
                    }),
                })
                .collect();
            let admitted: BTreeSet<RunKey> = admit(&active, &waiting, &caps)
                .into_iter()
                .filter(|(_, v)| *v == Verdict::Admitted)
                .map(|(k, _)| k.clone())
                .collect();
            for run in runs.iter_mut() {
                if admitted.contains(&run.key) {
                    run.started = Some(round);
                }
            }
            check_caps(&runs, caps)?;
            // Advance every active Run by one step; children asked for now wait from the
            // next round.
            for i in 0..runs.len() {
                let Some(start) = runs[i].started else {
                    continue;
                };
                if runs[i].done {
                    continue;
                }
                let age = round - start;
                while let Some((at_step, plan)) = runs[i].plan.children.get(runs[i].spawned) {
                    if *at_step > age {
                        break;
                    }
                    let plan = plan.clone();
                    runs[i].spawned += 1;
                    let name = format!("{}-{}", runs[i].key.name, runs.len());
                    let namespace = runs[i].key.namespace.clone();
                    runs.push(Live {
                        key: key(&namespace, &name),
                        created: i64::from(round) + 1,
                        parent: Some(i),
                        plan,
                        started: None,
                        spawned: 0,
                        done: false,
                    });
                }
                let children_done = runs.iter().filter(|c| c.parent == Some(i)).all(|c| c.done);
                let all_spawned = runs[i].spawned == runs[i].plan.children.len();
                if age + 1 >= runs[i].plan.work && all_spawned && children_done {
                    runs[i].done = true;
                }
            }
        }
        Err(TestCaseError::fail(format!(
            "not all Runs ended in {ROUNDS} rounds (deadlock or starvation): waiting {:?}",
            runs.iter()
                .filter(|r| !r.done)
                .map(|r| (r.key.to_string(), r.started))
                .collect::<Vec<_>>()
        )))
    }

    fn check_caps(runs: &[Live], caps: Caps) -> Result<(), TestCaseError> {
        let active = || runs.iter().filter(|r| r.started.is_some() && !r.done);
        let mut per_namespace: BTreeMap<&str, u32> = BTreeMap::new();
        let mut total = 0;
        let mut children: BTreeMap<usize, u32> = BTreeMap::new();
        for run in active() {
            match run.parent {
                Some(parent) => *children.entry(parent).or_default() += 1,
                None => {
                    *per_namespace.entry(&run.key.namespace).or_default() += 1;
                    total += 1;
                }
            }
        }
        for (namespace, count) in &per_namespace {
            prop_assert!(
                caps.per_namespace.is_none_or(|cap| *count <= cap),
                "namespace {namespace} at {count}"
            );
        }
        prop_assert!(caps.total.is_none_or(|cap| total <= cap), "total {total}");
        for (parent, count) in children {
            prop_assert!(
                count <= runs[parent].plan.max_concurrent,
                "{} has {count} active children",
                runs[parent].key
            );
        }
        Ok(())
    }

    #[test]
    fn the_model_runs_a_parent_waiting_on_its_children() {
        let leaf = |work| Plan {
            namespace: 0,
            work,
            max_concurrent: 1,
            children: vec![],
        };
        let parent = Plan {
            namespace: 0,
            work: 1,
            max_concurrent: 1,
            children: vec![(0, leaf(2)), (0, leaf(2))],
        };
        let caps = Caps {
            per_namespace: Some(1),
            total: Some(1),
        };
        // Round 0 the parent starts and asks for both children; they run one after the other
        // (rounds 1-2 and 3-4), both past the full caps; the parent ends in round 5.
        assert_eq!(
            simulate(std::slice::from_ref(&parent), caps, &[]).unwrap(),
            6
        );
        // A second top-level Run waits for the first to end.
        assert_eq!(simulate(&[parent.clone(), parent], caps, &[]).unwrap(), 12);
    }

    fn caps() -> impl Strategy<Value = Caps> {
        (prop::option::of(1u32..4), prop::option::of(1u32..6)).prop_map(|(per_namespace, total)| {
            Caps {
                per_namespace,
                total,
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Parents that wait on their children (to depth 3), any caps, Runs offered in any
        /// order: no cap is ever exceeded, and every Run ends (no deadlock, no starvation).
        #[test]
        fn nested_runs_never_exceed_a_cap_and_all_end(
            roots in prop::collection::vec(plan(2), 1..6),
            caps in caps(),
            choose in prop::collection::vec(prop::bool::weighted(0.8), 0..64),
        ) {
            simulate(&roots, caps, &choose)?;
        }

        /// Each refusal names a cap that is full at that point, and a younger Run is admitted
        /// before an older one only when the older one's cap does not bound it.
        #[test]
        fn refusals_are_justified_and_the_oldest_goes_first(
            tops in prop::collection::vec((0usize..3, 0i64..5), 0..12),
            kids in prop::collection::vec((0usize..3, 0i64..5), 0..12),
            parent_caps in prop::collection::vec(1u32..3, 3),
            active_tops in prop::collection::vec(0usize..3, 0..4),
            caps in caps(),
        ) {
            let parents: Vec<RunKey> = (0..3).map(|i| key(&format!("ns{i}"), &format!("p{i}"))).collect();
            let mut active: Vec<Active> = parents
                .iter()
                .map(|p| Active { key: p.clone(), parent: None })
                .collect();
            active.extend(active_tops.iter().enumerate().map(|(i, ns)| Active {
                key: key(&format!("ns{ns}"), &format!("a{i}")),
                parent: None,
            }));
            let mut waiting: Vec<Waiting> = tops
                .iter()
                .enumerate()
                .map(|(i, (ns, t))| top(&format!("ns{ns}"), &format!("t{i}"), *t))
                .collect();
            waiting.extend(kids.iter().enumerate().map(|(i, (p, t))| {
                child(&parents[*p], &format!("k{i}"), *t, parent_caps[*p])
            }));
            let out = admit(&active, &waiting, &caps);
            prop_assert_eq!(out.len(), waiting.len());
            let by_key: BTreeMap<&RunKey, &Waiting> = waiting.iter().map(|w| (&w.key, w)).collect();
            // Replay the counts in the verdicts' order.
            let mut replay = Counts::default();
            for run in &active {
                replay.add(&run.key, run.parent.as_ref());
            }
            for (key, verdict) in &out {
                let run = by_key[key];
                let full = replay.full(key, run.parent.as_ref(), &caps);
                match verdict {
                    Verdict::Admitted => {
                        prop_assert_eq!(full, None);
                        replay.add(key, run.parent.as_ref().map(|p| &p.key));
                    }
                    Verdict::Waiting(why) => prop_assert_eq!(full, Some(*why)),
                }
            }
            for (old_key, old_verdict) in &out {
                let Verdict::Waiting(why) = old_verdict else { continue };
                let old = by_key[old_key];
                for (young_key, young_verdict) in &out {
                    let young = by_key[young_key];
                    if *young_verdict != Verdict::Admitted
                        || (young.created, &young.key.name, &young.key.namespace)
                            <= (old.created, &old.key.name, &old.key.namespace)
                    {
                        continue;
                    }
                    let shares_the_cap = match why {
                        Full::Parent { .. } => young.parent.as_ref().map(|p| &p.key) == old.parent.as_ref().map(|p| &p.key),
                        Full::Namespace { .. } => young.parent.is_none() && young.key.namespace == old.key.namespace,
                        Full::Operator { .. } => young.parent.is_none(),
                    };
                    prop_assert!(!shares_the_cap, "{young_key} went before the older {old_key} ({why})");
                }
            }
        }
    }
}
