//! The template environment: every template compiled into the binary, every interpolated
//! value escaped.

use herd_sandbox::truncation::truncate_words;
use minijinja::value::Serde;
use minijinja::{Environment, UndefinedBehavior, syntax::SyntaxConfig};
use serde::Serialize;

use super::budget::Detail;
use super::context::SubagentPrompt;
use super::error::PromptError;
use crate::skills::Skill;
use crate::tag_escaping::escape_tags;

/// `(name, source)` of every template. `include_str!` keeps the binary self-contained.
const TEMPLATES: [(&str, &str); 14] = [
    (
        "sections/role.j2",
        include_str!("../../templates/sections/role.j2"),
    ),
    (
        "sections/soul.j2",
        include_str!("../../templates/sections/soul.j2"),
    ),
    (
        "sections/thinking_style.j2",
        include_str!("../../templates/sections/thinking_style.j2"),
    ),
    (
        "sections/clarification.j2",
        include_str!("../../templates/sections/clarification.j2"),
    ),
    (
        "sections/skills.j2",
        include_str!("../../templates/sections/skills.j2"),
    ),
    (
        "sections/deferred_tools.j2",
        include_str!("../../templates/sections/deferred_tools.j2"),
    ),
    (
        "sections/subagents.j2",
        include_str!("../../templates/sections/subagents.j2"),
    ),
    (
        "sections/working_directory.j2",
        include_str!("../../templates/sections/working_directory.j2"),
    ),
    (
        "sections/response_style.j2",
        include_str!("../../templates/sections/response_style.j2"),
    ),
    (
        "sections/citations.j2",
        include_str!("../../templates/sections/citations.j2"),
    ),
    (
        "sections/critical_reminders.j2",
        include_str!("../../templates/sections/critical_reminders.j2"),
    ),
    (
        "subagent/general-purpose.j2",
        include_str!("../../templates/subagent/general-purpose.j2"),
    ),
    (
        "subagent/bash.j2",
        include_str!("../../templates/subagent/bash.j2"),
    ),
    (
        "subagent/output_format.j2",
        include_str!("../../templates/subagent/output_format.j2"),
    ),
];

/// The plan-mode block: static text, no template syntax.
pub(crate) const TODO_LIST: &str = include_str!("../../templates/todo_list.md");
/// The plan-mode block in one rule, for the leanest detail level.
pub(crate) const TODO_LIST_MINIMAL: &str = include_str!("../../templates/todo_list_minimal.md");

/// What the templates see. One shape for the lead agent and subagents, so a shared section
/// renders the same way for both.
#[derive(Serialize, Debug)]
pub(crate) struct View<'a> {
    pub agent_name: &'a str,
    pub soul: Option<&'a str>,
    pub skills: Vec<SkillView<'a>>,
    pub deferred_tools: &'a [String],
    pub subagents: Option<SubagentsView<'a>>,
    pub thinking: bool,
    pub has_bash: bool,
    pub has_web: bool,
    pub clarification: bool,
    /// Rendering a subagent's prompt; `kind` is its type.
    pub subagent: bool,
    pub kind: &'a str,
    /// A subagent that keeps the `task` tool.
    pub delegation: bool,
    /// The agent's tool names; templates name a tool only when it is here.
    pub tools: &'a [String],
    pub detail: Detail,
}

#[derive(Serialize, Debug)]
pub(crate) struct SkillView<'a> {
    name: &'a str,
    description: String,
    location: &'a str,
}

#[derive(Serialize, Debug)]
pub(crate) struct SubagentsView<'a> {
    max_concurrent: u32,
    max_total: u32,
    types: Vec<TypeView<'a>>,
}

#[derive(Serialize, Debug)]
struct TypeView<'a> {
    name: &'a str,
    description: &'a str,
}

/// Skills as listed at `detail`: descriptions cut or dropped to save tokens.
pub(crate) fn skill_views(skills: &[Skill], detail: Detail) -> Vec<SkillView<'_>> {
    skills
        .iter()
        .map(|skill| SkillView {
            name: &skill.name,
            description: match detail.skill_description_chars {
                None => skill.description.clone(),
                Some(0) => String::new(),
                Some(max) => truncate_words(&skill.description, max),
            },
            location: &skill.path,
        })
        .collect()
}

pub(crate) fn subagents_view(subagents: Option<&SubagentPrompt>) -> Option<SubagentsView<'_>> {
    subagents.map(|s| SubagentsView {
        max_concurrent: s.max_concurrent,
        max_total: s.max_total,
        types: s
            .types
            .iter()
            .map(|(name, description)| TypeView { name, description })
            .collect(),
    })
}

fn environment() -> Result<Environment<'static>, PromptError> {
    let mut env = Environment::new();
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .map_err(|e| PromptError::template("syntax", &e))?;
    env.set_syntax(syntax);
    // A typo in a template must fail the tests, not silently print nothing.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Every `{{ value }}` goes through `escape_tags`, whatever the template says: escaping
    // cannot be forgotten in one place.
    env.set_formatter(|out, _state, value| {
        if value.is_safe() {
            write!(out, "{value}")?;
        } else {
            out.write_str(&escape_tags(&value.to_string()))?;
        }
        Ok(())
    });
    for (name, source) in TEMPLATES {
        env.add_template(name, source)
            .map_err(|e| PromptError::template(name, &e))?;
    }
    Ok(env)
}

/// Renders the named templates with `view` and joins the non-empty ones with a blank line.
pub(crate) fn render_sections(names: &[&str], view: &View<'_>) -> Result<String, PromptError> {
    let env = environment()?;
    let value = minijinja::Value::from(Serde(view));
    let mut sections = Vec::with_capacity(names.len());
    for name in names {
        let rendered = env
            .get_template(name)
            .and_then(|t| t.render(&value))
            .map_err(|e| PromptError::template(name, &e))?;
        let rendered = rendered.trim();
        if !rendered.is_empty() {
            sections.push(rendered.to_owned());
        }
    }
    Ok(sections.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_compiles() {
        let env = environment().unwrap();
        for (name, _) in TEMPLATES {
            env.get_template(name).unwrap();
        }
    }
}
