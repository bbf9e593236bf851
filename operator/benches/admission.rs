//! Admission with 10,000 queued Runs: `cargo bench -p herd-operator --bench admission`.
//!
//! `admit` (the decision, target ≤ 1 ms) over 10,000 waiting Runs — top-level ones in 100
//! namespaces and the children of 200 active parents — with 500 Runs active and the default
//! caps; and one whole step of the ledger over the same caches (what admission does per look).
//!
//! Not part of CI: timings need a quiet machine and a release build.

use criterion::{Criterion, criterion_group, criterion_main};
use herd_operator::decide::admission::{Active, Caps, ParentCap, RunKey, Waiting, admit};
use herd_operator::decide::admission_ledger::{Ledger, PodSeen, Ready, RunSeen};
use jiff::Timestamp;

const QUEUED: usize = 10_000;
const ACTIVE: usize = 500;
const PARENTS: usize = 200;

fn key(i: usize) -> RunKey {
    RunKey::new(&format!("team-{:03}", i % 100), &format!("run-{i:05}"))
}

fn parent_of(i: usize) -> Option<usize> {
    // A third of the queued Runs are children of one of the active parents.
    i.is_multiple_of(3).then_some(i % PARENTS)
}

fn created(i: usize) -> Timestamp {
    let second = i64::try_from(i % 3600).unwrap_or_default();
    Timestamp::from_second(1_767_225_600 + second).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn world() -> (Vec<Active>, Vec<Waiting>) {
    let active = (0..ACTIVE)
        .map(|i| Active {
            key: key(i),
            parent: None,
        })
        .collect();
    let waiting = (ACTIVE..ACTIVE + QUEUED)
        .map(|i| Waiting {
            key: key(i),
            created: created(i),
            parent: parent_of(i).map(|p| ParentCap {
                key: key(p),
                max_concurrent: 3,
            }),
        })
        .collect();
    (active, waiting)
}

fn caps() -> Caps {
    Caps {
        per_namespace: Some(100),
        total: Some(500),
    }
}

fn bench_admit(c: &mut Criterion) {
    let (active, waiting) = world();
    let caps = caps();
    c.bench_function("admit_10000_queued", |b| {
        b.iter(|| admit(&active, &waiting, &caps).len())
    });
}

fn bench_step(c: &mut Criterion) {
    let runs: Vec<RunSeen> = (0..ACTIVE + QUEUED)
        .map(|i| RunSeen {
            key: key(i),
            uid: format!("uid-{i}"),
            parent: (i >= ACTIVE).then(|| parent_of(i).map(key)).flatten(),
            finished: false,
            attempt: 1,
            pod_named: i < ACTIVE,
            suspended: false,
        })
        .collect();
    let pods: Vec<PodSeen> = (0..ACTIVE)
        .map(|i| PodSeen {
            run: key(i),
            owner_uid: format!("uid-{i}"),
            attempt: 1,
            running: true,
        })
        .collect();
    let mut ledger = Ledger::default();
    for i in ACTIVE..ACTIVE + QUEUED {
        ledger.ask(Ready {
            run: Waiting {
                key: key(i),
                created: created(i),
                parent: parent_of(i).map(|p| ParentCap {
                    key: key(p),
                    max_concurrent: 3,
                }),
            },
            uid: format!("uid-{i}"),
            attempt: 1,
        });
    }
    let caps = caps();
    let now = Timestamp::now();
    c.bench_function("ledger_step_10500_runs", |b| {
        b.iter(|| ledger.step(&runs, &pods, &caps, now).len())
    });
}

criterion_group!(benches, bench_admit, bench_step);
criterion_main!(benches);
