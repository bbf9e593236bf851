//! Contexts shared by the prompt tests.

use std::path::Path;

use herd_sandbox::SkillFile;

use super::context::{PromptContext, SubagentPrompt};
use crate::skills::{Skill, SkillCatalog};

/// The built-in skills from `skills/public/`, as the sandbox would list them.
pub(crate) fn builtin_skills() -> Vec<Skill> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../skills/public");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root).unwrap() {
        let entry = entry.unwrap();
        let dir_name = entry.file_name().into_string().unwrap();
        files.push(SkillFile {
            category: "public".into(),
            path: format!("/mnt/skills/public/{dir_name}/SKILL.md"),
            content: std::fs::read_to_string(entry.path().join("SKILL.md")).unwrap(),
            dir_name,
        });
    }
    let catalog = SkillCatalog::build(&files, None);
    assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
    catalog.skills
}

/// An agent with no manifest beyond its name: all built-in skills and tools, no subagents.
pub(crate) fn default_agent() -> PromptContext {
    PromptContext {
        agent_name: "herd".into(),
        soul: None,
        skills: builtin_skills(),
        subagents: None,
        plan_mode: false,
        thinking: false,
        has_bash: true,
        has_web: true,
        clarification_enabled: true,
        tools: lead_tools(),
        deferred_tools: Vec::new(),
        context_window: None,
        reserved_tokens: 0,
    }
}

/// A subagent's tools with every tool group on.
pub(crate) fn subagent_tools() -> Vec<String> {
    [
        "bash",
        "ls",
        "read_file",
        "write_file",
        "str_replace",
        "glob",
        "grep",
        "web_fetch",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The lead's tools with every tool group on: a subagent's, then the lead's own.
pub(crate) fn lead_tools() -> Vec<String> {
    [
        subagent_tools(),
        vec!["ask_clarification".into(), "present_files".into()],
    ]
    .concat()
}

/// Everything switched on.
pub(crate) fn full_agent() -> PromptContext {
    PromptContext {
        agent_name: "market-analyst".into(),
        soul: Some(
            "You are a careful market analyst. Prefer primary sources, state uncertainty,\n\
             and write for busy executives: numbers first, no hype."
                .into(),
        ),
        subagents: Some(SubagentPrompt::builtin(3, 6, true)),
        plan_mode: true,
        thinking: true,
        tools: [lead_tools(), vec!["task".into(), "write_todos".into()]].concat(),
        ..default_agent()
    }
}

/// The cl100k token count: what the budget tests hold the prompts to.
pub(crate) fn cl100k_tokens(text: &str) -> usize {
    tiktoken_rs::cl100k_base_singleton()
        .encode_with_special_tokens(text)
        .len()
}
