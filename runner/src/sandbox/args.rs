//! The arguments of the seven sandbox tools, shared by both sides: the `agent` container
//! validates them and derives the JSON Schema the model sees, the `sandbox` container parses
//! the same types. Field docs are what the model reads, so they are short.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `bash` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct BashArgs {
    /// Why, in a few words.
    pub description: String,
    /// The bash command.
    pub command: String,
}

/// `ls` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct LsArgs {
    /// Why, in a few words.
    pub description: String,
    /// Absolute directory path.
    pub path: String,
}

/// `read_file` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct ReadFileArgs {
    /// Why, in a few words.
    pub description: String,
    /// Absolute file path.
    pub path: String,
    /// First line to read (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// Last line to read (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
}

/// `write_file` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct WriteFileArgs {
    /// Why, in a few words.
    pub description: String,
    /// Absolute file path.
    pub path: String,
    /// The text to write.
    pub content: String,
    /// Append instead of overwriting.
    #[serde(default)]
    pub append: bool,
}

/// `str_replace` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct StrReplaceArgs {
    /// Why, in a few words.
    pub description: String,
    /// Absolute file path.
    pub path: String,
    /// Exact text to replace; must occur once unless replace_all.
    pub old_str: String,
    /// Replacement text.
    pub new_str: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// `glob` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct GlobArgs {
    /// Why, in a few words.
    pub description: String,
    /// Glob relative to path, e.g. `**/*.py`.
    pub pattern: String,
    /// Absolute directory to search.
    pub path: String,
    /// Also match directories.
    #[serde(default)]
    pub include_dirs: bool,
    /// Default 200, at most 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<usize>,
}

/// `grep` arguments.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct GrepArgs {
    /// Why, in a few words.
    pub description: String,
    /// Regex (or text with literal).
    pub pattern: String,
    /// Absolute file or directory to search.
    pub path: String,
    /// Only files matching this glob, e.g. `*.rs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// Treat pattern as plain text.
    #[serde(default)]
    pub literal: bool,
    /// Match case exactly.
    #[serde(default)]
    pub case_sensitive: bool,
    /// Default 100, at most 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<usize>,
}
