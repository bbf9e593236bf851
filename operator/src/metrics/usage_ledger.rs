//! What of each Run's usage the metrics have counted already, so a report counted once is never
//! counted again. Pure.
//!
//! Reports carry a Run's usage so far (cumulative), numbered by attempt and `seq`. The ledger
//! keeps, per Run UID, the newest `(attempt, seq)` taken and the highest count seen of each
//! model's token kind and of the cost; a report adds only what goes past those. A retried or
//! re-sent report (same or lower `seq`), or a stale one, adds nothing; a new attempt that starts
//! from an older checkpoint adds only once it has used more than was counted. A Run the ledger
//! has not seen yet (a new Run, or any Run after an operator restart) starts from the usage its
//! status already shows: that much was counted when it was written.
//!
//! Call statistics are of one attempt: model calls count once by their number in the attempt
//! (the newest number counted is kept), tool calls by how far each `(tool, outcome)` count grew.
//! Tool names outside the built-in tools count as `mcp` (an MCP server's) or `other`, so a
//! runner cannot add label values.

use std::collections::{BTreeMap, HashMap};

use herd_crds::report::{Cost, Usage};
use herd_crds::wire::CallStats;

/// Most Runs the ledger remembers; past it, the Runs updated longest ago are forgotten.
pub const MAX_RUNS: usize = 8192;

/// The model label of usage reported without a split by model (runners before it existed).
pub const UNKNOWN_MODEL: &str = "unknown";

/// The runner's built-in tools: the only tool names that label metrics as they are.
pub const BUILTIN_TOOLS: [&str; 15] = [
    "bash",
    "ls",
    "read_file",
    "write_file",
    "str_replace",
    "glob",
    "grep",
    "present_files",
    "view_image",
    "ask_clarification",
    "task",
    "web_search",
    "web_fetch",
    "write_todos",
    "tool_search",
];

/// The `tool` label of a reported tool name: a built-in tool's name, `mcp`, or `other`.
pub fn tool_label(tool: &str) -> &'static str {
    if let Some(builtin) = BUILTIN_TOOLS.iter().find(|name| **name == tool) {
        return builtin;
    }
    if tool == "mcp" || tool.contains("__") {
        "mcp"
    } else {
        "other"
    }
}

/// The `outcome` label of a reported tool outcome: `ok` or `error`.
fn outcome_label(outcome: &str) -> &'static str {
    if outcome == "ok" { "ok" } else { "error" }
}

/// A kind of token, as the `kind` label says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TokenKind {
    /// Prompt tokens not read from a cache.
    Input,
    /// Completion tokens.
    Output,
    /// Prompt tokens read from the provider's cache.
    CachedInput,
}

impl TokenKind {
    /// The label value: `input`, `output` or `cached_input`.
    pub fn label(self) -> &'static str {
        match self {
            TokenKind::Input => "input",
            TokenKind::Output => "output",
            TokenKind::CachedInput => "cached_input",
        }
    }
}

/// What one report adds to the counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Increments {
    /// Tokens by model and kind (only those that grew).
    pub tokens: Vec<(String, TokenKind, u64)>,
    /// Micros of the cost, with its currency, when it grew.
    pub cost: Option<(String, u64)>,
    /// Model calls not counted before, in seconds.
    pub call_seconds: Vec<f64>,
    /// Tool calls by tool label and outcome label (only those that grew).
    pub tool_calls: Vec<(&'static str, &'static str, u64)>,
}

/// The counts of one Run.
#[derive(Clone, Debug, Default)]
struct Counted {
    order: (u32, u64),
    tokens: BTreeMap<(String, TokenKind), u64>,
    cost: BTreeMap<String, u64>,
    /// The attempt the call counts below are of.
    calls_attempt: u32,
    /// The newest model call number counted in that attempt.
    last_call: u64,
    tools: BTreeMap<(&'static str, &'static str), u64>,
    touched: u64,
}

/// The counts of the Runs seen, by UID.
#[derive(Debug, Default)]
pub struct UsageLedger {
    runs: HashMap<String, Counted>,
    clock: u64,
}

