//! SkillToolPolicy: a skill's `allowed-tools` holds while the skill is active. A skill is
//! active once the user slash-activated it in this run or the thread loaded its SKILL.md
//! (`skill_context`, or a `read_file` stamped `skill_read`). While any active skill declares
//! `allowed-tools`, the model is offered, and may run, only the union of those lists plus a
//! few framework tools. Skills without the field add nothing; if none declares it, nothing is
//! restricted. A slash activation dominates passive loads for the rest of the run: reading a
//! second skill cannot widen what the activated one allows.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;

use super::shared::active_skills::{ActiveSkills, loaded_skill_paths};
use crate::agent::{Middleware, ToolNext, ToolRequest};
use crate::model::ModelRequest;
use crate::skills::Skill;
use crate::thread::ThreadState;
use crate::tools::ToolOutput;

/// Framework tools that stay available under any skill policy: DeerFlow's set (they read and
/// discover; the ones Herd does not have are harmless here), plus the tools that talk to the
/// user or the plan rather than act on the world — a skill narrowing the work tools must not
/// stop the agent from asking a question, keeping its todo list or presenting its result.
pub const ALWAYS_ALLOWED: [&str; 7] = [
    "describe_skill",
    "read_file",
    "review_skill_package",
    "tool_search",
    "ask_clarification",
    "write_todos",
    "present_files",
];

/// Limits tools to what the active skills allow.
pub struct SkillToolPolicy {
    skills: Vec<Skill>,
    active: Arc<ActiveSkills>,
}

impl std::fmt::Debug for SkillToolPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillToolPolicy")
            .field("skills", &self.skills.len())
            .finish_non_exhaustive()
    }
}

impl SkillToolPolicy {
    /// `skills` is the run's catalog; `active` is shared with SkillActivation.
    pub fn new(skills: Vec<Skill>, active: Arc<ActiveSkills>) -> Self {
        SkillToolPolicy { skills, active }
    }

    /// The tools allowed now; `None` when nothing is restricted.
    ///
    /// Loaded skills are matched by their SKILL.md path (not by name, so a file that merely
    /// carries a skill's name cannot borrow its authority). A path outside the catalog adds
    /// nothing: the catalog is fixed for the run, so such a file is not one of the agent's
    /// skills. (DeerFlow closes everything when no reference resolves, because there it may
    /// mean the skill store failed to load; here it cannot.)
    pub fn allowed_tools(&self, state: &ThreadState) -> Option<BTreeSet<String>> {
        let slash = self.active.slash_activated();
        let active: Vec<&Skill> = if slash.is_empty() {
            let loaded = loaded_skill_paths(state);
            self.skills
                .iter()
                .filter(|skill| loaded.contains(&skill.path))
                .collect()
        } else {
            slash.iter().collect()
        };
        let mut allowed: Option<BTreeSet<String>> = None;
        for skill in active {
            if let Some(tools) = &skill.allowed_tools {
                allowed
                    .get_or_insert_with(BTreeSet::new)
                    .extend(tools.iter().cloned());
            }
        }
        if let Some(allowed) = &mut allowed {
            allowed.extend(ALWAYS_ALLOWED.iter().map(|name| (*name).to_owned()));
        }
        allowed
    }
}

/// The result of a call the policy refuses.
pub fn refusal(tool: &str) -> ToolOutput {
    ToolOutput::error(format!(
        "Error: Tool '{tool}' is not allowed by the active skill policy."
    ))
}

