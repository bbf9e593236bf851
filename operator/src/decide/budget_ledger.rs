//! A Budget's ledger: what the Runs it selects used in the current window, counted from their
//! reports (`status.report`: attempt, seq, cumulative usage) so that every report adds once.
//!
//! - Each started Run has a mark: the newest `(attempt, seq)` counted and the highest input
//!   and output tokens it reported. A newer report adds only what it shows beyond the mark; an
//!   older or replayed one adds nothing. Usage is a Run's running total (a resumed attempt
//!   carries its checkpoint's), so the counted usage of a Run is its highest report, and
//!   `used` over a window is the sum of the Runs' reports at its end minus at its start.
//! - A window's end sets `used` to zero and keeps the marks: what a Run reports after the
//!   reset counts in the new window only.
//! - A Run finished more than [`SETTLE`] ago is folded: its mark goes and `settledBefore`
//!   moves past it, so the status holds only Runs still going (or just ended), however many
//!   Runs the namespace has. A finished Run without a mark counts in full when it ended after
//!   `settledBefore` and in this window (a Run that started and ended while the operator was
//!   away), and not at all otherwise.
//! - A going Run's mark also holds the token budget its Pod was given under the Budget
//!   ([`Ledger::reserve`], by the run API): what it has not reported yet is reserved, so
//!   admission starts no Run on it and the next Run's token budget leaves it out. The sum of
//!   the Runs' budgets stays within the limit, and a Run stops after the call that reaches its
//!   own: the Budget is overshot by at most one model call per going Run. A Run's reservation
//!   ends with it.
//! - Everything lives in the Budget's status, so a restarted operator continues from it.

use std::collections::HashMap;
use std::time::Duration;

use herd_crds::budget::{BudgetLimits, BudgetStatus, BudgetUsage, MAX_MARKS, RunMark};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::budget_window::Span;

/// How long after its end a Run's mark is kept, longer than any lag of the Run cache: a Run
/// that ended before `settledBefore` is taken to be counted.
pub const SETTLE: Duration = Duration::from_secs(60);

/// A Run as the ledger sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunUsage<'a> {
    /// Its `metadata.uid`.
    pub uid: &'a str,
    /// Whether the Budget selects it. A Run that is not selected (any more) is not counted,
    /// but keeps its mark while it exists, so it is not counted twice if selected again.
    pub selected: bool,
    /// Whether its Pod was ever admitted (it counts against `runs`).
    pub started: bool,
    /// When it finished, once it has.
    pub finished_at: Option<Timestamp>,
    /// Its report, when it has one.
    pub report: Option<Reported>,
}

/// What a Run's `status.report` says about usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reported {
    /// The attempt that wrote it.
    pub attempt: u32,
    /// Its sequence number within the attempt.
    pub seq: u64,
    /// Input tokens so far.
    pub input_tokens: u64,
    /// Output tokens so far.
    pub output_tokens: u64,
    /// Cost so far in the Budget's currency, in micros (0 when priced in another currency or
    /// not priced).
    pub cost_micros: u64,
}

/// A Budget's ledger, as kept in its status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// The current window; `None` before the first step.
    pub window: Option<Span>,
    /// Used in the current window.
    pub used: BudgetUsage,
    /// Runs that ended before this are counted (or belong to an earlier window).
    pub settled_before: Option<Timestamp>,
    /// The Runs not settled yet.
    pub marks: Vec<RunMark>,
}

/// What a step changed, for Events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stepped {
    /// A window ended and `used` started again from zero.
    pub reset: bool,
    /// Runs the ledger could not follow because it follows [`MAX_MARKS`] already.
    pub untracked: usize,
}

impl Ledger {
    /// The ledger a Budget's status holds.
    pub fn from_status(status: &BudgetStatus) -> Self {
        let window = match (&status.window_start, &status.window_end) {
            (Some(start), Some(end)) => Some(Span {
                start: start.0,
                end: end.0,
            }),
            _ => None,
        };
        Ledger {
            window,
            used: status.used,
            settled_before: status.settled_before.as_ref().map(|t| t.0),
            marks: status.marks.clone(),
        }
    }

