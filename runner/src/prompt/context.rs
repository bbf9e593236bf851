//! What a system prompt is rendered from.

use crate::skills::Skill;

/// Everything the lead agent's system prompt depends on. Nothing here changes during a run
/// (no date, no memory: those arrive as a hidden reminder message), so the prompt is
/// byte-identical on every model call and provider prefix caches hit.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptContext {
    /// The Agent's name, shown in the role line.
    pub agent_name: String,
    /// SOUL.md text: the agent's personality and standing instructions.
    pub soul: Option<String>,
    /// The run's skills, after the Agent's tri-state filter.
    pub skills: Vec<Skill>,
    /// Present when the `task` tool is available.
    pub subagents: Option<SubagentPrompt>,
    /// Appends the `<todo_list_system>` block (the Todo middleware then only handles the
    /// `write_todos` tool and state).
    pub plan_mode: bool,
    /// The model thinks before answering (extended thinking / reasoning).
    pub thinking: bool,
    pub has_bash: bool,
    /// `web_search` / `web_fetch` are available: adds citation rules.
    pub has_web: bool,
    /// `ask_clarification` is available; without it the agent is told to assume and say so.
    pub clarification_enabled: bool,
    /// Names of the agent's tools: the prompt mentions no other tool.
    pub tools: Vec<String>,
    /// Names of tools whose schemas are loaded on demand (`tool_search`): deferred MCP tools.
    pub deferred_tools: Vec<String>,
    /// The model's context window in tokens: optional sections shrink until the prompt,
    /// with `reserved_tokens`, fits half of it (`budget::ContextBudget`).
    pub context_window: Option<u32>,
    /// Tokens of that half taken by what every request sends beside the system prompt: the
    /// tool schemas and the injected memory (counted with `tokenizer::count_tokens`).
    pub reserved_tokens: usize,
}

/// The subagent section: caps and the types the `task` tool accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubagentPrompt {
    /// `task` calls allowed in one model response.
    pub max_concurrent: u32,
    /// `task` calls allowed in the whole run.
    pub max_total: u32,
    /// `(subagent_type, description)`, in the order shown.
    pub types: Vec<(String, String)>,
}

impl SubagentPrompt {
    /// The built-in types: `general-purpose`, and `bash` when the agent has bash.
    pub fn builtin(max_concurrent: u32, max_total: u32, has_bash: bool) -> Self {
        let mut types = vec![(
            "general-purpose".to_owned(),
            "any non-trivial sub-task: research, code exploration, file work, analysis".to_owned(),
        )];
        if has_bash {
            types.push((
                "bash".to_owned(),
                "command execution: builds, tests, git, data processing".to_owned(),
            ));
        }
        Self {
            max_concurrent,
            max_total,
            types,
        }
    }
}

/// What a subagent's system prompt is rendered from.
#[derive(Clone, Debug, PartialEq)]
pub struct SubagentPromptContext {
    /// The subagent's skills: the parent's, narrowed by the subagent's own list.
    pub skills: Vec<Skill>,
    /// Present when the subagent keeps `task` (it runs below the Agent's `maxDepth`).
    pub delegation: Option<SubagentPrompt>,
    pub has_bash: bool,
    pub has_web: bool,
    /// Names of the subagent's tools: the prompt mentions no other tool.
    pub tools: Vec<String>,
    /// Names of its deferred tools (`tool_search`).
    pub deferred_tools: Vec<String>,
    pub context_window: Option<u32>,
    /// Tokens of the prompt half taken by the tool schemas.
    pub reserved_tokens: usize,
}