/// The tokens of `usage` by model and kind. Input tokens are counted without their cached part,
/// so `input` and `cached_input` add up to the prompt tokens.
fn tokens_of(usage: &Usage) -> BTreeMap<(String, TokenKind), u64> {
    let mut tokens = BTreeMap::new();
    let mut put = |model: &str, input: u64, cached: u64, output: u64| {
        let cached = cached.min(input);
        for (kind, count) in [
            (TokenKind::Input, input - cached),
            (TokenKind::CachedInput, cached),
            (TokenKind::Output, output),
        ] {
            let slot = tokens.entry((model.to_owned(), kind)).or_insert(0u64);
            *slot = slot.saturating_add(count);
        }
    };
    if usage.by_model.is_empty() {
        put(
            UNKNOWN_MODEL,
            usage.input_tokens,
            usage.cached_input_tokens,
            usage.output_tokens,
        );
    } else {
        for entry in &usage.by_model {
            put(
                &entry.model,
                entry.input_tokens,
                entry.cached_input_tokens,
                entry.output_tokens,
            );
        }
    }
    tokens
}

fn cost_of(cost: Option<&Cost>) -> BTreeMap<String, u64> {
    cost.map(|cost| BTreeMap::from([(cost.currency.clone(), cost.micros)]))
        .unwrap_or_default()
}

impl UsageLedger {
    /// What the report `(attempt, seq)` of the Run `uid` with `usage` (its own, children left
    /// out: they report themselves) adds; `None` when it is not newer than one taken already.
    /// `shown` is the usage the Run's status shows, the baseline of a Run not seen yet.
    pub fn take(
        &mut self,
        uid: &str,
        attempt: u32,
        seq: u64,
        usage: &Usage,
        calls: &CallStats,
        shown: Option<&Usage>,
    ) -> Option<Increments> {
        self.clock += 1;
        let clock = self.clock;
        if !self.runs.contains_key(uid) {
            self.forget_oldest();
            let baseline = Counted {
                tokens: shown.map(tokens_of).unwrap_or_default(),
                cost: cost_of(shown.and_then(|s| s.cost.as_ref())),
                touched: clock,
                ..Counted::default()
            };
            self.runs.insert(uid.to_owned(), baseline);
        }
        let counted = self.runs.get_mut(uid)?;
        if (attempt, seq) <= counted.order {
            return None;
        }
        counted.order = (attempt, seq);
        counted.touched = clock;
        let mut increments = Increments::default();
        for (key, count) in tokens_of(usage) {
            let slot = counted.tokens.entry(key.clone()).or_insert(0);
            if count > *slot {
                increments.tokens.push((key.0, key.1, count - *slot));
                *slot = count;
            }
        }
        for (currency, micros) in cost_of(usage.cost.as_ref()) {
            let slot = counted.cost.entry(currency.clone()).or_insert(0);
            if micros > *slot {
                increments.cost = Some((currency, micros - *slot));
                *slot = micros;
            }
        }
        if attempt != counted.calls_attempt {
            counted.calls_attempt = attempt;
            counted.last_call = 0;
            counted.tools.clear();
        }
        for call in &calls.model_calls {
            if call.n > counted.last_call {
                increments.call_seconds.push(call.millis as f64 / 1000.0);
            }
        }
        if let Some(newest) = calls.model_calls.iter().map(|c| c.n).max() {
            counted.last_call = counted.last_call.max(newest);
        }
        let mut tools: BTreeMap<(&'static str, &'static str), u64> = BTreeMap::new();
        for count in &calls.tool_calls {
            let key = (tool_label(&count.tool), outcome_label(&count.outcome));
            let slot = tools.entry(key).or_insert(0);
            *slot = slot.saturating_add(count.count);
        }
        for (key, count) in tools {
            let slot = counted.tools.entry(key).or_insert(0);
            if count > *slot {
                increments.tool_calls.push((key.0, key.1, count - *slot));
                *slot = count;
            }
        }
        Some(increments)
    }

    /// Makes room for one more Run: forgets the one updated longest ago when full.
    fn forget_oldest(&mut self) {
        if self.runs.len() < MAX_RUNS {
            return;
        }
        if let Some(oldest) = self
            .runs
            .iter()
            .min_by_key(|(_, counted)| counted.touched)
            .map(|(uid, _)| uid.clone())
        {
            self.runs.remove(&oldest);
        }
    }

