//! The sandbox side of the seven model-facing tools, one file each, and what they share:
//! the reply type and argument parsing.

pub(crate) mod bash;
pub(crate) mod glob;
pub(crate) mod grep;
pub(crate) mod ls;
pub mod names;
pub(crate) mod read_file;
pub(crate) mod str_replace;
pub(crate) mod write_file;

use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use super::host::SandboxHost;
use super::paths::SandboxPaths;
use super::protocol::SandboxResponse;
use names::{GLOB, GREP, LS, READ_FILE, STR_REPLACE, WRITE_FILE};

/// What a tool produced: made by the sandbox side (host paths masked before it leaves), and
/// handed back by the typed client (`SandboxClient::run_tool`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolReply {
    pub content: String,
    pub is_error: bool,
    pub meta: serde_json::Map<String, serde_json::Value>,
}

impl ToolReply {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolReply {
            content: content.into(),
            ..ToolReply::default()
        }
    }

    /// A failed call: the model reads the message and tries something else.
    pub fn error(message: impl Into<String>) -> Self {
        ToolReply {
            content: message.into(),
            is_error: true,
            ..ToolReply::default()
        }
    }

    /// Adds the SHA-256 of a file's bytes (read-before-write tracking uses it).
    pub(crate) fn with_sha256(mut self, bytes: &[u8]) -> Self {
        self.meta.insert(
            "sha256".to_owned(),
            serde_json::Value::String(sha256_hex(bytes)),
        );
        self
    }

    /// The response, with any host path in the text turned into its virtual path.
    pub(crate) fn into_response(self, paths: &SandboxPaths) -> SandboxResponse {
        SandboxResponse::ToolResult {
            content: paths.mask(&self.content),
            is_error: self.is_error,
            meta: self.meta,
        }
    }
}

/// Runs one of the file tools (everything but `bash`, which is async). Blocking: call it off
/// the async runtime.
pub(crate) fn run_file_tool(
    sandbox: &SandboxHost,
    name: &str,
    arguments: serde_json::Value,
) -> ToolReply {
    let paths = sandbox.paths();
    match name {
        LS => with_args(name, arguments, |args| ls::run(paths, &args)),
        READ_FILE => with_args(name, arguments, |args| read_file::run(paths, &args)),
        WRITE_FILE => with_args(name, arguments, |args| write_file::run(paths, &args)),
        STR_REPLACE => with_args(name, arguments, |args| str_replace::run(paths, &args)),
        GLOB => with_args(name, arguments, |args| glob::run(paths, &args)),
        GREP => with_args(name, arguments, |args| grep::run(paths, &args)),
        other => ToolReply::error(format!(
            "Error: unknown sandbox tool '{other}'; the sandbox runs bash, ls, read_file, \
             write_file, str_replace, glob and grep"
        )),
    }
}

/// Parses a tool's arguments and runs it, or explains what was wrong with them.
pub(crate) fn with_args<A: DeserializeOwned>(
    tool: &str,
    arguments: serde_json::Value,
    run: impl FnOnce(A) -> ToolReply,
) -> ToolReply {
    match serde_json::from_value(arguments) {
        Ok(args) => run(args),
        Err(error) => invalid_args(tool, &error),
    }
}

/// Arguments that do not fit the tool's schema, explained to the model.
pub(crate) fn invalid_args(tool: &str, error: &serde_json::Error) -> ToolReply {
    ToolReply::error(format!(
        "Error: invalid arguments for {tool}: {error}. Check the tool's schema and call it again."
    ))
}

/// A sandbox under a temporary directory whose workspace holds `files` (path relative to the
/// workspace, content); parent folders are made, and a path ending in `/` is an empty folder.
#[cfg(test)]
pub(crate) fn workspace_with<C: AsRef<[u8]>>(
    files: &[(&str, C)],
) -> std::io::Result<(tempfile::TempDir, SandboxPaths)> {
    let dir = tempfile::tempdir()?;
    let roots = crate::paths::SandboxRoots::under(dir.path());
    let workspace = roots.user_data.join("workspace");
    std::fs::create_dir_all(&workspace)?;
    for (path, content) in files {
        let host = workspace.join(path);
        if path.ends_with('/') {
            std::fs::create_dir_all(&host)?;
            continue;
        }
        if let Some(parent) = host.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&host, content)?;
    }
    let paths = SandboxPaths::new(&roots)?;
    Ok((dir, paths))
}

/// Hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tools_and_bad_arguments_are_error_results() {
        let reply = with_args::<crate::args::LsArgs>(LS, serde_json::json!({"path": 3}), |_| {
            ToolReply::ok("ran")
        });
        assert!(reply.is_error);
        assert!(reply.content.starts_with("Error: invalid arguments for ls"));
    }
}
