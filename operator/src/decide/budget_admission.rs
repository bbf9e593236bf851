//! Which waiting Runs a Budget holds back, and how many tokens a starting Run may use.
//!
//! A Run is held while any Budget that selects it has a limit reached (`used` plus what going
//! Runs have reserved at or above it), counting the Runs admitted ahead of it in the same look
//! against `runs`, or while that Budget follows as many going Runs as its status can hold.
//! With several such Budgets the tightest wins: the Run is refused when any of them says
//! `Refuse` and is exceeded, else it waits for the one that resets last. A Run that starts
//! reserves, as its token budget, its share of what the Budgets selecting it have left
//! unreserved ([`allowance`]; never more than its own).

use std::collections::{BTreeMap, HashMap};

use herd_crds::budget::{BudgetLimits, BudgetUsage, MAX_MARKS, OnExceeded};
use jiff::Timestamp;

use super::admission::RunKey;
use super::budget_ledger::{Limit, committed, reached, token_allowance};

/// A Budget as admission sees it: its limits and what its ledger says now.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetView {
    /// The Budget's namespace.
    pub namespace: String,
    /// The Budget's name.
    pub name: String,
    /// `spec.selector.agents` (empty: any).
    pub agents: Vec<String>,
    /// `spec.selector.runLabels` (empty: any).
    pub run_labels: BTreeMap<String, String>,
    /// `spec.limits`.
    pub limits: BudgetLimits,
    /// `spec.onExceeded`.
    pub on_exceeded: OnExceeded,
    /// Used in the current window, as of now.
    pub used: BudgetUsage,
    /// What going Runs may still spend of their token budgets (see
    /// [`super::budget_ledger::Ledger::reserved`]).
    pub reserved: BudgetUsage,
    /// Going Runs its ledger follows.
    pub marks: usize,
    /// When the current window ends.
    pub resets: Timestamp,
}

impl BudgetView {
    /// Whether the Budget selects a Run of `agent` with `labels` in `namespace`.
    pub fn selects(&self, namespace: &str, agent: &str, labels: &BTreeMap<String, String>) -> bool {
        self.namespace == namespace
            && (self.agents.is_empty() || self.agents.iter().any(|a| a == agent))
            && self
                .run_labels
                .iter()
                .all(|(key, value)| labels.get(key) == Some(value))
    }
}

/// A waiting Run, as Budgets select it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The Run.
    pub key: &'a RunKey,
    /// Its `creationTimestamp`: older Runs go first, as under the caps.
    pub created: Timestamp,
    /// `spec.agentRef.name`.
    pub agent: &'a str,
    /// Its labels.
    pub labels: &'a BTreeMap<String, String>,
}

/// Why a Budget holds a Run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// The Budget that holds it (of several, the one that resets last).
    pub budget: String,
    /// Whether the Run fails instead of waiting.
    pub refuse: bool,
    /// When that Budget's window resets.
    pub resets: Timestamp,
    /// What the Run's condition says, naming the Budget, the limit and the reset.
    pub message: String,
}

/// The Runs of `waiting` that `budgets` hold, deciding oldest first (by `created`, then name,
/// then namespace, as the caps do).
pub fn holds(budgets: &[BudgetView], waiting: &[Candidate<'_>]) -> HashMap<RunKey, Hold> {
    let mut order: Vec<&Candidate<'_>> = waiting.iter().collect();
    order.sort_by(|a, b| {
        (a.created, &a.key.name, &a.key.namespace).cmp(&(b.created, &b.key.name, &b.key.namespace))
    });
    let mut by_namespace: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, budget) in budgets.iter().enumerate() {
        by_namespace
            .entry(budget.namespace.as_str())
            .or_default()
            .push(i);
    }
    // Runs admitted ahead in this look count against `runs` and the marks.
    let mut admitted = vec![0u64; budgets.len()];
    let mut held = HashMap::new();
    for run in order {
        let Some(indices) = by_namespace.get(run.key.namespace.as_str()) else {
            continue;
        };
        let covering: Vec<usize> = indices
            .iter()
            .copied()
            .filter(|i| budgets[*i].selects(&run.key.namespace, run.agent, run.labels))
            .collect();
        let mut why: Option<Hold> = None;
        for i in &covering {
            let budget = &budgets[*i];
            let mut used = budget.used;
            used.runs = used.runs.saturating_add(admitted[*i]);
            let full = budget.marks as u64 + admitted[*i] >= MAX_MARKS as u64;
            let limits = reached(&budget.limits, &used);
            let reserved = reached(&budget.limits, &committed(&used, &budget.reserved));
            if reserved.is_empty() && !full {
                continue;
            }
            let cause = if let Some(limit) = limits.first() {
                Why::Reached(*limit)
            } else if let Some(limit) = reserved.first() {
                Why::Reserved(*limit)
            } else {
                Why::Full
            };
            let hold = Hold {
                budget: budget.name.clone(),
                // Only an exceeded Budget refuses: reserved tokens may come back.
                refuse: budget.on_exceeded == OnExceeded::Refuse && !limits.is_empty(),
                resets: budget.resets,
                message: message(budget, &used, cause),
            };
            why = Some(match why {
                None => hold,
                Some(other) => tighter(other, hold),
            });
        }
        match why {
            Some(hold) => {
                held.insert(run.key.clone(), hold);
            }
            None => {
                for i in covering {
                    admitted[i] += 1;
                }
            }
        }
    }
    held
}