    /// How many Runs the ledger remembers.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Whether the ledger remembers no Run.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::report::ModelUsage;
    use herd_crds::wire::{TimedCall, ToolCount};
    use proptest::prelude::*;

    use super::*;

    fn none() -> CallStats {
        CallStats::default()
    }

    fn calls(numbers: std::ops::RangeInclusive<u64>, tools: &[(&str, &str, u64)]) -> CallStats {
        CallStats {
            model_calls: numbers.map(|n| TimedCall { n, millis: n * 100 }).collect(),
            tool_calls: tools
                .iter()
                .map(|(tool, outcome, count)| ToolCount {
                    tool: (*tool).to_owned(),
                    outcome: (*outcome).to_owned(),
                    count: *count,
                })
                .collect(),
        }
    }

    #[test]
    fn model_calls_count_once_by_number_and_tool_calls_by_growth() {
        let mut ledger = UsageLedger::default();
        let first = ledger
            .take(
                "uid",
                1,
                1,
                &Usage::default(),
                &calls(1..=2, &[("bash", "ok", 2)]),
                None,
            )
            .unwrap();
        assert_eq!(first.call_seconds, [0.1, 0.2]);
        assert_eq!(first.tool_calls, [("bash", "ok", 2)]);
        let overlapping = calls(
            2..=4,
            &[
                ("bash", "ok", 3),
                ("github__create_issue", "error", 1),
                ("made_up", "ok", 1),
            ],
        );
        let second = ledger
            .take("uid", 1, 2, &Usage::default(), &overlapping, None)
            .unwrap();
        assert_eq!(second.call_seconds, [0.3, 0.4], "call 2 counted once");
        assert_eq!(
            second.tool_calls,
            [("bash", "ok", 1), ("mcp", "error", 1), ("other", "ok", 1)]
        );
        assert_eq!(
            ledger.take("uid", 1, 2, &Usage::default(), &overlapping, None),
            None,
            "the same report again"
        );
        // A new attempt numbers its calls from 1 again.
        let next = ledger
            .take(
                "uid",
                2,
                1,
                &Usage::default(),
                &calls(1..=1, &[("bash", "ok", 1)]),
                None,
            )
            .unwrap();
        assert_eq!(next.call_seconds, [0.1]);
        assert_eq!(next.tool_calls, [("bash", "ok", 1)]);
    }

    #[test]
    fn only_builtin_names_label_tools() {
        assert_eq!(tool_label("bash"), "bash");
        assert_eq!(tool_label("mcp"), "mcp");
        assert_eq!(tool_label("jira__search"), "mcp");
        assert_eq!(tool_label("rm -rf /"), "other");
    }

    fn usage(entries: &[(&str, u64, u64, u64)], micros: Option<u64>) -> Usage {
        let mut usage = Usage::default();
        for (model, input, cached, output) in entries {
            usage.input_tokens += input;
            usage.cached_input_tokens += cached;
            usage.output_tokens += output;
            usage.fold_model(&ModelUsage {
                model: (*model).to_owned(),
                input_tokens: *input,
                output_tokens: *output,
                cached_input_tokens: *cached,
                model_calls: 1,
            });
        }
        usage.cost = micros.map(|micros| Cost {
            currency: "USD".into(),
            micros,
        });
        usage
    }

    fn total(increments: &[Increments], kind: TokenKind) -> u64 {
        increments
            .iter()
            .flat_map(|i| &i.tokens)
            .filter(|(_, k, _)| *k == kind)
            .map(|(_, _, n)| n)
            .sum()
    }

