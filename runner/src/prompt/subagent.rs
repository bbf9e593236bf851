//! System prompts of the built-in subagent types.

use super::budget::{Detail, render_fitting, system_prompt_limit};
use super::context::SubagentPromptContext;
use super::error::PromptError;
use super::templates::{View, render_sections, skill_views, subagents_view};

/// Renders the system prompt of a `general-purpose` or `bash` subagent: its guidelines,
/// tool restrictions (no `ask_clarification` or `present_files`; no `task` unless it may
/// delegate), skills, working directory and the output format the lead agent expects.
pub fn render_subagent_prompt(
    kind: &str,
    ctx: &SubagentPromptContext,
) -> Result<String, PromptError> {
    let role = match kind {
        "general-purpose" => "subagent/general-purpose.j2",
        "bash" => "subagent/bash.j2",
        other => return Err(PromptError::UnknownSubagentKind(other.to_owned())),
    };
    let limit = system_prompt_limit(ctx.context_window, ctx.reserved_tokens);
    render_fitting(limit, |detail| render_at(kind, role, ctx, detail))
}

fn render_at(
    kind: &str,
    role: &str,
    ctx: &SubagentPromptContext,
    detail: Detail,
) -> Result<String, PromptError> {
    let view = View {
        agent_name: kind,
        soul: None,
        skills: skill_views(&ctx.skills, detail),
        deferred_tools: &ctx.deferred_tools,
        subagents: subagents_view(ctx.delegation.as_ref()),
        thinking: false,
        has_bash: ctx.has_bash || kind == "bash",
        has_web: ctx.has_web,
        clarification: false,
        subagent: true,
        kind,
        delegation: ctx.delegation.is_some(),
        tools: &ctx.tools,
        detail,
    };
    let sections = [
        role,
        "sections/subagents.j2",
        "sections/skills.j2",
        "sections/deferred_tools.j2",
        "sections/working_directory.j2",
        "subagent/output_format.j2",
    ];
    let mut prompt = render_sections(&sections, &view)?;
    prompt.push('\n');
    Ok(prompt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::context::SubagentPrompt;
    use crate::prompt::fixtures::{builtin_skills, cl100k_tokens, subagent_tools};

    fn tools(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    fn context() -> SubagentPromptContext {
        SubagentPromptContext {
            deferred_tools: Vec::new(),
            skills: builtin_skills(),
            delegation: None,
            has_bash: true,
            has_web: true,
            tools: subagent_tools(),
            context_window: None,
            reserved_tokens: 0,
        }
    }

    #[test]
    fn general_purpose_golden() {
        insta::assert_snapshot!(
            "general_purpose",
            render_subagent_prompt("general-purpose", &context()).unwrap()
        );
    }

    #[test]
    fn bash_golden() {
        let ctx = SubagentPromptContext {
            skills: Vec::new(),
            has_web: false,
            tools: tools(&["bash", "ls", "read_file", "write_file", "str_replace"]),
            ..context()
        };
        insta::assert_snapshot!("bash", render_subagent_prompt("bash", &ctx).unwrap());
    }

    /// The subagent types this module has prompts for.
    const SUBAGENT_KINDS: [&str; 2] = ["general-purpose", "bash"];

    #[test]
    fn restrictions_list_only_the_subagents_own_tools() {
        for kind in SUBAGENT_KINDS {
            let prompt = render_subagent_prompt(kind, &context()).unwrap();
            assert!(
                prompt.contains("Your tools: `bash`, `ls`, `read_file`"),
                "{kind}"
            );
            assert!(prompt.contains("You cannot ask questions or present files, nor delegate"));
            for absent in ["ask_clarification", "present_files", "`task`"] {
                assert!(!prompt.contains(absent), "{kind} names {absent}");
            }
            assert!(!prompt.contains("<subagent_system>"));
            assert!(!prompt.contains("<clarification_system>"));
            assert!(prompt.contains("<output_format>"));
            assert!(prompt.contains("/mnt/user-data/workspace"));
            assert!(cl100k_tokens(&prompt) <= 1_200, "{kind}");
        }
    }

    #[test]
    fn a_subagent_below_max_depth_may_delegate() {
        let ctx = SubagentPromptContext {
            delegation: Some(SubagentPrompt::builtin(2, 4, true)),
            ..context()
        };
        let prompt = render_subagent_prompt("general-purpose", &ctx).unwrap();
        assert!(!prompt.contains("nor delegate"));
        assert!(prompt.contains("<subagent_system>"));
        assert!(prompt.contains("at most 2 `task` calls per response"));
    }

    #[test]
    fn output_format_follows_kind_and_tools() {
        let general = render_subagent_prompt("general-purpose", &context()).unwrap();
        assert!(general.contains("[citation:Title](URL)"));
        let offline = SubagentPromptContext {
            has_web: false,
            ..context()
        };
        let general = render_subagent_prompt("general-purpose", &offline).unwrap();
        assert!(!general.contains("citation"));
        let bash = render_subagent_prompt("bash", &context()).unwrap();
        assert!(bash.contains("exit status"));
    }

    #[test]
    fn small_window_shrinks() {
        let ctx = SubagentPromptContext {
            context_window: Some(2048),
            reserved_tokens: 400,
            ..context()
        };
        let prompt = render_subagent_prompt("general-purpose", &ctx).unwrap();
        let tokens = crate::prompt::tokenizer::count_tokens(&prompt);
        assert!(tokens <= 1024 - 400, "{tokens}");
        assert!(
            prompt.len()
                < render_subagent_prompt("general-purpose", &context())
                    .unwrap()
                    .len()
        );
    }

    #[test]
    fn unknown_kind_is_an_error() {
        assert_eq!(
            render_subagent_prompt("planner", &context()),
            Err(PromptError::UnknownSubagentKind("planner".into()))
        );
    }
}
