//! The metric names a PromQL query reads, so that a test can check each against what a real
//! Prometheus has seen: Prometheus answers a query over an unknown metric with an empty result,
//! not an error, so a typo in an alert or a dashboard would otherwise pass unnoticed.
//!
//! A tokenizer, not a parser: it drops strings, label matchers (`{...}`), ranges (`[...]`) and
//! label lists (`by (...)`, `on (...)`...), and keeps the identifiers that are neither keywords,
//! aggregations nor function calls.

use std::collections::BTreeSet;

/// Words of PromQL that are never metric names where they stand: aggregations (they may be
/// followed by `by (...)` before their parenthesis), binary and modifier keywords.
const KEYWORDS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    "and",
    "or",
    "unless",
    "atan2",
    "bool",
    "offset",
    "start",
    "end",
    "inf",
    "nan",
];

/// Keywords followed by a parenthesised list of label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names `query` selects, e.g. `{"up", "herd_leader"}` for
/// `sum by (namespace) (herd_leader) * on (namespace) up`.
pub fn metric_names(query: &str) -> BTreeSet<String> {
    let chars: Vec<char> = query.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_string(&chars, i),
            '{' => i = skip_until(&chars, i, '}'),
            '[' => i = skip_until(&chars, i, ']'),
            c if c.is_ascii_digit() || c == '.' => i = skip_number(&chars, i),
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len() && is_name_char(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = next_non_space(&chars, i);
                let lower = word.to_ascii_lowercase();
                if LABEL_LISTS.contains(&lower.as_str()) {
                    if let Some(open) = next.filter(|&n| chars[n] == '(') {
                        i = skip_until(&chars, open, ')');
                    }
                } else if !KEYWORDS.contains(&lower.as_str())
                    && next.is_none_or(|n| chars[n] != '(')
                {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn next_non_space(chars: &[char], from: usize) -> Option<usize> {
    (from..chars.len()).find(|&n| !chars[n].is_whitespace())
}

/// The index after the string opening at `open` (escapes honoured, except in backquotes).
fn skip_string(chars: &[char], open: usize) -> usize {
    let quote = chars[open];
    let mut i = open + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// The index after the `close` matching the bracket at `open`, strings inside skipped.
fn skip_until(chars: &[char], open: usize, close: char) -> usize {
    let mut i = open + 1;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => i = skip_string(chars, i),
            c if c == close => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// The index after a number or a duration (`0.95`, `1e3`, `5m`, `0x1f`).
fn skip_number(chars: &[char], start: usize) -> usize {
    let mut i = start;
    while i < chars.len() && (is_name_char(chars[i]) || chars[i] == '.') {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(query: &str) -> Vec<String> {
        metric_names(query).into_iter().collect()
    }

    #[test]
    fn selectors_and_bare_names() {
        assert_eq!(names("up"), ["up"]);
        assert_eq!(
            names(r#"absent(up{job="herd", instance=~"a{1}"} == 1)"#),
            ["up"]
        );
        assert_eq!(
            names("process_open_fds / process_max_fds"),
            ["process_max_fds", "process_open_fds"]
        );
    }

    #[test]
    fn aggregations_label_lists_and_functions_are_not_names() {
        let query = r#"histogram_quantile(0.95, sum by (le, controller) (rate(herd_reconcile_duration_seconds_bucket{job="herd"}[5m])))"#;
        assert_eq!(names(query), ["herd_reconcile_duration_seconds_bucket"]);
        let query = r#"max by (namespace) (min_over_time(herd_runs_queued[15m])) > 0
            unless on (namespace) sum by (namespace) (increase(herd_runs_finished_total[15m])) > 0"#;
        assert_eq!(
            names(query),
            ["herd_runs_finished_total", "herd_runs_queued"]
        );
        let query = "sum without (instance) (a) / ignoring (code) group_left (route) b offset 5m";
        assert_eq!(names(query), ["a", "b"]);
    }

    #[test]
    fn numbers_durations_and_strings_are_not_names() {
        assert_eq!(
            names(
                r#"min(cert > 0) - time() < 7 * 86400 and label_replace(x, "dst", "$1", "src", "(.*)")"#
            ),
            ["cert", "x"]
        );
        assert_eq!(names("1e3 + 0x1f + Inf + NaN"), Vec::<String>::new());
    }
}