/// Of two holds, the tighter: a refusal, else the one that lasts longer.
fn tighter(a: Hold, b: Hold) -> Hold {
    match (a.refuse, b.refuse) {
        (true, false) => a,
        (false, true) => b,
        _ if b.resets > a.resets => b,
        _ => a,
    }
}

/// Why a Budget holds a Run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    /// This limit is reached.
    Reached(Limit),
    /// What is left of this limit is reserved by going Runs.
    Reserved(Limit),
    /// The ledger follows as many going Runs as it can.
    Full,
}

fn message(budget: &BudgetView, used: &BudgetUsage, why: Why) -> String {
    let resets = format!(
        "until its window resets at {}",
        budget.resets.strftime("%Y-%m-%dT%H:%M:%SZ")
    );
    let (what, until) = match why {
        Why::Reached(limit) => (
            format!(
                "reached its limit of {} (used: {}) in this window",
                limit.amount(limit.of(&budget.limits).unwrap_or_default(), &budget.limits),
                limit.amount(limit.in_usage(used), &budget.limits)
            ),
            resets,
        ),
        Why::Reserved(limit) => (
            format!(
                "has what is left of its limit of {} reserved by going Runs (used: {}, reserved: {})",
                limit.amount(limit.of(&budget.limits).unwrap_or_default(), &budget.limits),
                limit.amount(limit.in_usage(used), &budget.limits),
                limit.amount(limit.in_usage(&budget.reserved), &budget.limits)
            ),
            format!(
                "until one of them ends or {}",
                resets.trim_start_matches("until ")
            ),
        ),
        Why::Full => (
            format!("follows {MAX_MARKS} going Runs, its most, in this window"),
            "until one of them ends".to_owned(),
        ),
    };
    match (budget.on_exceeded, why) {
        (OnExceeded::Refuse, Why::Reached(_)) => format!(
            "Budget {} {what}: the Run is refused (onExceeded: Refuse); new Runs may start {until}",
            budget.name
        ),
        _ => format!("Budget {} {what}: the Run waits {until}", budget.name),
    }
}

/// The dearest price of a token a Run may use, for turning what is left of a cost limit into
/// tokens: the highest of its model's per-million prices, in micros, and their currency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenPrice<'a> {
    /// ISO 4217 code.
    pub currency: &'a str,
    /// Micros per million tokens, the highest of input, cached input and output.
    pub dearest_per_million: u64,
}

/// A starting Run as its token budget is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Starting<'a> {
    /// Its own token budget (the snapshot's), if any.
    pub own: Option<u64>,
    /// The input plus output tokens it reported so far (a resumed attempt carries them).
    pub reported: u64,
    /// Its model's dearest price, when it is priced.
    pub price: Option<TokenPrice<'a>>,
    /// Going Runs the Budgets select that have no reservation yet, this one included: what is
    /// unreserved is shared among them.
    pub sharing: u64,
}