    /// Writes the ledger into a Budget's status (its other fields untouched).
    pub fn write_to(&self, status: &mut BudgetStatus) {
        status.window_start = self.window.map(|w| Time(w.start));
        status.window_end = self.window.map(|w| Time(w.end));
        status.used = self.used;
        status.settled_before = self.settled_before.map(Time);
        status.marks = self.marks.clone();
    }

    /// Counts what `runs` (the Runs the Budget selects) reported since the last step, in the
    /// window `span` (from [`super::budget_window::Window::current`]) at `now`.
    pub fn step<'a>(
        &mut self,
        span: Span,
        runs: impl IntoIterator<Item = RunUsage<'a>>,
        now: Timestamp,
    ) -> Stepped {
        let mut stepped = Stepped::default();
        match self.window {
            None => {
                self.settled_before = Some(
                    self.settled_before
                        .map_or(span.start, |s| s.max(span.start)),
                );
            }
            Some(window) if window != span => {
                stepped.reset = true;
                self.used = BudgetUsage::default();
            }
            Some(_) => {}
        }
        self.window = Some(span);
        // A Run that ended at or before this and has no mark is counted already, or ended
        // before this window.
        let floor = self
            .settled_before
            .map_or(span.start, |settled| settled.max(span.start));
        let mut index: HashMap<String, usize> = self
            .marks
            .iter()
            .enumerate()
            .map(|(i, mark)| (mark.uid.clone(), i))
            .collect();
        let mut seen = vec![false; self.marks.len()];
        let mut finished: HashMap<usize, Timestamp> = HashMap::new();
        for run in runs {
            let at = match index.get(run.uid) {
                Some(at) => *at,
                None => {
                    if !run.selected
                        || run.finished_at.is_some_and(|end| end <= floor)
                        || (!run.started && run.report.is_none())
                    {
                        continue;
                    }
                    if self.marks.len() >= MAX_MARKS {
                        stepped.untracked += 1;
                        continue;
                    }
                    self.marks.push(RunMark::new(run.uid));
                    seen.push(false);
                    self.used.runs = self.used.runs.saturating_add(1);
                    index.insert(run.uid.to_owned(), self.marks.len() - 1);
                    self.marks.len() - 1
                }
            };
            seen[at] = true;
            if let Some(end) = run.finished_at {
                finished.insert(at, end);
            }
            if run.finished_at.is_some() || !run.selected {
                let mark = &mut self.marks[at];
                mark.reserved_tokens = 0;
                mark.reserved_cost_micros = 0;
            }
            if let Some(report) = run.report.filter(|_| run.selected) {
                self.count(at, report);
            }
        }
        // Fold: Runs gone from the cache (deleted) and Runs ended long enough ago.
        let horizon = now
            .checked_sub(jiff::SignedDuration::try_from(SETTLE).unwrap_or_default())
            .unwrap_or(now);
        let mut keep = seen
            .into_iter()
            .enumerate()
            .map(|(i, seen)| seen && finished.get(&i).is_none_or(|end| *end > horizon));
        self.marks.retain(|_| keep.next().unwrap_or(false));
        if self.settled_before.is_none_or(|settled| settled < horizon) {
            self.settled_before = Some(horizon);
        }
        stepped
    }

    /// Records that the going Run `uid` was given `tokens` (its whole thread's budget) costing
    /// at most `cost_micros`: a new mark counts it as a started Run. `false` when the ledger
    /// follows [`MAX_MARKS`] Runs already and none of them is this one.
    pub fn reserve(&mut self, uid: &str, tokens: u64, cost_micros: u64) -> bool {
        let at = match self.marks.iter().position(|mark| mark.uid == uid) {
            Some(at) => at,
            None if self.marks.len() >= MAX_MARKS => return false,
            None => {
                self.marks.push(RunMark::new(uid));
                self.used.runs = self.used.runs.saturating_add(1);
                self.marks.len() - 1
            }
        };
        let mark = &mut self.marks[at];
        mark.reserved_tokens = tokens;
        mark.reserved_cost_micros = cost_micros;
        true
    }

    /// What going Runs other than `except` (a uid) may still spend of their reservations:
    /// `tokens`, `inputTokens` and `outputTokens` alike, and `costMicros`.
    pub fn reserved(&self, except: Option<&str>) -> BudgetUsage {
        let (tokens, cost_micros) = self
            .marks
            .iter()
            .filter(|mark| Some(mark.uid.as_str()) != except)
            .map(RunMark::outstanding)
            .fold((0u64, 0u64), |(tokens, cost), (t, c)| {
                (tokens.saturating_add(t), cost.saturating_add(c))
            });
        BudgetUsage {
            tokens,
            input_tokens: tokens,
            output_tokens: tokens,
            runs: 0,
            cost_micros,
        }
    }

    /// Adds what `report` shows beyond the mark at `at`, when it is newer.
    fn count(&mut self, at: usize, report: Reported) {
        let mark = &mut self.marks[at];
        if (report.attempt, report.seq) <= (mark.attempt, mark.seq) {
            return;
        }
        let input = report.input_tokens.saturating_sub(mark.input_tokens);
        let output = report.output_tokens.saturating_sub(mark.output_tokens);
        let cost = report.cost_micros.saturating_sub(mark.cost_micros);
        mark.attempt = report.attempt;
        mark.seq = report.seq;
        mark.input_tokens = mark.input_tokens.max(report.input_tokens);
        mark.output_tokens = mark.output_tokens.max(report.output_tokens);
        mark.cost_micros = mark.cost_micros.max(report.cost_micros);
        let used = &mut self.used;
        used.input_tokens = used.input_tokens.saturating_add(input);
        used.output_tokens = used.output_tokens.saturating_add(output);
        used.cost_micros = used.cost_micros.saturating_add(cost);
        used.tokens = used.input_tokens.saturating_add(used.output_tokens);
    }
}

