//! The arguments of the seven sandbox tools, shared by both sides: the `agent` container
//! validates them and derives the JSON Schema the model sees, the `sandbox` container parses
//! the same types. Field docs are what the model reads, so they are short; fields whose name
//! says it all (`path`, `command`, `content`, `literal`...) carry none, as every word here is
//! sent with every model call.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `bash` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct BashArgs {
    /// Why, briefly.
    pub description: String,
    pub command: String,
}

/// `ls` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct LsArgs {
    /// Why, briefly.
    pub description: String,
    pub path: String,
}

/// `read_file` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct ReadFileArgs {
    /// Why, briefly.
    pub description: String,
    pub path: String,
    /// First line (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// Last line (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
}

/// `write_file` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct WriteFileArgs {
    /// Why, briefly.
    pub description: String,
    pub path: String,
    pub content: String,
    /// Append instead of overwriting.
    #[serde(default)]
    pub append: bool,
}

/// `str_replace` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct StrReplaceArgs {
    /// Why, briefly.
    pub description: String,
    pub path: String,
    /// Exact text; must occur once unless replace_all.
    pub old_str: String,
    pub new_str: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// `glob` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct GlobArgs {
    /// Why, briefly.
    pub description: String,
    /// Relative to path, e.g. **/*.py
    pub pattern: String,
    pub path: String,
    /// Also match directories.
    #[serde(default)]
    pub include_dirs: bool,
    /// Default 200, max 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<usize>,
}

/// `grep` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct GrepArgs {
    /// Why, briefly.
    pub description: String,
    /// Regex, or text if literal.
    pub pattern: String,
    pub path: String,
    /// File filter, e.g. *.rs
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    #[serde(default)]
    pub literal: bool,
    #[serde(default)]
    pub case_sensitive: bool,
    /// Default 100, max 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<usize>,
}