/// The token budget a Run starting now gets, and reserves under each Budget that selects it:
/// its own, narrowed to `reported` plus its share of the least that any of those Budgets has
/// left unreserved (`budgets` must leave the Run's own reservation out), of its token limits
/// and of its cost limit turned into tokens at the Run's dearest price (when priced in the
/// Budget's currency); `None` when nothing sets one. Without a budget of its own a Run takes
/// an equal share, so Runs admitted together each get some.
pub fn allowance(
    budgets: &[BudgetView],
    run: &Candidate<'_>,
    starting: &Starting<'_>,
) -> Option<u64> {
    let left = budgets
        .iter()
        .filter(|b| b.selects(&run.key.namespace, run.agent, run.labels))
        .flat_map(|b| {
            let taken = committed(&b.used, &b.reserved);
            let by_cost = b
                .limits
                .cost
                .as_ref()
                .zip(starting.price)
                .and_then(|(limit, price)| {
                    let cap = limit.micros()?;
                    (limit.currency == price.currency && price.dearest_per_million > 0).then(|| {
                        let left = u128::from(cap.saturating_sub(taken.cost_micros));
                        let tokens = left * 1_000_000 / u128::from(price.dearest_per_million);
                        u64::try_from(tokens).unwrap_or(u64::MAX)
                    })
                });
            [token_allowance(&b.limits, &taken), by_cost]
        })
        .flatten()
        .min();
    let share = match (left, starting.own) {
        (Some(left), Some(own)) => Some(left.min(own.saturating_sub(starting.reported))),
        (Some(left), None) => Some(left / starting.sharing.max(1)),
        (None, _) => None,
    };
    match (share, starting.own) {
        (Some(share), _) => Some(starting.reported.saturating_add(share)),
        (None, own) => own,
    }
}