    #[test]
    fn each_report_adds_what_grew_by_model_and_kind_once() {
        let mut ledger = UsageLedger::default();
        let first = ledger
            .take(
                "uid",
                1,
                10,
                &usage(&[("gpt", 100, 60, 10)], Some(5)),
                &none(),
                None,
            )
            .unwrap();
        assert_eq!(
            first.tokens,
            [
                ("gpt".to_owned(), TokenKind::Input, 40),
                ("gpt".to_owned(), TokenKind::Output, 10),
                ("gpt".to_owned(), TokenKind::CachedInput, 60),
            ]
        );
        assert_eq!(first.cost, Some(("USD".to_owned(), 5)));
        let grown = usage(&[("gpt", 150, 60, 12), ("mini", 7, 0, 1)], Some(9));
        assert_eq!(
            ledger.take("uid", 1, 10, &grown, &none(), None),
            None,
            "the same seq again"
        );
        let second = ledger.take("uid", 1, 11, &grown, &none(), None).unwrap();
        assert_eq!(
            second.tokens,
            [
                ("gpt".to_owned(), TokenKind::Input, 50),
                ("gpt".to_owned(), TokenKind::Output, 2),
                ("mini".to_owned(), TokenKind::Input, 7),
                ("mini".to_owned(), TokenKind::Output, 1),
            ]
        );
        assert_eq!(second.cost, Some(("USD".to_owned(), 4)));
        assert_eq!(
            ledger.take("uid", 1, 9, &grown, &none(), None),
            None,
            "an older seq"
        );
        // A new attempt resumed from an older checkpoint: nothing until it passes the counts.
        let resumed = ledger
            .take(
                "uid",
                2,
                1,
                &usage(&[("gpt", 120, 60, 11)], Some(8)),
                &none(),
                None,
            )
            .unwrap();
        assert_eq!(resumed, Increments::default());
    }

    #[test]
    fn a_run_first_seen_starts_from_what_its_status_shows() {
        let mut ledger = UsageLedger::default();
        let shown = usage(&[("gpt", 100, 0, 10)], None);
        let after_restart = ledger
            .take(
                "uid",
                1,
                5,
                &usage(&[("gpt", 130, 0, 10)], None),
                &none(),
                Some(&shown),
            )
            .unwrap();
        assert_eq!(
            after_restart.tokens,
            [("gpt".to_owned(), TokenKind::Input, 30)]
        );
    }

    #[test]
    fn usage_without_a_split_counts_under_unknown() {
        let mut ledger = UsageLedger::default();
        let plain = Usage {
            input_tokens: 3,
            output_tokens: 2,
            ..Usage::default()
        };
        let added = ledger.take("uid", 1, 1, &plain, &none(), None).unwrap();
        assert!(
            added
                .tokens
                .iter()
                .all(|(model, _, _)| model == UNKNOWN_MODEL)
        );
        assert_eq!(total(&[added], TokenKind::Input), 3);
    }

    #[test]
    fn the_ledger_forgets_the_runs_updated_longest_ago() {
        let mut ledger = UsageLedger::default();
        for n in 0..MAX_RUNS + 10 {
            ledger.take(&format!("uid-{n}"), 1, 1, &Usage::default(), &none(), None);
        }
        assert_eq!(ledger.len(), MAX_RUNS);
    }

    proptest! {
        /// However reports are repeated, reordered or dropped, the counters end at the last
        /// report's usage: never above it (no double count), and exactly it once the newest
        /// report has arrived.
        #[test]
        fn counters_end_at_the_newest_report_whatever_the_delivery(
            steps in proptest::collection::vec((0u64..1000, 0u64..500, 0u64..300), 1..20),
            deliveries in proptest::collection::vec(0usize..40, 0..60),
        ) {
            let mut reports = Vec::new();
            let (mut input, mut cached, mut output) = (0, 0, 0);
            for (seq, (more_input, more_cached, more_output)) in steps.iter().enumerate() {
                input += more_input;
                cached += more_cached.min(more_input);
                output += more_output;
                reports.push((seq as u64 + 1, usage(&[("m", input, cached, output)], Some(input))));
            }
            let mut ledger = UsageLedger::default();
            let mut added = Vec::new();
            for index in deliveries {
                let (seq, report) = &reports[index % reports.len()];
                added.extend(ledger.take("uid", 1, *seq, report, &none(), None));
            }
            let (seq, last) = reports.last().unwrap();
            added.extend(ledger.take("uid", 1, *seq, last, &none(), None));
            prop_assert_eq!(total(&added, TokenKind::Input), input - cached);
            prop_assert_eq!(total(&added, TokenKind::CachedInput), cached);
            prop_assert_eq!(total(&added, TokenKind::Output), output);
            let cost: u64 = added.iter().filter_map(|i| i.cost.as_ref()).map(|(_, m)| m).sum();
            prop_assert_eq!(cost, input);
        }
    }
}