#[async_trait]
impl Middleware for SkillToolPolicy {
    fn name(&self) -> &'static str {
        "SkillToolPolicy"
    }

    fn rewrite_request(&self, state: &ThreadState, request: &mut ModelRequest) {
        if let Some(allowed) = self.allowed_tools(state) {
            request.tools = request
                .tools
                .iter()
                .filter(|tool| allowed.contains(&tool.name))
                .cloned()
                .collect();
        }
    }

    async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
        if let Some(allowed) = self.allowed_tools(request.state)
            && !allowed.contains(&request.call.name)
        {
            tracing::info!(tool = %request.call.name, "tool call blocked by the active skill policy");
            return refusal(&request.call.name);
        }
        next.run(request).await
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use herd_sandbox::SandboxResponse;
    use herd_sandbox::testing::FakeExecutor;
    use serde_json::json;

    use super::*;
    use crate::middleware::shared::active_skills::SKILL_READ_KEY;
    use crate::middleware::shared::test_doubles::{FixedTool, call, run_call};
    use crate::middleware::skill_activation::SkillActivation;
    use crate::skills::SkillCategory;
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::state::SkillContext;
    use crate::thread::{Message, ToolCall, ToolStatus};
    use crate::tools::Tool;

    fn skill(name: &str, allowed: Option<&[&str]>) -> Skill {
        Skill {
            name: name.into(),
            description: "d".into(),
            path: format!("/mnt/skills/public/{name}/SKILL.md"),
            category: SkillCategory::Public,
            allowed_tools: allowed.map(|tools| tools.iter().map(|t| (*t).to_owned()).collect()),
            required_secrets: vec![],
        }
    }

    fn catalog() -> Vec<Skill> {
        vec![
            skill("scripts", Some(&["bash"])),
            skill("search", Some(&["web_search", "web_fetch"])),
            skill("free", None),
        ]
    }

    fn names(set: Option<BTreeSet<String>>) -> Option<Vec<String>> {
        set.map(|s| s.into_iter().collect())
    }

    fn loaded(state: &mut ThreadState, name: &str) {
        let mut message = Message::tool(
            &ToolCall {
                id: format!("read-{name}"),
                name: "read_file".into(),
                arguments: String::new(),
            },
            ToolStatus::Success,
            "---",
        );
        if let Message::Tool(tool) = &mut message {
            tool.meta.extra.insert(
                SKILL_READ_KEY.into(),
                json!({"name": name, "path": format!("/mnt/skills/public/{name}/SKILL.md")}),
            );
        }
        state.messages.push(message);
    }

    #[test]
    fn nothing_is_restricted_without_an_active_declaring_skill() {
        let policy = SkillToolPolicy::new(catalog(), Arc::new(ActiveSkills::new()));
        let mut state = ThreadState::new("t");
        assert_eq!(policy.allowed_tools(&state), None);
        loaded(&mut state, "free");
        assert_eq!(
            policy.allowed_tools(&state),
            None,
            "no allowed-tools: adds nothing"
        );
        loaded(&mut state, "unknown-skill");
        assert_eq!(
            policy.allowed_tools(&state),
            None,
            "outside the catalog: adds nothing"
        );
    }

    #[test]
    fn loaded_skills_restrict_to_the_union_of_their_lists() {
        let policy = SkillToolPolicy::new(catalog(), Arc::new(ActiveSkills::new()));
        let mut state = ThreadState::new("t");
        loaded(&mut state, "scripts");
        loaded(&mut state, "free");
        assert_eq!(
            names(policy.allowed_tools(&state)),
            Some(vec![
                "ask_clarification".into(),
                "bash".into(),
                "describe_skill".into(),
                "present_files".into(),
                "read_file".into(),
                "review_skill_package".into(),
                "tool_search".into(),
                "write_todos".into()
            ])
        );
        state.record_skill(SkillContext {
            name: "search".into(),
            path: "/mnt/skills/public/search/SKILL.md".into(),
            description: String::new(),
            slash_activated: false,
        });
        let allowed = policy.allowed_tools(&state).unwrap();
        assert!(allowed.contains("bash") && allowed.contains("web_fetch"));
    }

    #[test]
    fn a_slash_activation_dominates_passive_loads() {
        let active = Arc::new(ActiveSkills::new());
        let policy = SkillToolPolicy::new(catalog(), active.clone());
        let mut state = ThreadState::new("t");
        loaded(&mut state, "search");
        active.activate(skill("scripts", Some(&["bash"])));
        let allowed = policy.allowed_tools(&state).unwrap();
        assert!(allowed.contains("bash"));
        assert!(!allowed.contains("web_search"));
    }

    #[tokio::test]
    async fn blocked_calls_never_run() {
        let mut state = ThreadState::new("t");
        loaded(&mut state, "scripts");
        let tool = Arc::new(FixedTool::ok("write_file", "written"));
        let executor = Arc::new(FakeExecutor::answering(SandboxResponse::Done {
            path: None,
        }));
        let output = run_call(
            Arc::new(SkillToolPolicy::new(
                catalog(),
                Arc::new(ActiveSkills::new()),
            )),
            vec![tool.clone()],
            call("c", "write_file", json!({})),
            &state,
            executor.clone(),
        )
        .await;
        assert_eq!(output.status, ToolStatus::Error);
        assert_eq!(
            output.content,
            "Error: Tool 'write_file' is not allowed by the active skill policy."
        );
        assert_eq!(tool.calls(), 0);
        let read = Arc::new(FixedTool::ok("read_file", "content"));
        let output = run_call(
            Arc::new(SkillToolPolicy::new(
                catalog(),
                Arc::new(ActiveSkills::new()),
            )),
            vec![read],
            call("c", "read_file", json!({})),
            &state,
            executor,
        )
        .await;
        assert_eq!(output.content, "content");
    }

    #[tokio::test]
    async fn a_slash_activated_skill_limits_schemas_and_calls_for_the_run() {
        let active = Arc::new(ActiveSkills::new());
        let executor = Arc::new(FakeExecutor::new(|_| {
            Ok(SandboxResponse::File {
                data_base64: base64::engine::general_purpose::STANDARD.encode("Run scripts."),
                size: 12,
            })
        }));
        let chain: Vec<Arc<dyn Middleware>> = vec![
            Arc::new(SkillActivation::new(catalog(), executor, active.clone())),
            Arc::new(SkillToolPolicy::new(catalog(), active)),
        ];
        let tools: Vec<Arc<dyn Tool>> = ["bash", "web_search", "read_file"]
            .into_iter()
            .map(|name| Arc::new(FixedTool::ok(name, "ran")) as Arc<dyn Tool>)
            .collect();
        let model = QueuedModel::new(vec![
            calls(&[("web_search", json!({})), ("bash", json!({}))]),
            text("done"),
        ]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            tools,
            chain,
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("/scripts run the build");
        agent.run(&mut state, &env).await.unwrap();
        for request in model.requests() {
            let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(offered, vec!["bash", "read_file"]);
        }
        let results: Vec<(String, String)> = state
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(t) => Some((t.name.clone(), t.content.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            results,
            vec![
                (
                    "web_search".to_string(),
                    "Error: Tool 'web_search' is not allowed by the active skill policy."
                        .to_string()
                ),
                ("bash".into(), "ran".into()),
            ]
        );
    }
}