/// What `tokens` may cost at `price` in `currency`, in micros (zero when priced otherwise).
pub fn reserved_cost(tokens: u64, price: Option<TokenPrice<'_>>, currency: Option<&str>) -> u64 {
    price
        .filter(|price| Some(price.currency) == currency)
        .map_or(0, |price| {
            let micros = u128::from(tokens) * u128::from(price.dearest_per_million) / 1_000_000;
            u64::try_from(micros).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn budget(name: &str, limits: BudgetLimits, used: BudgetUsage, resets: i64) -> BudgetView {
        BudgetView {
            namespace: "ns".into(),
            name: name.into(),
            agents: vec![],
            run_labels: BTreeMap::new(),
            limits,
            on_exceeded: OnExceeded::Queue,
            used,
            reserved: BudgetUsage::default(),
            marks: 0,
            resets: at(resets),
        }
    }

    fn tokens(limit: u64) -> BudgetLimits {
        BudgetLimits {
            tokens: Some(limit),
            ..BudgetLimits::default()
        }
    }

    fn run_cap(limit: u64) -> BudgetLimits {
        BudgetLimits {
            runs: Some(limit),
            ..BudgetLimits::default()
        }
    }

    fn used_tokens(n: u64) -> BudgetUsage {
        BudgetUsage {
            tokens: n,
            input_tokens: n,
            ..BudgetUsage::default()
        }
    }

    struct Runs {
        keys: Vec<RunKey>,
        labels: BTreeMap<String, String>,
    }

    impl Runs {
        fn new(n: usize) -> Self {
            Runs {
                keys: (0..n)
                    .map(|i| RunKey::new("ns", &format!("r{i:02}")))
                    .collect(),
                labels: BTreeMap::from([("team".to_owned(), "a".to_owned())]),
            }
        }

        fn candidates(&self, agent: &'static str) -> Vec<Candidate<'_>> {
            self.keys
                .iter()
                .enumerate()
                .map(|(i, key)| Candidate {
                    key,
                    created: at(i as i64),
                    agent,
                    labels: &self.labels,
                })
                .collect()
        }
    }

    #[test]
    fn an_exceeded_budget_holds_what_it_selects_and_names_itself_and_the_reset() {
        let runs = Runs::new(2);
        let budgets = [budget("daily", tokens(100), used_tokens(100), 86_400)];
        let held = holds(&budgets, &runs.candidates("researcher"));
        assert_eq!(held.len(), 2);
        let hold = &held[&runs.keys[0]];
        assert_eq!(hold.budget, "daily");
        assert!(!hold.refuse);
        assert_eq!(
            hold.message,
            "Budget daily reached its limit of 100 tokens (used: 100 tokens) in this window: the Run waits until its window resets at 1970-01-02T00:00:00Z"
        );
        let within = [budget("daily", tokens(100), used_tokens(99), 86_400)];
        assert!(holds(&within, &runs.candidates("researcher")).is_empty());
    }

    #[test]
    fn a_runs_limit_admits_the_oldest_up_to_what_is_left() {
        let runs = Runs::new(5);
        let used = BudgetUsage {
            runs: 1,
            ..BudgetUsage::default()
        };
        let budgets = [budget("runs", run_cap(3), used, 100)];
        let mut candidates = runs.candidates("a");
        candidates.reverse();
        let held = holds(&budgets, &candidates);
        let mut names: Vec<&str> = held.keys().map(|k| k.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["r02", "r03", "r04"], "r00 and r01 fill the 2 left");
    }

    #[test]
    fn selectors_agents_labels_and_namespaces_decide_what_a_budget_covers() {
        let runs = Runs::new(1);
        let mut other_agent = budget("coders", tokens(1), used_tokens(1), 10);
        other_agent.agents = vec!["coder".into()];
        let mut other_team = budget("team-b", tokens(1), used_tokens(1), 10);
        other_team.run_labels = BTreeMap::from([("team".to_owned(), "b".to_owned())]);
        let mut other_namespace = budget("elsewhere", tokens(1), used_tokens(1), 10);
        other_namespace.namespace = "other".into();
        let budgets = [other_agent.clone(), other_team, other_namespace];
        assert!(holds(&budgets, &runs.candidates("researcher")).is_empty());
        assert_eq!(holds(&[other_agent], &runs.candidates("coder")).len(), 1);
    }

    #[test]
    fn of_several_budgets_a_refusal_wins_else_the_latest_reset() {
        let runs = Runs::new(1);
        let early = budget("hourly", tokens(10), used_tokens(10), 3600);
        let late = budget("monthly", tokens(10), used_tokens(10), 30 * 86_400);
        let within = budget("weekly", tokens(10_000), used_tokens(10), 7 * 86_400);
        let held = holds(
            &[early.clone(), late.clone(), within.clone()],
            &runs.candidates("a"),
        );
        assert_eq!(held[&runs.keys[0]].budget, "monthly");
        let mut refusing = early.clone();
        refusing.on_exceeded = OnExceeded::Refuse;
        let held = holds(&[late, refusing, within], &runs.candidates("a"));
        let hold = &held[&runs.keys[0]];
        assert_eq!((hold.budget.as_str(), hold.refuse), ("hourly", true));
        assert!(hold.message.contains("the Run is refused"));
    }

    #[test]
    fn a_budget_following_its_most_runs_holds_new_ones() {
        let runs = Runs::new(3);
        let mut full = budget("wide", tokens(1_000_000), used_tokens(0), 10);
        full.marks = MAX_MARKS - 1;
        let held = holds(&[full], &runs.candidates("a"));
        assert_eq!(held.len(), 2, "one more fits");
        assert!(
            held[&runs.keys[2]]
                .message
                .contains("until one of them ends")
        );
    }

    /// The token budget of a Run that reported nothing and shares with no other.
    fn given(
        own: Option<u64>,
        budgets: &[BudgetView],
        run: &Candidate<'_>,
        price: Option<TokenPrice<'_>>,
    ) -> Option<u64> {
        let starting = Starting {
            own,
            reported: 0,
            price,
            sharing: 1,
        };
        allowance(budgets, run, &starting)
    }

    #[test]
    fn reserved_tokens_hold_new_runs_until_a_going_run_ends_and_never_refuse() {
        let runs = Runs::new(1);
        let mut daily = budget("daily", tokens(1000), used_tokens(600), 86_400);
        daily.on_exceeded = OnExceeded::Refuse;
        daily.reserved = BudgetUsage {
            tokens: 400,
            input_tokens: 400,
            output_tokens: 400,
            ..BudgetUsage::default()
        };
        let held = holds(std::slice::from_ref(&daily), &runs.candidates("a"));
        let hold = &held[&runs.keys[0]];
        assert!(!hold.refuse, "reserved tokens may come back");
        assert_eq!(
            hold.message,
            "Budget daily has what is left of its limit of 1000 tokens reserved by going Runs (used: 600 tokens, reserved: 400 tokens): the Run waits until one of them ends or its window resets at 1970-01-02T00:00:00Z"
        );
        daily.reserved.tokens = 399;
        daily.reserved.input_tokens = 399;
        daily.reserved.output_tokens = 399;
        assert!(holds(&[daily], &runs.candidates("a")).is_empty());
    }

    #[test]
    fn a_starting_run_gets_its_share_of_what_is_unreserved_on_top_of_what_it_reported() {
        let runs = Runs::new(1);
        let run = &runs.candidates("x")[0];
        let mut daily = budget("daily", tokens(1000), used_tokens(100), 10);
        daily.reserved = BudgetUsage {
            tokens: 300,
            input_tokens: 300,
            output_tokens: 300,
            ..BudgetUsage::default()
        };
        let budgets = [daily];
        let start = |own, reported, sharing| Starting {
            own,
            reported,
            price: None,
            sharing,
        };
        // 600 unreserved, shared by three Runs without a budget of their own.
        assert_eq!(allowance(&budgets, run, &start(None, 0, 3)), Some(200));
        // A resumed Run keeps what it reported and gets its share on top.
        assert_eq!(allowance(&budgets, run, &start(None, 50, 3)), Some(250));
        // A budget of its own is not divided, only narrowed to what is unreserved.
        assert_eq!(
            allowance(&budgets, run, &start(Some(250), 50, 3)),
            Some(250)
        );
        assert_eq!(
            allowance(&budgets, run, &start(Some(5000), 0, 3)),
            Some(600)
        );
        // Nothing unreserved: the Run may make one call.
        let mut full = budgets[0].clone();
        full.reserved.tokens = 900;
        full.reserved.input_tokens = 900;
        full.reserved.output_tokens = 900;
        assert_eq!(allowance(&[full], run, &start(None, 0, 1)), Some(0));
    }

    #[test]
    fn a_reservation_costs_its_tokens_at_the_dearest_price_in_the_budgets_currency() {
        let price = TokenPrice {
            currency: "EUR",
            dearest_per_million: 10_000_000,
        };
        assert_eq!(reserved_cost(50_000, Some(price), Some("EUR")), 500_000);
        assert_eq!(reserved_cost(50_000, Some(price), Some("USD")), 0);
        assert_eq!(reserved_cost(50_000, Some(price), None), 0);
        assert_eq!(reserved_cost(50_000, None, Some("EUR")), 0);
        assert_eq!(reserved_cost(u64::MAX, Some(price), Some("EUR")), u64::MAX);
    }

    #[test]
    fn a_starting_run_gets_the_least_left_never_more_than_its_own() {
        let runs = Runs::new(1);
        let run = &runs.candidates("x")[0];
        let budgets = [
            budget("a", tokens(1000), used_tokens(400), 10),
            budget(
                "b",
                BudgetLimits {
                    output_tokens: Some(300),
                    ..BudgetLimits::default()
                },
                BudgetUsage::default(),
                10,
            ),
            budget("runs-only", run_cap(5), BudgetUsage::default(), 10),
        ];
        assert_eq!(given(None, &budgets, run, None), Some(300));
        assert_eq!(given(Some(200), &budgets, run, None), Some(200));
        assert_eq!(given(Some(200), &budgets[2..], run, None), Some(200));
        assert_eq!(given(None, &budgets[2..], run, None), None);
        let elsewhere = RunKey::new("other", "r00");
        let other = Candidate {
            key: &elsewhere,
            ..run.clone()
        };
        assert_eq!(given(None, &budgets, &other, None), None);
    }

    #[test]
    fn a_cost_limit_becomes_tokens_at_the_runs_dearest_price_in_its_currency() {
        let runs = Runs::new(1);
        let run = &runs.candidates("x")[0];
        let euros = budget(
            "eur",
            BudgetLimits {
                cost: Some(herd_crds::budget::CostLimit {
                    amount: "2".into(),
                    currency: "EUR".into(),
                }),
                ..BudgetLimits::default()
            },
            BudgetUsage {
                cost_micros: 1_500_000,
                ..BudgetUsage::default()
            },
            10,
        );
        // 0.50 EUR left at 10 EUR per million tokens: 50000 tokens.
        let price = TokenPrice {
            currency: "EUR",
            dearest_per_million: 10_000_000,
        };
        assert_eq!(
            given(None, std::slice::from_ref(&euros), run, Some(price)),
            Some(50_000)
        );
        let dollars = TokenPrice {
            currency: "USD",
            ..price
        };
        assert_eq!(
            given(None, std::slice::from_ref(&euros), run, Some(dollars)),
            None,
            "priced otherwise: not counted"
        );
        assert_eq!(given(None, &[euros], run, None), None);
    }

    proptest! {
        /// With several Budgets and any usage and reservations: a Run is held exactly when a
        /// Budget that selects it has a limit reached, counting what going Runs reserved and
        /// the Runs admitted before it; it is refused only by a Budget exceeded without the
        /// reservations; the Runs admitted never take a Budget past its `runs`.
        #[test]
        fn holds_are_justified_and_runs_limits_never_overshoot(
            specs in prop::collection::vec((prop::option::of(1u64..5), 0u64..6, prop::option::of(1u64..100), 0u64..120, any::<bool>(), 0usize..3, 0u64..60), 1..10),
            n in 0usize..20,
        ) {
            let runs = Runs::new(n);
            let agents = ["a", "b", "c"];
            let budgets: Vec<BudgetView> = specs.iter().enumerate().map(|(i, (run_cap, run_used, token_cap, token_used, refuse, agent, reserved))| {
                let mut b = budget(&format!("b{i}"), BudgetLimits { runs: *run_cap, tokens: *token_cap, ..BudgetLimits::default() },
                    BudgetUsage { runs: *run_used, ..used_tokens(*token_used) }, i as i64);
                if *agent > 0 { b.agents = vec![agents[*agent].to_owned()]; }
                if *refuse { b.on_exceeded = OnExceeded::Refuse; }
                b.reserved = BudgetUsage { tokens: *reserved, input_tokens: *reserved, output_tokens: *reserved, ..BudgetUsage::default() };
                b
            }).collect();
            let candidates: Vec<Candidate> = runs.candidates("a").into_iter().enumerate().map(|(i, mut c)| { c.agent = agents[i % 3]; c }).collect();
            let held = holds(&budgets, &candidates);
            let mut admitted = vec![0u64; budgets.len()];
            for run in &candidates {
                let covering: Vec<usize> = (0..budgets.len()).filter(|i| budgets[*i].selects("ns", run.agent, run.labels)).collect();
                let blocked = covering.iter().any(|i| {
                    let b = &budgets[*i];
                    let runs_reached = b.limits.runs.is_some_and(|cap| b.used.runs + admitted[*i] >= cap);
                    let tokens_reached = b.limits.tokens.is_some_and(|cap| b.used.tokens + b.reserved.tokens >= cap);
                    runs_reached || tokens_reached
                });
                prop_assert_eq!(blocked, held.contains_key(run.key));
                if let Some(hold) = held.get(run.key) {
                    let refusing = covering.iter().any(|i| budgets[*i].on_exceeded == OnExceeded::Refuse && !reached(&budgets[*i].limits, &BudgetUsage { runs: budgets[*i].used.runs + admitted[*i], ..budgets[*i].used }).is_empty());
                    prop_assert_eq!(hold.refuse, refusing);
                } else {
                    for i in covering { admitted[i] += 1; }
                }
            }
            for (i, b) in budgets.iter().enumerate() {
                if let Some(cap) = b.limits.runs {
                    prop_assert!(admitted[i] == 0 || b.used.runs + admitted[i] <= cap);
                }
            }
        }

        /// Runs starting one after another, each reserving the token budget it is given
        /// (some with budgets of their own, some resumed), never reserve more than the limit
        /// left beyond what they reported: the Budget is overshot by at most what each Run
        /// spends past its own budget (one model call).
        #[test]
        fn reservations_never_promise_more_than_is_left(
            limit in 1u64..10_000,
            used in 0u64..12_000,
            starts in prop::collection::vec((prop::option::of(0u64..5_000), 0u64..500, 1u64..6), 1..12),
        ) {
            let runs = Runs::new(starts.len());
            let mut ledger = crate::decide::budget_ledger::Ledger {
                used: used_tokens(used),
                ..Default::default()
            };
            let mut promised = 0u64;
            for (i, (own, reported, sharing)) in starts.iter().enumerate() {
                let mut view = budget("daily", tokens(limit), ledger.used, 10);
                view.reserved = ledger.reserved(None);
                let run = &runs.candidates("x")[i];
                let starting = Starting { own: *own, reported: *reported, price: None, sharing: *sharing };
                let given = allowance(std::slice::from_ref(&view), run, &starting).unwrap();
                prop_assert!(own.is_none_or(|own| given <= own.max(*reported)));
                prop_assert!(given >= *reported);
                promised += given - reported;
                let uid = format!("uid-{i}");
                prop_assert!(ledger.reserve(&uid, given, 0));
                // What it reported is counted already, as its mark shows.
                ledger.marks[i].input_tokens = *reported;
            }
            prop_assert!(promised <= limit.saturating_sub(used), "{promised} promised of {limit} with {used} used");
        }
    }
}