/// One limit of a Budget, by its name in `spec.limits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// `tokens`.
    Tokens,
    /// `inputTokens`.
    InputTokens,
    /// `outputTokens`.
    OutputTokens,
    /// `runs`.
    Runs,
    /// `cost`, in micros of its currency.
    Cost,
}

impl Limit {
    /// Every limit, in the order they are reported.
    pub const ALL: [Limit; 5] = [
        Limit::Tokens,
        Limit::InputTokens,
        Limit::OutputTokens,
        Limit::Runs,
        Limit::Cost,
    ];

    /// Its name in `spec.limits` and in the metrics' `limit` label.
    pub fn name(self) -> &'static str {
        match self {
            Limit::Tokens => "tokens",
            Limit::InputTokens => "inputTokens",
            Limit::OutputTokens => "outputTokens",
            Limit::Runs => "runs",
            Limit::Cost => "cost",
        }
    }

    /// How `value` of it reads: `12034 tokens`, `3 runs`, `12.500000 EUR`.
    pub fn amount(self, value: u64, limits: &BudgetLimits) -> String {
        match self {
            Limit::Tokens => format!("{value} tokens"),
            Limit::InputTokens => format!("{value} input tokens"),
            Limit::OutputTokens => format!("{value} output tokens"),
            Limit::Runs => format!("{value} runs"),
            Limit::Cost => format!(
                "{} {}",
                herd_crds::micros::format_micros(value),
                limits.cost.as_ref().map_or("", |c| c.currency.as_str())
            ),
        }
    }

    /// Its value in `limits`, when set.
    pub fn of(self, limits: &BudgetLimits) -> Option<u64> {
        match self {
            Limit::Tokens => limits.tokens,
            Limit::InputTokens => limits.input_tokens,
            Limit::OutputTokens => limits.output_tokens,
            Limit::Runs => limits.runs,
            Limit::Cost => limits.cost.as_ref().and_then(|c| c.micros()),
        }
    }

    /// Its count in `usage`.
    pub fn in_usage(self, usage: &BudgetUsage) -> u64 {
        match self {
            Limit::Tokens => usage.tokens,
            Limit::InputTokens => usage.input_tokens,
            Limit::OutputTokens => usage.output_tokens,
            Limit::Runs => usage.runs,
            Limit::Cost => usage.cost_micros,
        }
    }

    fn set(self, usage: &mut BudgetUsage, value: u64) {
        match self {
            Limit::Tokens => usage.tokens = value,
            Limit::InputTokens => usage.input_tokens = value,
            Limit::OutputTokens => usage.output_tokens = value,
            Limit::Runs => usage.runs = value,
            Limit::Cost => usage.cost_micros = value,
        }
    }
}

