//! ToolOutputBudget: a huge tool result does not flood the context. It is saved to a file the
//! model can read back in parts, and the model gets a synopsis with a head and a tail sample.
//! When saving fails, very large results are cut to a head and a tail instead.

use async_trait::async_trait;
use herd_sandbox::SandboxClient;
use herd_sandbox::truncation::{last_chars, omission_marker, take_chars};

use crate::agent::{Middleware, ToolNext, ToolRequest};
use crate::tools::ToolOutput;

/// Results longer than this (in characters) are externalized (DeerFlow's
/// `externalize_min_chars`).
pub const EXTERNALIZE_MIN_CHARS: usize = 12_000;
/// Characters of the result's start shown in the synopsis.
pub const SYNOPSIS_HEAD_CHARS: usize = 2_000;
/// Characters of the result's end shown in the synopsis.
pub const SYNOPSIS_TAIL_CHARS: usize = 1_000;
/// When saving fails, results longer than this are truncated (`fallback_max_chars`).
pub const FALLBACK_MAX_CHARS: usize = 30_000;
/// Characters kept from the start of a truncated result.
pub const FALLBACK_HEAD_CHARS: usize = 8_000;
/// Characters kept from the end of a truncated result.
pub const FALLBACK_TAIL_CHARS: usize = 3_000;
/// Where externalized results go.
pub const RESULTS_DIR: &str = "/mnt/user-data/outputs/.tool-results";
/// Tools whose output is already bounded and paged (`read_file` has line ranges; saving its
/// output would only copy the file).
pub const EXEMPT_TOOLS: [&str; 2] = ["read_file", "read_file_tool"];

/// Longest tool-name or call-id part of a result file name.
const MAX_NAME_PART: usize = 64;

/// Externalizes or truncates oversized tool results.
#[derive(Debug, Default)]
pub struct ToolOutputBudget;

impl ToolOutputBudget {
    /// The middleware, with DeerFlow's thresholds.
    pub fn new() -> Self {
        ToolOutputBudget
    }
}

/// `<tool>-<call id>.txt`, with anything but `[A-Za-z0-9_.-]` replaced.
fn file_name(tool: &str, call_id: &str) -> String {
    let clean = |text: &str, fallback: &str| {
        let cleaned: String = text
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .take(MAX_NAME_PART)
            .collect();
        let cleaned = cleaned.trim_start_matches('.').to_owned();
        if cleaned.is_empty() {
            fallback.to_owned()
        } else {
            cleaned
        }
    };
    format!("{}-{}.txt", clean(tool, "tool"), clean(call_id, "call"))
}

fn synopsis(content: &str, chars: usize, path: &str) -> String {
    let lines = content.lines().count();
    format!(
        "[Output too long for the context: {chars} characters, {lines} lines. The full output \
         is saved to {path}; read parts of it with read_file (start_line/end_line) or search it \
         with grep.]\n\n--- first {SYNOPSIS_HEAD_CHARS} characters ---\n{}\n\n--- last \
         {SYNOPSIS_TAIL_CHARS} characters ---\n{}",
        take_chars(content, SYNOPSIS_HEAD_CHARS),
        last_chars(content, SYNOPSIS_TAIL_CHARS)
    )
}

fn truncated(content: &str, chars: usize) -> String {
    let omitted = chars - FALLBACK_HEAD_CHARS - FALLBACK_TAIL_CHARS;
    format!(
        "{}\n\n{} The output was too long and could not be saved.\n\n{}",
        take_chars(content, FALLBACK_HEAD_CHARS),
        omission_marker(omitted),
        last_chars(content, FALLBACK_TAIL_CHARS)
    )
}

