//! Which skills are active: slash-activated in this run (shared between SkillActivation, which
//! activates, and SkillToolPolicy, which enforces), or loaded by reading their SKILL.md (found
//! in the thread, so it holds across runs like DeerFlow's `skill_context`).

use std::sync::Mutex;

use herd_sandbox::{SKILLS_CUSTOM, SKILLS_PUBLIC};

use crate::skills::Skill;
use crate::thread::{Message, ThreadState, ToolStatus};

use crate::middleware::read_before_write::normalize_virtual_path;

/// Meta key on a successful `read_file` of a SKILL.md: `{"name": …, "path": …}`.
pub const SKILL_READ_KEY: &str = "skill_read";
/// The file that defines a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// A SKILL.md the model referred to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillFileRef {
    /// The skill's folder name (a skill's name equals its folder).
    pub name: String,
    /// The normalized virtual path of the SKILL.md.
    pub path: String,
}

/// The skill whose SKILL.md `path` is, if it is one: `/mnt/skills/{public,custom}/<name>/SKILL.md`.
pub fn skill_file_ref(path: &str) -> Option<SkillFileRef> {
    let path = normalize_virtual_path(path);
    let rest = [SKILLS_PUBLIC, SKILLS_CUSTOM]
        .iter()
        .find_map(|root| path.strip_prefix(root)?.strip_prefix('/'))?;
    let name = rest.strip_suffix(SKILL_FILE)?.strip_suffix('/')?;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some(SkillFileRef {
        name: name.to_owned(),
        path: path.clone(),
    })
}

/// Paths of the SKILL.md files the thread has loaded: recorded in `skill_context`, or read
/// successfully with `read_file` (results stamped with [`SKILL_READ_KEY`]).
pub fn loaded_skill_paths(state: &ThreadState) -> Vec<String> {
    let mut paths: Vec<String> = state
        .skill_context
        .iter()
        .map(|skill| normalize_virtual_path(&skill.path))
        .collect();
    for message in &state.messages {
        let Message::Tool(tool) = message else {
            continue;
        };
        if tool.status != ToolStatus::Success {
            continue;
        }
        let path = tool
            .meta
            .extra
            .get(SKILL_READ_KEY)
            .and_then(|read| read.get("path"))
            .and_then(|path| path.as_str());
        if let Some(path) = path {
            let path = normalize_virtual_path(path);
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
    }
    paths
}

/// The skills slash-activated in this run. A chain is built per run, so is this.
#[derive(Debug, Default)]
pub struct ActiveSkills {
    slash: Mutex<Vec<Skill>>,
}

impl ActiveSkills {
    /// No skill active yet.
    pub fn new() -> Self {
        ActiveSkills::default()
    }

    /// Marks `skill` as slash-activated for the rest of the run.
    pub fn activate(&self, skill: Skill) {
        let mut slash = self.slash.lock().unwrap_or_else(|p| p.into_inner());
        if !slash.iter().any(|s| s.name == skill.name) {
            slash.push(skill);
        }
    }

    /// The slash-activated skills, in activation order.
    pub fn slash_activated(&self) -> Vec<Skill> {
        self.slash.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::SkillCategory;
    use crate::thread::state::SkillContext;
    use crate::thread::{ToolCall, ToolStatus};

    #[test]
    fn skill_files_are_recognized() {
        assert_eq!(
            skill_file_ref("/mnt/skills/public/deep-research/SKILL.md"),
            Some(SkillFileRef {
                name: "deep-research".into(),
                path: "/mnt/skills/public/deep-research/SKILL.md".into()
            })
        );
        assert_eq!(
            skill_file_ref("/mnt/skills/custom/./x//SKILL.md").map(|r| r.name),
            Some("x".into())
        );
        assert_eq!(skill_file_ref("/mnt/skills/public/x/notes/SKILL.md"), None);
        assert_eq!(skill_file_ref("/mnt/skills/public/x/README.md"), None);
        assert_eq!(skill_file_ref("/mnt/skills/public/SKILL.md"), None);
        assert_eq!(skill_file_ref("/mnt/user-data/workspace/x/SKILL.md"), None);
    }

    #[test]
    fn loaded_skills_come_from_skill_context_and_stamped_reads() {
        let mut state = ThreadState::new("t");
        state.record_skill(SkillContext {
            name: "a".into(),
            path: "/mnt/skills/public/a/SKILL.md".into(),
            description: String::new(),
            slash_activated: false,
        });
        let call = ToolCall {
            id: "c".into(),
            name: "read_file".into(),
            arguments: String::new(),
        };
        for status in [ToolStatus::Success, ToolStatus::Error] {
            let mut message = Message::tool(&call, status, "x");
            if let Message::Tool(tool) = &mut message {
                let name = if status == ToolStatus::Success {
                    "b"
                } else {
                    "c"
                };
                tool.meta.extra.insert(
                    SKILL_READ_KEY.into(),
                    serde_json::json!({"name": name, "path": format!("/mnt/skills/custom/{name}/SKILL.md")}),
                );
            }
            state.messages.push(message);
        }
        assert_eq!(
            loaded_skill_paths(&state),
            vec![
                "/mnt/skills/public/a/SKILL.md",
                "/mnt/skills/custom/b/SKILL.md"
            ]
        );
    }

    #[test]
    fn activation_is_idempotent() {
        let skill = Skill {
            name: "s".into(),
            description: "d".into(),
            path: "/mnt/skills/public/s/SKILL.md".into(),
            category: SkillCategory::Public,
            allowed_tools: None,
            required_secrets: vec![],
        };
        let active = ActiveSkills::new();
        active.activate(skill.clone());
        active.activate(skill);
        assert_eq!(active.slash_activated().len(), 1);
    }
}
