//! ReadBeforeWrite: changing an existing file requires having read its current version.
//! DeerFlow added this after agents appended the same report section five times without
//! ever reading the file back (#3857).
//!
//! Every successful `read_file` result is stamped with a read mark: the path and the SHA-256
//! of the whole file (the sandbox reports it in the result's `sha256` meta). `write_file` to
//! an existing file (appending too) and `str_replace` run only if some read mark in the thread
//! matches the file's hash now. Marks live in the thread's messages, so a read summarized
//! away no longer counts, and any write changes the hash, so it invalidates earlier reads.
//! New files are written freely. When the sandbox cannot report on the file the gate opens
//! (the tool reports its own error, if any).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use herd_sandbox::{FileInfo, SandboxClient, WORKSPACE};

use crate::agent::{Middleware, ToolNext, ToolRequest};
use crate::thread::{Message, ThreadState, ToolStatus};
use crate::tools::ToolOutput;

/// Meta key of a read mark on a `read_file` result: `{"path": …, "sha256": …}`.
pub const READ_MARK_KEY: &str = "read_mark";
/// Meta key on the result of a write this gate blocked: `{"path": …, "tool": …}`.
pub const WRITE_BLOCK_KEY: &str = "write_block";
/// The meta key under which the sandbox reports a file's hash.
pub const SANDBOX_SHA256_KEY: &str = "sha256";
/// The tool whose results carry read marks.
pub const READ_TOOL: &str = "read_file";
/// Tools that modify an existing file.
pub const GATED_TOOLS: [&str; 2] = ["write_file", "str_replace"];

/// Blocks writes to files the model has not read at their current version.
#[derive(Debug, Default)]
pub struct ReadBeforeWrite {
    /// One lock per path, so a gate check and the write it admits happen together: two
    /// writes of one turn (which run concurrently) cannot both pass on one stale read.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl ReadBeforeWrite {
    /// The middleware; it asks the sandbox (through the tool context) for file hashes.
    pub fn new() -> Self {
        ReadBeforeWrite::default()
    }

    fn lock_for(&self, path: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        locks.entry(path.to_owned()).or_default().clone()
    }
}

/// A virtual path in one canonical spelling: relative paths are taken from the workspace
/// (as the sandbox does), `.` and empty segments dropped, `..` applied.
pub fn normalize_virtual_path(path: &str) -> String {
    let path = path.trim();
    let full = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{WORKSPACE}/{path}")
    };
    let mut segments: Vec<&str> = Vec::new();
    for segment in full.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    format!("/{}", segments.join("/"))
}

/// The call's `path` argument and whether it appends, if it has a path.
fn target(arguments: &str) -> Option<(String, bool)> {
    let value: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let path = value.get("path")?.as_str()?.to_owned();
    let append = value
        .get("append")
        .and_then(|a| a.as_bool())
        .unwrap_or(false);
    Some((path, append))
}

/// Whether some read mark in the thread is for `path` at version `sha256`.
fn has_mark(state: &ThreadState, path: &str, sha256: &str) -> bool {
    state.messages.iter().any(|message| {
        let Message::Tool(tool) = message else {
            return false;
        };
        tool.status == ToolStatus::Success
            && tool.meta.extra.get(READ_MARK_KEY).is_some_and(|mark| {
                mark.get("path").and_then(|p| p.as_str()) == Some(path)
                    && mark.get("sha256").and_then(|h| h.as_str()) == Some(sha256)
            })
    })
}

/// What the sandbox says about the file now.
enum Current {
    Missing,
    Version {
        sha256: String,
        size: u64,
    },
    /// Unknown (a directory, a sandbox failure): the gate stays open.
    Unknown,
}

async fn current(request: &ToolRequest<'_>, path: &str) -> Current {
    match request.ctx.executor.file_info(path).await {
        Ok(FileInfo { exists: false, .. }) => Current::Missing,
        Ok(FileInfo {
            exists: true,
            size,
            sha256: Some(sha256),
        }) => Current::Version { sha256, size },
        other => {
            tracing::debug!(path, answer = ?other, "read-before-write: cannot inspect the file; allowing the write");
            Current::Unknown
        }
    }
}

