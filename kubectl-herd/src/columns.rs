//! What the columns of `kubectl herd get` say of a Run: its status in a few words, its
//! tokens, how long it ran, and (with `-o wide`) its reason, parent and Pod.

use herd_crds::reason::run as run_reason;
use herd_crds::report::Cost;
use herd_crds::run::{Run, RunPhase};
use herd_crds::terminal_text::one_line;
use jiff::Timestamp;

use crate::outcome::pending_question;
use crate::table::{namespaced_header, namespaced_row};
use crate::tree::age;
use crate::view::{phase_name, tokens_text, view};

/// Most characters of a title in the table; longer ones end in `…`.
const TITLE_WIDTH: usize = 40;

/// The header of the table, with `NAMESPACE` first for `-A` and the wide columns last.
pub fn header(all_namespaces: bool, wide: bool) -> Vec<&'static str> {
    header_with_cost(all_namespaces, wide, false)
}

/// [`header`] with `COST` after `TOKENS` when `priced` (a Run listed is: [`any_priced`]).
pub fn header_with_cost(all_namespaces: bool, wide: bool, priced: bool) -> Vec<&'static str> {
    let mut header = namespaced_header(
        all_namespaces,
        &["NAME", "AGENT", "STATUS", "TITLE", "TOKENS"],
    );
    if priced {
        header.push("COST");
    }
    header.extend(["DURATION", "AGE"]);
    if wide {
        header.extend(["REASON", "PARENT", "POD"]);
    }
    header
}

/// Whether any of `runs` shows a cost (its Agent's model is priced).
pub fn any_priced<'a>(runs: impl IntoIterator<Item = &'a Run>) -> bool {
    runs.into_iter().any(|run| {
        run.status
            .as_ref()
            .and_then(|s| s.report.as_ref())
            .is_some_and(|r| r.usage.cost.is_some())
    })
}

/// `0.0042 USD`: the amount without trailing zeros past two decimals, and the currency; `-`
/// without a cost.
pub fn cost_text(cost: Option<&Cost>) -> String {
    let Some(cost) = cost else {
        return "-".to_owned();
    };
    let amount = cost.amount();
    let (whole, decimals) = amount.split_once('.').unwrap_or((&amount, "00"));
    let mut decimals = decimals.trim_end_matches('0').to_owned();
    while decimals.len() < 2 {
        decimals.push('0');
    }
    format!("{whole}.{decimals} {}", one_line(&cost.currency))
}

/// The cells of `run`'s row under [`header`]; `label` is its name with the tree's branches.
pub fn cells(
    label: &str,
    run: &Run,
    all_namespaces: bool,
    wide: bool,
    now: Timestamp,
) -> Vec<String> {
    cells_with_cost(label, run, all_namespaces, wide, false, now)
}

/// The cells of `run`'s row under [`header_with_cost`].
pub fn cells_with_cost(
    label: &str,
    run: &Run,
    all_namespaces: bool,
    wide: bool,
    priced: bool,
    now: Timestamp,
) -> Vec<String> {
    let shown = view(run);
    let mut cells = namespaced_row(all_namespaces, run);
    cells.extend([
        one_line(label),
        one_line(&run.spec.agent_ref.name),
        status_text(run),
        shorten(
            &one_line(shown.title.as_deref().unwrap_or_default()),
            TITLE_WIDTH,
        ),
        tokens_text(shown.usage.total_tokens()),
    ]);
    if priced {
        cells.push(cost_text(shown.usage.cost.as_ref()));
    }
    cells.extend([
        duration_text(run, now),
        run.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| age(t.0, now))
            .unwrap_or_else(|| "<unknown>".to_owned()),
    ]);
    if wide {
        let status = run.status.as_ref();
        cells.extend([
            or_none(one_line(&shown.reason)),
            or_none(one_line(
                run.spec
                    .parent_ref
                    .as_ref()
                    .map(|p| p.name.as_str())
                    .unwrap_or_default(),
            )),
            or_none(one_line(
                status
                    .and_then(|s| s.pod_name.as_deref())
                    .unwrap_or_default(),
            )),
        ]);
    }
    cells
}