/// What is left of each limit set (zero for limits not set).
pub fn remaining(limits: &BudgetLimits, used: &BudgetUsage) -> BudgetUsage {
    let mut left = BudgetUsage::default();
    for limit in Limit::ALL {
        if let Some(cap) = limit.of(limits) {
            limit.set(&mut left, cap.saturating_sub(limit.in_usage(used)));
        }
    }
    left
}

/// `used` plus `reserved`, limit by limit: what admission and new token budgets count as
/// taken.
pub fn committed(used: &BudgetUsage, reserved: &BudgetUsage) -> BudgetUsage {
    BudgetUsage {
        tokens: used.tokens.saturating_add(reserved.tokens),
        input_tokens: used.input_tokens.saturating_add(reserved.input_tokens),
        output_tokens: used.output_tokens.saturating_add(reserved.output_tokens),
        runs: used.runs.saturating_add(reserved.runs),
        cost_micros: used.cost_micros.saturating_add(reserved.cost_micros),
    }
}

/// The limits reached (used at least the limit), in [`Limit::ALL`]'s order.
pub fn reached(limits: &BudgetLimits, used: &BudgetUsage) -> Vec<Limit> {
    Limit::ALL
        .into_iter()
        .filter(|limit| {
            limit
                .of(limits)
                .is_some_and(|cap| limit.in_usage(used) >= cap)
        })
        .collect()
}

/// The most tokens a Run may still use under these limits: the least of what is left of
/// `tokens`, `inputTokens` and `outputTokens` (a Run's token budget counts input plus output,
/// so either share caps it); `None` when no token limit is set.
pub fn token_allowance(limits: &BudgetLimits, used: &BudgetUsage) -> Option<u64> {
    [Limit::Tokens, Limit::InputTokens, Limit::OutputTokens]
        .into_iter()
        .filter_map(|limit| {
            limit
                .of(limits)
                .map(|cap| cap.saturating_sub(limit.in_usage(used)))
        })
        .min()
}