#[async_trait]
impl Middleware for ToolOutputBudget {
    fn name(&self) -> &'static str {
        "ToolOutputBudget"
    }

    async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
        let tool = request.call.name.clone();
        let call_id = request.call.id.clone();
        let executor = request.ctx.executor.clone();
        let mut output = next.run(request).await;
        if EXEMPT_TOOLS.contains(&tool.as_str()) {
            return output;
        }
        let chars = output.content.chars().count();
        if chars <= EXTERNALIZE_MIN_CHARS {
            return output;
        }
        let path = format!("{RESULTS_DIR}/{}", file_name(&tool, &call_id));
        let saved = executor.write_output(&path, output.content.clone()).await;
        match saved {
            Ok(written) => {
                output.content = synopsis(&output.content, chars, &written);
                output
                    .meta
                    .insert("externalized_to".into(), serde_json::json!(written));
            }
            Err(failure) => {
                tracing::warn!(tool = %tool, chars, %failure, "could not save a long tool result");
                if chars > FALLBACK_MAX_CHARS {
                    output.content = truncated(&output.content, chars);
                    output
                        .meta
                        .insert("truncated_from_chars".into(), serde_json::json!(chars));
                }
            }
        }
        output
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herd_sandbox::testing::FakeExecutor;
    use herd_sandbox::{ExecutorError, SandboxResponse};
    use serde_json::json;

    use super::*;
    use crate::middleware::shared::test_doubles::{FixedTool, call, local_sandbox, run_call};
    use crate::thread::ThreadState;

    fn big(lines: usize) -> String {
        (0..lines)
            .map(|i| format!("line {i:05} {}\n", "x".repeat(40)))
            .collect()
    }

    #[tokio::test]
    async fn long_results_are_saved_and_summarized() {
        let (dir, executor) = local_sandbox();
        let content = big(400); // 400 lines of 52 chars: 20800 chars
        let output = run_call(
            Arc::new(ToolOutputBudget::new()),
            vec![Arc::new(FixedTool::ok("bash", &content))],
            call("call/1", "bash", json!({"command": "x"})),
            &ThreadState::new("t"),
            executor,
        )
        .await;
        let path = "/mnt/user-data/outputs/.tool-results/bash-call_1.txt";
        assert!(output.content.contains("20800 characters, 400 lines"));
        assert!(output.content.contains(path));
        assert!(output.content.contains("line 00000"));
        assert!(output.content.contains("line 00399"));
        assert!(!output.content.contains("line 00200"));
        assert!(output.content.chars().count() < 3_600);
        assert_eq!(output.meta["externalized_to"], json!(path));
        let host = dir.path().canonicalize().unwrap();
        let saved =
            std::fs::read_to_string(host.join("user-data/outputs/.tool-results/bash-call_1.txt"))
                .unwrap();
        assert_eq!(saved, content);
    }

    #[tokio::test]
    async fn short_results_and_read_file_pass_unchanged() {
        let executor = Arc::new(FakeExecutor::new(|_| {
            Ok(SandboxResponse::Done { path: None })
        }));
        let short = "y".repeat(EXTERNALIZE_MIN_CHARS);
        let output = run_call(
            Arc::new(ToolOutputBudget::new()),
            vec![Arc::new(FixedTool::ok("bash", &short))],
            call("c", "bash", json!({})),
            &ThreadState::new("t"),
            executor.clone(),
        )
        .await;
        assert_eq!(output.content, short);
        let long = big(1000);
        let output = run_call(
            Arc::new(ToolOutputBudget::new()),
            vec![Arc::new(FixedTool::ok("read_file", &long))],
            call("c", "read_file", json!({})),
            &ThreadState::new("t"),
            executor.clone(),
        )
        .await;
        assert_eq!(output.content, long);
        assert!(executor.requests().is_empty());
    }

    #[tokio::test]
    async fn when_saving_fails_very_long_results_are_cut_to_head_and_tail() {
        let failing = Arc::new(FakeExecutor::new(|_| {
            Err(ExecutorError("socket closed".into()))
        }));
        let content: String = (0..40_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let output = run_call(
            Arc::new(ToolOutputBudget::new()),
            vec![Arc::new(FixedTool::ok("bash", &content))],
            call("c", "bash", json!({})),
            &ThreadState::new("t"),
            failing,
        )
        .await;
        assert!(output.content.starts_with(&content[..FALLBACK_HEAD_CHARS]));
        assert!(
            output
                .content
                .ends_with(&content[40_000 - FALLBACK_TAIL_CHARS..])
        );
        assert!(
            output
                .content
                .contains("[… 29000 characters omitted …] The output was too long")
        );
        assert_eq!(output.meta["truncated_from_chars"], json!(40_000));
    }

    #[tokio::test]
    async fn when_saving_fails_moderately_long_results_are_kept_whole() {
        let refusing = Arc::new(FakeExecutor::new(|_| {
            Ok(SandboxResponse::Error {
                message: "Error: disk full".into(),
            })
        }));
        let content = "z".repeat(20_000);
        let output = run_call(
            Arc::new(ToolOutputBudget::new()),
            vec![Arc::new(FixedTool::ok("bash", &content))],
            call("c", "bash", json!({})),
            &ThreadState::new("t"),
            refusing,
        )
        .await;
        assert_eq!(output.content, content);
    }

    #[test]
    fn file_names_are_safe() {
        assert_eq!(file_name("web_fetch", "call_1"), "web_fetch-call_1.txt");
        assert_eq!(file_name("../x", "a b/c"), "_x-a_b_c.txt");
        assert_eq!(file_name("", "..."), "tool-call.txt");
    }
}
