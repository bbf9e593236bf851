//! The fallback report: when the result cannot be posted before the deadline, the runner
//! writes `{"stopReason": ..., "text": ...}` to its termination log and exits 75; the operator
//! reads it from the `agent` container's terminated state (`run_status::next_status`) and
//! ends the Run as the stop reason says. The kubelet keeps 4,096 bytes of the message; the
//! report stays within 4,000.

use herd_crds::report::StopReason;
pub use herd_crds::wire::FALLBACK_EXIT_CODE;
use herd_crds::wire::FallbackReport;

/// The most bytes a fallback report takes.
pub const MAX_REPORT_BYTES: usize = 4000;

/// The report for a run that ended with `stop_reason` and `text` (the answer, or for a
/// failure what failed), `text` cut at a character boundary so the JSON fits
/// [`MAX_REPORT_BYTES`].
pub fn fallback_report(stop_reason: StopReason, text: &str) -> String {
    let json = |text: &str| {
        serde_json::to_string(&FallbackReport {
            stop_reason,
            text: text.to_owned(),
        })
        .unwrap_or_default()
    };
    let whole = json(text);
    if whole.len() <= MAX_REPORT_BYTES {
        return whole;
    }
    // Escaping makes a character take 1 to 6 bytes in JSON: count as it is written.
    let mut room = MAX_REPORT_BYTES.saturating_sub(json("").len());
    let mut end = 0;
    let mut buffer = [0u8; 4];
    for (index, c) in text.char_indices() {
        let written = escaped_len(c.encode_utf8(&mut buffer));
        if written > room {
            break;
        }
        room -= written;
        end = index + c.len_utf8();
    }
    json(&text[..end])
}

/// How many bytes `c` takes inside a JSON string.
fn escaped_len(c: &str) -> usize {
    serde_json::to_string(c).map_or(6, |quoted| quoted.len() - 2)
}

#[cfg(test)]
mod tests {
    use herd_operator::decide::pod_outcome::AgentExit;
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_short_answer_is_written_whole_in_the_operators_keys() {
        let report = fallback_report(StopReason::ModelCallLimit, "partial \"answer\"");
        assert_eq!(
            report,
            r#"{"stopReason":"modelCallLimit","text":"partial \"answer\""}"#
        );
    }

    #[test]
    fn a_long_answer_is_cut_to_fit() {
        let text = "é".repeat(5000);
        let report = fallback_report(StopReason::Completed, &text);
        assert!(report.len() <= MAX_REPORT_BYTES);
        assert!(report.len() > MAX_REPORT_BYTES - 4, "{}", report.len());
        let controls = "\u{1}".repeat(5000);
        let report = fallback_report(StopReason::Completed, &controls);
        assert!(report.len() <= MAX_REPORT_BYTES && report.len() > MAX_REPORT_BYTES - 6);
    }

    proptest! {
        #[test]
        fn every_report_fits_parses_and_keeps_a_prefix(text in "(?s).{0,3000}", repeat in 1usize..4) {
            let text = text.repeat(repeat);
            let report = fallback_report(StopReason::LoopDetected, &text);
            prop_assert!(report.len() <= MAX_REPORT_BYTES);
            let value: serde_json::Value = serde_json::from_str(&report).unwrap();
            prop_assert_eq!(&value["stopReason"], "loopDetected");
            let kept = value["text"].as_str().unwrap();
            prop_assert!(text.starts_with(kept));
        }
    }

    /// `Succeeded` as the operator's `next_status` sets it for a running Run whose `agent`
    /// container exits 75 with `message`.
    fn operators_outcome(message: String) -> (String, String, String) {
        use std::time::Duration;

        use herd_crds::condition::find_condition;
        use herd_crds::reason::condition_type;
        use herd_crds::run::RunStatus;
        use herd_operator::decide::pod_outcome::PodOutcome;
        use herd_operator::decide::run_status::{AgentState, PodState, RunFacts, next_status};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

        let at = |s: i64| Time(jiff::Timestamp::from_second(1_700_000_000 + s).unwrap());
        let running = RunFacts {
            name: "r",
            generation: Some(1),
            created: at(0),
            agent_name: "a",
            cancel: false,
            agent: AgentState::Ready,
            timeout: Duration::from_secs(1800),
            input_timeout: Duration::from_secs(3600),
            retries: 0,
            report: None,
            answered: Vec::new(),
            pod: PodState::Observed(PodOutcome::Running),
            pod_name: Some("r-1".into()),
            blocked: None,
            invalid: None,
            snapshot_lost: false,
            pod_created: Some(at(0)),
            pod_start_timeout: Duration::from_secs(600),
            now: at(1),
        };
        let before = next_status(&RunStatus::default(), &running).status;
        let exited = RunFacts {
            pod: PodState::Observed(PodOutcome::AgentExited(AgentExit {
                exit_code: i32::from(FALLBACK_EXIT_CODE),
                oom_killed: false,
                message,
            })),
            now: at(10),
            ..running
        };
        let after = next_status(&before, &exited).status;
        let done = find_condition(&after.conditions, condition_type::SUCCEEDED).unwrap();
        (
            format!("{:?}", done.status),
            done.reason.clone(),
            done.message.clone(),
        )
    }

    #[test]
    fn the_operator_ends_the_run_as_the_report_says() {
        let long = "x".repeat(10_000);
        let cases = [
            (
                StopReason::Completed,
                "the answer",
                ("True", "Succeeded", "the agent answered"),
            ),
            (
                StopReason::TokenBudgetExceeded,
                "part of it",
                ("True", "Succeeded", "stopped by TokenBudgetExceeded"),
            ),
            (
                StopReason::ModelError,
                "503 from upstream",
                ("False", "ModelError", "model error: 503 from upstream"),
            ),
            (
                StopReason::SandboxUnavailable,
                "the socket is gone",
                (
                    "False",
                    "PodFailed",
                    "the sandbox was unavailable: the socket is gone",
                ),
            ),
            (
                StopReason::Completed,
                long.as_str(),
                ("True", "Succeeded", "the agent answered"),
            ),
        ];
        for (reason, text, (status, why, message)) in cases {
            let outcome = operators_outcome(fallback_report(reason, text));
            assert_eq!(
                outcome,
                (status.to_owned(), why.to_owned(), message.to_owned()),
                "{reason:?}"
            );
        }
    }
}
