//! ToolErrorHandling: every failed tool result reads as an error the model can act on, and
//! results carry the facts later middlewares record.
//!
//! Our tools do not throw; they return error results. Most already start with `Error:`; one
//! that does not (a raw message from a library or a remote service) is framed with the tool's
//! name and a hint to move on. Failed `task` results are stamped `subagent_status: failed`,
//! and a successful `read_file` of a SKILL.md is stamped `skill_read` so the skill counts as
//! loaded (SkillToolPolicy, DurableContext).

use async_trait::async_trait;
use herd_sandbox::truncation::truncate_chars;

use super::shared::active_skills::{SKILL_READ_KEY, skill_file_ref};
use crate::agent::{Middleware, ToolNext, ToolRequest};
use crate::thread::ToolStatus;
use crate::tools::ToolOutput;

/// Longest error detail quoted in a framed error (DeerFlow's cap).
pub const MAX_DETAIL_CHARS: usize = 500;
/// Meta key on every failed result: `{"tool": …, "framed": bool}`.
pub const TOOL_ERROR_KEY: &str = "tool_error";
/// Meta key of a delegation's outcome on `task` results.
pub const SUBAGENT_STATUS_KEY: &str = "subagent_status";

/// Frames unframed tool errors and stamps result facts.
#[derive(Debug, Default)]
pub struct ToolErrorHandling;

impl ToolErrorHandling {
    /// The middleware; it needs no settings.
    pub fn new() -> Self {
        ToolErrorHandling
    }
}

fn is_framed(content: &str) -> bool {
    content.trim_start().starts_with("Error")
}

/// The error as the model sees it: tool, capped detail, and what to do next.
pub fn frame_error(tool: &str, detail: &str) -> String {
    let detail = detail.trim();
    let mut capped = truncate_chars(detail, MAX_DETAIL_CHARS);
    if capped.is_empty() {
        capped.push_str("no details were given");
    }
    format!(
        "Error: Tool '{tool}' failed: {capped}. Continue with available context, or choose an \
         alternative tool."
    )
}

#[async_trait]
impl Middleware for ToolErrorHandling {
    fn name(&self) -> &'static str {
        "ToolErrorHandling"
    }

    async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
        let tool = request.call.name.clone();
        let read_path = (tool == "read_file")
            .then(|| request.call.parse_arguments().ok())
            .flatten()
            .and_then(|args| args.get("path")?.as_str().map(str::to_owned));
        let mut output = next.run(request).await;
        match output.status {
            ToolStatus::Error => {
                // A failed delegation's own report (what the subagent did before failing) is
                // worth more than a 500-character excerpt, so `task` keeps its text.
                let framed = tool != "task" && !is_framed(&output.content);
                if framed {
                    output.content = frame_error(&tool, &output.content);
                }
                if tool == "task" && !output.meta.contains_key(SUBAGENT_STATUS_KEY) {
                    output
                        .meta
                        .insert(SUBAGENT_STATUS_KEY.into(), serde_json::json!("failed"));
                }
                output.meta.insert(
                    TOOL_ERROR_KEY.into(),
                    serde_json::json!({"tool": tool, "framed": framed}),
                );
            }
            ToolStatus::Success => {
                if let Some(skill) = read_path.as_deref().and_then(skill_file_ref) {
                    output.meta.insert(
                        SKILL_READ_KEY.into(),
                        serde_json::json!({"name": skill.name, "path": skill.path}),
                    );
                }
            }
        }
        output
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::middleware::shared::test_doubles::{FixedTool, run_tool};

    async fn through(tool: FixedTool, name: &str, arguments: serde_json::Value) -> ToolOutput {
        run_tool(
            Arc::new(ToolErrorHandling::new()),
            Arc::new(tool),
            name,
            arguments,
        )
        .await
    }

    #[tokio::test]
    async fn unframed_errors_are_framed_and_capped() {
        let detail = "connection reset by peer ".repeat(40);
        let output = through(
            FixedTool::new("web_fetch", ToolOutput::error(detail.clone())),
            "web_fetch",
            json!({}),
        )
        .await;
        assert!(
            output
                .content
                .starts_with("Error: Tool 'web_fetch' failed: connection reset by peer")
        );
        assert!(
            output
                .content
                .ends_with("…. Continue with available context, or choose an alternative tool.")
        );
        assert!(output.content.chars().count() < MAX_DETAIL_CHARS + 120);
        assert_eq!(
            output.meta[TOOL_ERROR_KEY],
            json!({"tool": "web_fetch", "framed": true})
        );
    }

    #[tokio::test]
    async fn framed_errors_and_successes_keep_their_text() {
        let output = through(
            FixedTool::new(
                "bash",
                ToolOutput::error("Error: sandbox unavailable: socket closed"),
            ),
            "bash",
            json!({}),
        )
        .await;
        assert_eq!(output.content, "Error: sandbox unavailable: socket closed");
        assert_eq!(output.meta[TOOL_ERROR_KEY]["framed"], json!(false));
        let output = through(FixedTool::ok("bash", "fine"), "bash", json!({})).await;
        assert_eq!(output.content, "fine");
        assert!(output.meta.is_empty());
    }

    #[tokio::test]
    async fn empty_errors_get_a_detail() {
        let output = through(FixedTool::new("x", ToolOutput::error("")), "x", json!({})).await;
        assert_eq!(
            output.content,
            "Error: Tool 'x' failed: no details were given. Continue with available context, or \
             choose an alternative tool."
        );
    }

    #[tokio::test]
    async fn failed_delegations_are_stamped_and_keep_their_report() {
        let output = through(
            FixedTool::new("task", ToolOutput::error("Task failed after 3 steps: ...")),
            "task",
            json!({}),
        )
        .await;
        assert_eq!(output.content, "Task failed after 3 steps: ...");
        assert_eq!(output.meta[SUBAGENT_STATUS_KEY], json!("failed"));
        let mut timed_out = ToolOutput::error("Task timed out.");
        timed_out
            .meta
            .insert(SUBAGENT_STATUS_KEY.into(), json!("timed_out"));
        let output = through(FixedTool::new("task", timed_out), "task", json!({})).await;
        assert_eq!(output.meta[SUBAGENT_STATUS_KEY], json!("timed_out"));
    }

    #[tokio::test]
    async fn skill_file_reads_are_stamped() {
        let output = through(
            FixedTool::ok("read_file", "---\nname: research\n---"),
            "read_file",
            json!({"path": "/mnt/skills/public/research/SKILL.md"}),
        )
        .await;
        assert_eq!(
            output.meta[SKILL_READ_KEY],
            json!({"name": "research", "path": "/mnt/skills/public/research/SKILL.md"})
        );
        let output = through(
            FixedTool::ok("read_file", "x"),
            "read_file",
            json!({"path": "/mnt/skills/public/research/refs/guide.md"}),
        )
        .await;
        assert!(!output.meta.contains_key(SKILL_READ_KEY));
        let output = through(
            FixedTool::new("read_file", ToolOutput::error("Error: missing")),
            "read_file",
            json!({"path": "/mnt/skills/public/research/SKILL.md"}),
        )
        .await;
        assert!(!output.meta.contains_key(SKILL_READ_KEY));
    }
}