/// The limit nearest to being reached (the largest share used), for `kubectl get`: its used
/// and limit text, e.g. (`12034 tokens`, `20000 tokens`).
pub fn tightest(limits: &BudgetLimits, used: &BudgetUsage) -> Option<(String, String)> {
    Limit::ALL
        .into_iter()
        .filter_map(|limit| limit.of(limits).map(|cap| (limit, cap)))
        .max_by(|(a, a_cap), (b, b_cap)| {
            let share = |limit: Limit, cap: u64| {
                u128::from(limit.in_usage(used)) * 1_000_000 / u128::from(cap.max(1))
            };
            share(*a, *a_cap).cmp(&share(*b, *b_cap))
        })
        .map(|(limit, cap)| {
            (
                limit.amount(limit.in_usage(used), limits),
                limit.amount(cap, limits),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn span(start: i64, end: i64) -> Span {
        Span {
            start: at(start),
            end: at(end),
        }
    }

    fn report(attempt: u32, seq: u64, input: u64, output: u64) -> Option<Reported> {
        Some(Reported {
            attempt,
            seq,
            input_tokens: input,
            output_tokens: output,
            cost_micros: input + 2 * output,
        })
    }

    fn going(uid: &str, report: Option<Reported>) -> RunUsage<'_> {
        RunUsage {
            uid,
            selected: true,
            started: true,
            finished_at: None,
            report,
        }
    }

    fn ended(uid: &str, end: i64, report: Option<Reported>) -> RunUsage<'_> {
        RunUsage {
            uid,
            selected: true,
            started: true,
            finished_at: Some(at(end)),
            report,
        }
    }

    fn day(n: i64) -> Span {
        span(n * 86_400, (n + 1) * 86_400)
    }

    #[test]
    fn a_reservation_counts_what_is_not_reported_yet_and_ends_with_its_run() {
        let mut ledger = Ledger::default();
        let now = at(86_400 + 10);
        assert!(ledger.reserve("a", 500, 900));
        assert_eq!(ledger.used.runs, 1, "a new mark is a started Run");
        assert!(ledger.reserve("a", 400, 800), "a second read replaces it");
        assert_eq!(ledger.used.runs, 1);
        ledger.step(day(1), [going("a", report(1, 1, 100, 50))], now);
        assert_eq!(ledger.used.runs, 1, "the step does not count it again");
        let reserved = ledger.reserved(None);
        assert_eq!(
            (
                reserved.tokens,
                reserved.input_tokens,
                reserved.output_tokens
            ),
            (250, 250, 250)
        );
        assert_eq!(reserved.cost_micros, 800 - 200);
        assert_eq!(ledger.reserved(Some("a")), BudgetUsage::default());
        ledger.step(
            day(1),
            [ended("a", 86_400 + 20, report(1, 2, 150, 50))],
            now,
        );
        assert_eq!(
            ledger.reserved(None),
            BudgetUsage::default(),
            "released at the end"
        );
        assert_eq!(ledger.used.tokens, 200);
        let mut full = Ledger::default();
        for i in 0..MAX_MARKS {
            assert!(full.reserve(&format!("r{i}"), 1, 0));
        }
        assert!(!full.reserve("one-more", 1, 0));
        assert!(full.reserve("r0", 2, 0));
    }

    #[test]
    fn reports_add_once_and_replays_or_older_reports_add_nothing() {
        let mut ledger = Ledger::default();
        ledger.step(day(1), [going("a", report(1, 1, 100, 10))], at(86_400 + 10));
        assert_eq!(ledger.used.tokens, 110);
        assert_eq!(ledger.used.runs, 1);
        ledger.step(day(1), [going("a", report(1, 1, 100, 10))], at(86_400 + 20));
        assert_eq!(ledger.used.tokens, 110, "the same report again");
        ledger.step(day(1), [going("a", report(1, 3, 300, 30))], at(86_400 + 30));
        assert_eq!(ledger.used.tokens, 330);
        ledger.step(day(1), [going("a", report(1, 2, 200, 20))], at(86_400 + 40));
        assert_eq!(ledger.used.tokens, 330, "an older report");
        assert_eq!(
            (ledger.used.input_tokens, ledger.used.output_tokens),
            (300, 30)
        );
        assert_eq!(ledger.used.runs, 1, "a Run counts once");
    }

    #[test]
    fn a_retried_attempt_adds_what_it_reports_beyond_the_highest_so_far() {
        let mut ledger = Ledger::default();
        let now = at(86_400 + 10);
        ledger.step(day(1), [going("a", report(1, 9, 500, 50))], now);
        // Resumed from a checkpoint at 400 input tokens, then went on.
        ledger.step(day(1), [going("a", report(2, 1, 450, 45))], now);
        assert_eq!(ledger.used.tokens, 550);
        ledger.step(day(1), [going("a", report(2, 2, 700, 60))], now);
        assert_eq!(ledger.used.tokens, 760);
        assert_eq!(ledger.used.runs, 1);
    }

    #[test]
    fn a_window_end_resets_used_and_counts_only_what_comes_after() {
        let mut ledger = Ledger::default();
        let stepped = ledger.step(day(1), [going("a", report(1, 1, 100, 0))], at(86_400 + 10));
        assert!(!stepped.reset);
        let stepped = ledger.step(
            day(2),
            [going("a", report(1, 2, 150, 0))],
            at(2 * 86_400 + 1),
        );
        assert!(stepped.reset);
        assert_eq!(ledger.used.tokens, 50, "only what came after the reset");
        assert_eq!(
            ledger.used.runs, 0,
            "the Run started in the previous window"
        );
        assert_eq!(ledger.window, Some(day(2)));
    }

    #[test]
    fn finished_runs_are_folded_after_settling_and_never_counted_again() {
        let mut ledger = Ledger::default();
        let start = 86_400;
        ledger.step(day(1), [going("a", report(1, 1, 100, 0))], at(start + 10));
        ledger.step(
            day(1),
            [ended("a", start + 20, report(1, 2, 200, 0))],
            at(start + 30),
        );
        assert_eq!(ledger.marks.len(), 1, "kept while settling");
        ledger.step(
            day(1),
            [ended("a", start + 20, report(1, 2, 200, 0))],
            at(start + 200),
        );
        assert!(ledger.marks.is_empty(), "folded");
        assert_eq!(ledger.settled_before, Some(at(start + 200 - 60)));
        ledger.step(
            day(1),
            [ended("a", start + 20, report(1, 2, 200, 0))],
            at(start + 300),
        );
        assert_eq!(ledger.used.tokens, 200, "a folded Run is not counted again");
        assert_eq!(ledger.used.runs, 1);
    }

    #[test]
    fn a_run_that_came_and_went_unseen_counts_in_full_unless_it_ended_before_the_window() {
        let mut ledger = Ledger::default();
        let start = 86_400;
        ledger.step(day(1), Vec::<RunUsage>::new(), at(start + 100));
        // The operator was away from +100 to +1000; "b" ran from +500 to +600.
        let runs = [
            ended("b", start + 600, report(1, 5, 70, 7)),
            ended("old", start - 5, report(1, 5, 1000, 0)),
        ];
        ledger.step(day(1), runs.clone(), at(start + 1000));
        assert_eq!(ledger.used.tokens, 77);
        assert_eq!(ledger.used.runs, 1);
        ledger.step(day(1), runs, at(start + 1001));
        assert_eq!(ledger.used.tokens, 77);
    }

    #[test]
    fn a_new_budget_counts_runs_going_and_those_ended_in_this_window() {
        let mut ledger = Ledger::default();
        let start = 86_400;
        let runs = [
            going("a", report(1, 3, 10, 1)),
            ended("b", start + 5, report(1, 3, 20, 2)),
            ended("c", start - 5, report(1, 3, 40, 4)),
            RunUsage {
                uid: "queued",
                selected: true,
                started: false,
                finished_at: None,
                report: None,
            },
        ];
        ledger.step(day(1), runs, at(start + 100));
        assert_eq!(ledger.used.tokens, 33);
        assert_eq!(ledger.used.runs, 2);
    }

    #[test]
    fn a_run_no_longer_selected_is_not_counted_and_not_counted_twice_when_selected_again() {
        let mut ledger = Ledger::default();
        ledger.step(day(1), [going("a", report(1, 1, 10, 0))], at(86_401));
        let mut away = going("a", report(1, 2, 30, 0));
        away.selected = false;
        ledger.step(day(1), [away], at(86_402));
        assert_eq!((ledger.used.tokens, ledger.marks.len()), (10, 1));
        ledger.step(day(1), [going("a", report(1, 3, 50, 0))], at(86_403));
        assert_eq!(ledger.used.tokens, 50, "from its mark, once");
        assert_eq!(ledger.used.runs, 1);
        let mut unselected = going("b", report(1, 1, 99, 0));
        unselected.selected = false;
        ledger.step(day(1), [going("a", None), unselected], at(86_404));
        assert_eq!(ledger.used.tokens, 50);
    }

    #[test]
    fn deleted_runs_leave_the_marks() {
        let mut ledger = Ledger::default();
        ledger.step(
            day(1),
            [going("a", report(1, 1, 1, 0)), going("b", None)],
            at(86_401),
        );
        assert_eq!(ledger.marks.len(), 2);
        ledger.step(day(1), [going("b", None)], at(86_402));
        assert_eq!(ledger.marks.len(), 1);
        assert_eq!(ledger.used.tokens, 1);
    }

    #[test]
    fn the_marks_are_bounded() {
        let mut ledger = Ledger::default();
        let uids: Vec<String> = (0..MAX_MARKS + 5).map(|i| format!("u{i}")).collect();
        let stepped = ledger.step(
            day(1),
            uids.iter().map(|uid| going(uid, report(1, 1, 1, 0))),
            at(86_401),
        );
        assert_eq!(ledger.marks.len(), MAX_MARKS);
        assert_eq!(stepped.untracked, 5);
    }

    #[test]
    fn limits_remaining_reached_allowance_and_the_tightest() {
        let limits = BudgetLimits {
            tokens: Some(1000),
            input_tokens: None,
            output_tokens: Some(100),
            runs: Some(10),
            cost: Some(herd_crds::budget::CostLimit {
                amount: "2.5".into(),
                currency: "EUR".into(),
            }),
        };
        let used = BudgetUsage {
            tokens: 600,
            input_tokens: 520,
            output_tokens: 80,
            runs: 10,
            cost_micros: 1_250_000,
        };
        assert_eq!(
            remaining(&limits, &used),
            BudgetUsage {
                tokens: 400,
                input_tokens: 0,
                output_tokens: 20,
                runs: 0,
                cost_micros: 1_250_000,
            }
        );
        assert_eq!(Limit::Cost.amount(1_250_000, &limits), "1.250000 EUR");
        assert_eq!(reached(&limits, &used), [Limit::Runs]);
        assert_eq!(token_allowance(&limits, &used), Some(20));
        assert_eq!(
            tightest(&limits, &used),
            Some(("10 runs".into(), "10 runs".into()))
        );
        assert_eq!(
            token_allowance(
                &BudgetLimits {
                    runs: Some(1),
                    ..BudgetLimits::default()
                },
                &used
            ),
            None
        );
    }

    /// One scripted Run: its cumulative reports in order.
    fn scripts() -> impl Strategy<Value = Vec<Vec<(u64, u64)>>> {
        prop::collection::vec(prop::collection::vec((0u64..500, 0u64..50), 1..6), 1..6)
    }

    proptest! {
        /// Reports delivered any number of times, in any order, in steps of any size, with
        /// restarts from the written status between steps: `used` is always the sum of each
        /// Run's highest report, never more.
        #[test]
        fn duplicates_reorders_and_restarts_never_double_count(
            scripts in scripts(),
            deliveries in prop::collection::vec((0usize..6, 0usize..6), 1..80),
        ) {
            let uids: Vec<String> = (0..scripts.len()).map(|i| format!("run-{i}")).collect();
            // Cumulative reports per Run.
            let reports: Vec<Vec<Reported>> = scripts.iter().map(|steps| {
                let (mut input, mut output) = (0, 0);
                steps.iter().enumerate().map(|(seq, (i, o))| {
                    input += i;
                    output += o;
                    Reported { attempt: 1, seq: seq as u64 + 1, input_tokens: input, output_tokens: output, cost_micros: input + 2 * output }
                }).collect()
            }).collect();
            let mut ledger = Ledger::default();
            let mut highest: BTreeMap<usize, Reported> = BTreeMap::new();
            for (n, (run, which)) in deliveries.iter().enumerate() {
                let run = run % reports.len();
                let report = reports[run][which % reports[run].len()];
                let now = at(86_400 + n as i64);
                // Every Run is in the cache; the one delivered shows this report.
                let visible = uids.iter().enumerate().map(|(i, uid)| going(uid, (i == run).then_some(report)));
                ledger.step(day(1), visible, now);
                let best = highest.entry(run).or_insert(report);
                if report.seq > best.seq { *best = report; }
                // A restart: the status is all that is kept.
                let mut status = BudgetStatus::default();
                ledger.write_to(&mut status);
                ledger = Ledger::from_status(&status);
                let expected: u64 = highest.values().map(|r| r.input_tokens + r.output_tokens).sum();
                prop_assert_eq!(ledger.used.tokens, expected);
                let cost: u64 = highest.values().map(|r| r.cost_micros).sum();
                prop_assert_eq!(ledger.used.cost_micros, cost);
                prop_assert_eq!(ledger.used.runs, uids.len() as u64, "every Run started once");
            }
        }

        /// Over consecutive windows, what each window counted adds up to the Runs' final
        /// reports: nothing lost, nothing twice, across resets.
        #[test]
        fn windows_partition_the_usage(
            scripts in scripts(),
            steps_per_window in 1usize..4,
        ) {
            let uids: Vec<String> = (0..scripts.len()).map(|i| format!("run-{i}")).collect();
            let mut ledger = Ledger::default();
            let mut total = 0;
            let longest = scripts.iter().map(Vec::len).max().unwrap_or(0);
            let mut cumulative = vec![(0u64, 0u64); scripts.len()];
            let mut windows_used = Vec::new();
            for step in 0..longest {
                let window = (step / steps_per_window) as i64;
                let runs: Vec<RunUsage> = scripts.iter().enumerate().filter_map(|(i, s)| {
                    let (input, output) = s.get(step)?;
                    cumulative[i].0 += input;
                    cumulative[i].1 += output;
                    Some(going(&uids[i], report(1, step as u64 + 1, cumulative[i].0, cumulative[i].1)))
                }).collect();
                let stepped = ledger.step(day(window + 1), runs, at((window + 1) * 86_400 + step as i64));
                if stepped.reset { windows_used.push(total); }
                total = ledger.used.tokens;
            }
            windows_used.push(total);
            let counted: u64 = windows_used.iter().sum();
            let reported: u64 = cumulative.iter().map(|(i, o)| i + o).sum();
            prop_assert_eq!(counted, reported);
        }
    }
}