/// Where the Run stands, in the words a person reads first: `Running`, `Starting`, `Waiting
/// for answer`, `Agent not ready`, `Cancelling`, `Succeeded`…
pub fn status_text(run: &Run) -> String {
    let shown = view(run);
    if shown.cancelling {
        return "Cancelling".to_owned();
    }
    let text = match (shown.phase, shown.reason.as_str()) {
        (RunPhase::Pending, run_reason::AGENT_NOT_FOUND) => "Agent not found",
        (RunPhase::Pending, run_reason::AGENT_NOT_READY) => "Agent not ready",
        (RunPhase::Running, run_reason::POD_PENDING) => "Starting",
        (RunPhase::InputRequired, _) => "Waiting for answer",
        // No Pod while it waits: what for, when the Run says.
        (RunPhase::Suspended, _) if pending_question(run).is_some() => {
            "Suspended, waiting for answer"
        }
        (phase, _) => phase_name(phase),
    };
    text.to_owned()
}

/// From `status.startTime` to `status.completionTime` (to `now` while it goes on); `-` before
/// it started.
pub fn duration_text(run: &Run, now: Timestamp) -> String {
    let status = run.status.as_ref();
    let Some(start) = status.and_then(|s| s.start_time.as_ref()) else {
        return "-".to_owned();
    };
    let end = status
        .and_then(|s| s.completion_time.as_ref())
        .map_or(now, |t| t.0);
    age(start.0, end)
}

fn or_none(text: String) -> String {
    if text.is_empty() {
        "<none>".to_owned()
    } else {
        text
    }
}

/// `text` cut to `width` characters, the last one `…` when cut.
fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{kept}…")
}

#[cfg(test)]
mod tests {
    use herd_crds::condition::ConditionStatus;

    use super::*;
    use crate::testing::{at, question_run, run_named, run_with};

    #[test]
    fn the_status_is_one_phrase() {
        let with = |reason: &str| run_with(Some((ConditionStatus::Unknown, reason)), None, None);
        assert_eq!(status_text(&run_named("r")), "Pending");
        assert_eq!(status_text(&with("PodPending")), "Starting");
        assert_eq!(status_text(&with("Running")), "Running");
        assert_eq!(status_text(&with("AgentNotReady")), "Agent not ready");
        assert_eq!(status_text(&question_run("q", &[])), "Waiting for answer");
        let mut cancelling = with("Running");
        cancelling.spec.cancel = true;
        assert_eq!(status_text(&cancelling), "Cancelling");
        let done = run_with(Some((ConditionStatus::True, "Succeeded")), None, None);
        assert_eq!(status_text(&done), "Succeeded");
    }

    #[test]
    fn a_suspended_run_says_what_it_waits_for() {
        let mut suspended = question_run("q", &[]);
        if let Some(status) = suspended.status.as_mut() {
            status.phase = Some(RunPhase::Suspended);
            for condition in &mut status.conditions {
                if condition.type_ == "Succeeded" {
                    condition.reason = "Suspended".into();
                }
            }
        }
        let mut answered = suspended.clone();
        answered.spec.responses =
            vec![serde_json::from_value(serde_json::json!({"id": "q", "answer": "teal"})).unwrap()];
        let lines = [("suspended", &suspended), ("answered", &answered)]
            .map(|(name, run)| format!("{name}: {}", status_text(run)))
            .join("\n");
        insta::assert_snapshot!(lines, @r"
        suspended: Suspended, waiting for answer
        answered: Suspended
        ");
    }

    #[test]
    fn costs_read_with_at_least_two_decimals_and_their_currency() {
        let cost = |micros| Cost {
            currency: "USD".into(),
            micros,
        };
        assert_eq!(cost_text(Some(&cost(4_210))), "0.00421 USD");
        assert_eq!(cost_text(Some(&cost(12_500_000))), "12.50 USD");
        assert_eq!(cost_text(Some(&cost(0))), "0.00 USD");
        assert_eq!(cost_text(None), "-");
    }

    #[test]
    fn the_duration_runs_from_start_to_completion_or_now() {
        let mut run = run_named("r");
        assert_eq!(duration_text(&run, at(100).0), "-");
        run.status = Some(herd_crds::run::RunStatus {
            start_time: Some(at(10)),
            ..Default::default()
        });
        assert_eq!(duration_text(&run, at(100).0), "90s");
        if let Some(status) = run.status.as_mut() {
            status.completion_time = Some(at(40));
        }
        assert_eq!(duration_text(&run, at(100).0), "30s");
    }

    #[test]
    fn long_titles_are_cut() {
        assert_eq!(shorten("abc", 3), "abc");
        assert_eq!(shorten("abcd", 3), "ab…");
    }
}
