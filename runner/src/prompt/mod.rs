//! System prompts: minijinja templates under `runner/templates/`, compiled into the binary.
//!
//! The lead agent's prompt follows DeerFlow's section order, is rendered once per run and is
//! byte-identical for the same inputs (no maps with random order, no timestamps), so
//! provider prefix caches hit on every call. Every interpolated value is escaped, so text
//! from users and manifests (SOUL, skill descriptions, names) cannot close our tags.

pub(crate) mod budget;
pub(crate) mod context;
pub(crate) mod error;
#[cfg(test)]
mod fixtures;
pub(crate) mod subagent;
pub(crate) mod system;
mod templates;
pub(crate) mod tokenizer;

pub use budget::estimate_tokens;
pub use context::{PromptContext, SubagentPrompt, SubagentPromptContext};
pub use error::PromptError;
pub use subagent::render_subagent_prompt;
pub use system::{render_system_prompt, render_todo_system};