fn blocked(tool: &str, path: &str, normalized: &str, size: u64) -> ToolOutput {
    let mut output = ToolOutput::error(format!(
        "Error: {tool} blocked — {path} already exists ({size} bytes) and you have not read its \
         current version. Every write changes the file, so read it again before each \
         modification. Call read_file on it first (any line range is enough, e.g. its last \
         lines before appending), check what is already there, then retry."
    ));
    output.meta.insert(
        WRITE_BLOCK_KEY.into(),
        serde_json::json!({"path": normalized, "tool": tool}),
    );
    output
}

#[async_trait]
impl Middleware for ReadBeforeWrite {
    fn name(&self) -> &'static str {
        "ReadBeforeWrite"
    }

    async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
        let name = request.call.name.as_str();
        let is_read = name == READ_TOOL;
        if !is_read && !GATED_TOOLS.contains(&name) {
            return next.run(request).await;
        }
        let Some((path, append)) = target(&request.call.arguments) else {
            return next.run(request).await;
        };
        let normalized = normalize_virtual_path(&path);
        let lock = self.lock_for(&normalized);
        let _guard = lock.lock().await;

        if is_read {
            let mut output = next.run(request).await;
            let sha256 = output
                .meta
                .get(SANDBOX_SHA256_KEY)
                .and_then(|h| h.as_str())
                .map(str::to_owned);
            if let (ToolStatus::Success, Some(sha256)) = (output.status, sha256) {
                output.meta.insert(
                    READ_MARK_KEY.into(),
                    serde_json::json!({"path": normalized, "sha256": sha256}),
                );
            }
            return output;
        }

        let tool = request.call.name.clone();
        match current(&request, &path).await {
            Current::Version { sha256, size } if !has_mark(request.state, &normalized, &sha256) => {
                tracing::info!(tool = %tool, path = %normalized, append, "write blocked: file not read at its current version");
                blocked(&tool, &path, &normalized, size)
            }
            _ => next.run(request).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herd_sandbox::testing::FakeExecutor;
    use herd_sandbox::{ExecutorError, SandboxRequest, SandboxResponse};
    use serde_json::json;

    use super::*;
    use crate::middleware::shared::test_doubles::{SandboxTool, call, local_sandbox, run_call};
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::AssistantMessage;
    use crate::tools::Tool;

    const FILE: &str = "/mnt/user-data/workspace/report.md";

    fn file_tools() -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(SandboxTool("read_file")),
            Arc::new(SandboxTool("write_file")),
            Arc::new(SandboxTool("str_replace")),
        ]
    }

    fn write(content: &str, append: bool) -> (&'static str, serde_json::Value) {
        (
            "write_file",
            json!({"description": "w", "path": FILE, "content": content, "append": append}),
        )
    }

    fn read() -> (&'static str, serde_json::Value) {
        (
            "read_file",
            json!({"description": "r", "path": FILE, "start_line": 1, "end_line": 1}),
        )
    }

    fn turn(calls_of_turn: &[(&'static str, serde_json::Value)]) -> AssistantMessage {
        calls(calls_of_turn)
    }

    /// Runs `task` through the gate in a fresh local sandbox, the model taking `turns` and
    /// then answering; returns the thread and what the report file holds at the end.
    async fn run_turns(task: &str, turns: Vec<AssistantMessage>) -> (ThreadState, String) {
        let (dir, executor) = local_sandbox();
        let model = QueuedModel::new(turns.into_iter().chain([text("done")]).collect());
        let (agent, mut env) = test_doubles::agent(
            model,
            file_tools(),
            vec![Arc::new(ReadBeforeWrite::new())],
            Arc::new(RecordingControl::default()),
        );
        env.executor = executor;
        let mut state = ThreadState::new(task);
        agent.run(&mut state, &env).await.unwrap();
        let host = dir.path().canonicalize().unwrap();
        let written = std::fs::read_to_string(host.join("user-data/workspace/report.md")).unwrap();
        (state, written)
    }

    fn statuses(state: &ThreadState) -> Vec<(String, ToolStatus)> {
        state
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(t) => Some((t.name.clone(), t.status)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn paths_are_normalized() {
        assert_eq!(
            normalize_virtual_path("/mnt/user-data//workspace/./a/../b.md"),
            "/mnt/user-data/workspace/b.md"
        );
        assert_eq!(
            normalize_virtual_path("notes/a.md"),
            "/mnt/user-data/workspace/notes/a.md"
        );
    }

    #[tokio::test]
    async fn writes_need_a_read_of_the_current_version_and_every_write_invalidates_it() {
        let (state, written) = run_turns(
            "write a report",
            vec![
                turn(&[write("# Report\n", false)]), // new file: allowed
                turn(&[write("## Again\n", true)]),  // exists, never read: blocked
                turn(&[read()]),
                turn(&[write("## Part 2\n", true)]), // read at this version: allowed
                turn(&[write("## Part 3\n", true)]), // the last write changed it: blocked
                turn(&[(
                    "str_replace",
                    json!({"description": "s", "path": FILE, "old_str": "Report", "new_str": "R"}),
                )]), // blocked too
            ],
        )
        .await;
        use ToolStatus::{Error, Success};
        assert_eq!(
            statuses(&state),
            vec![
                ("write_file".to_string(), Success),
                ("write_file".into(), Error),
                ("read_file".into(), Success),
                ("write_file".into(), Success),
                ("write_file".into(), Error),
                ("str_replace".into(), Error),
            ]
        );
        assert_eq!(written, "# Report\n## Part 2\n");
        let blocked = state
            .messages
            .iter()
            .find_map(|m| match m {
                Message::Tool(t) if t.status == Error => Some(t.clone()),
                _ => None,
            })
            .unwrap();
        assert!(blocked.content.starts_with("Error: write_file blocked — /mnt/user-data/workspace/report.md already exists (9 bytes)"));
        assert_eq!(blocked.meta.extra[WRITE_BLOCK_KEY]["path"], json!(FILE));
        let mark = state
            .messages
            .iter()
            .find_map(|m| match m {
                Message::Tool(t) if t.name == "read_file" => {
                    t.meta.extra.get(READ_MARK_KEY).cloned()
                }
                _ => None,
            })
            .unwrap();
        assert_eq!(mark["path"], json!(FILE));
    }

    #[tokio::test]
    async fn two_writes_in_one_turn_cannot_share_one_read() {
        let (state, written) = run_turns(
            "t",
            vec![
                turn(&[write("v1\n", false)]),
                turn(&[read()]),
                turn(&[write("a\n", true), write("b\n", true)]),
            ],
        )
        .await;
        let last_two: Vec<ToolStatus> =
            statuses(&state).iter().rev().take(2).map(|s| s.1).collect();
        assert_eq!(
            last_two.iter().filter(|s| **s == ToolStatus::Error).count(),
            1
        );
        assert!(written == "v1\na\n" || written == "v1\nb\n", "{written}");
    }

    #[tokio::test]
    async fn the_gate_opens_when_the_sandbox_cannot_inspect_the_file() {
        let executor = Arc::new(FakeExecutor::new(|request| match request {
            SandboxRequest::FileInfo { .. } => Err(ExecutorError("socket closed".into())),
            _ => Ok(SandboxResponse::ToolResult {
                content: "OK".into(),
                is_error: false,
                meta: serde_json::Map::new(),
            }),
        }));
        let output = run_call(
            Arc::new(ReadBeforeWrite::new()),
            vec![Arc::new(SandboxTool("write_file"))],
            call(
                "c",
                "write_file",
                json!({"path": FILE, "content": "x", "append": true}),
            ),
            &ThreadState::new("t"),
            executor.clone(),
        )
        .await;
        assert_eq!(output.status, ToolStatus::Success);
        assert_eq!(executor.requests().len(), 2, "file info, then the write");
    }

    #[tokio::test]
    async fn a_failed_read_leaves_no_mark() {
        let executor = Arc::new(FakeExecutor::new(|_| {
            Ok(SandboxResponse::ToolResult {
                content: "Error: binary".into(),
                is_error: true,
                meta: [("sha256".to_string(), json!("abc"))].into_iter().collect(),
            })
        }));
        let output = run_call(
            Arc::new(ReadBeforeWrite::new()),
            vec![Arc::new(SandboxTool("read_file"))],
            call("c", "read_file", json!({"path": FILE})),
            &ThreadState::new("t"),
            executor,
        )
        .await;
        assert!(!output.meta.contains_key(READ_MARK_KEY));
    }
}
