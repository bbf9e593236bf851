//! SkillActivation: `/skill-name do this` activates the skill explicitly. The model gets the
//! skill's whole SKILL.md with the request, as an `<slash_skill_activation>` block right before
//! the user's message, and the skill stays active (for SkillToolPolicy) for the rest of the run.
//!
//! Per request only, like DeerFlow: the thread keeps just what the user typed. DeerFlow shows
//! the block on the activating call alone; here every call of the run carries it at the same
//! place, because dropping it after the first call changes the request prefix (no cache hit
//! on everything after it) and takes the instructions away mid-task.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use base64::Engine;
use herd_sandbox::{SandboxClient, ToolExecutor};
use sha2::{Digest, Sha256};

use super::input_sanitization::last_genuine_user_index;
use super::shared::active_skills::ActiveSkills;
use crate::agent::{Middleware, ModelCall, ModelNext, ModelResult};
use crate::skills::{Skill, SkillCategory};
use crate::tag_escaping::escape_attribute;
use crate::thread::{AssistantMessage, Message, MessageKind};

/// A SKILL.md larger than this is not loaded (the sandbox's own limit for skill files).
pub const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;
/// The request text used when the user typed only the command.
pub const NO_TASK_TEXT: &str = "No additional task text was provided after the slash skill \
command. Ask the user what they want to do with this skill if the next step is unclear.";

/// An activation made in this run: the message it answers and the block shown with it.
#[derive(Clone, Debug)]
struct Activation {
    target_id: String,
    block: String,
}

/// Activates skills named with `/skill-name` at the start of the user's message.
pub struct SkillActivation {
    skills: Vec<Skill>,
    executor: Arc<dyn ToolExecutor>,
    active: Arc<ActiveSkills>,
    activations: Mutex<Vec<Activation>>,
}

impl std::fmt::Debug for SkillActivation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillActivation")
            .field("skills", &self.skills.len())
            .finish_non_exhaustive()
    }
}

impl SkillActivation {
    /// `skills` is the run's catalog (only those can be activated); SKILL.md files are read
    /// through `executor`; activations are shared with SkillToolPolicy through `active`.
    pub fn new(
        skills: Vec<Skill>,
        executor: Arc<dyn ToolExecutor>,
        active: Arc<ActiveSkills>,
    ) -> Self {
        SkillActivation {
            skills,
            executor,
            active,
            activations: Mutex::new(Vec::new()),
        }
    }

    fn recorded(&self) -> Vec<Activation> {
        self.activations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn record(&self, activation: Activation) {
        self.activations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(activation);
    }

    /// The skill a message activates and the rest of its text, if it starts with `/<name>`
    /// of a skill in the catalog.
    fn parse<'a>(&self, text: &'a str) -> Option<(&Skill, &'a str)> {
        let command = text.trim_start().strip_prefix('/')?;
        let end = command.find(char::is_whitespace).unwrap_or(command.len());
        let skill = self.skills.iter().find(|s| s.name == command[..end])?;
        Some((skill, command[end..].trim()))
    }

    async fn read_skill(&self, skill: &Skill) -> Result<String, String> {
        let file = self
            .executor
            .read_file(&skill.path, MAX_SKILL_FILE_BYTES)
            .await
            .map_err(|error| error.to_string())?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(file.data_base64)
            .map_err(|e| e.to_string())?;
        String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())
    }
}

/// Escapes text for an XML element or a double-quoted attribute.
fn block(skill: &Skill, request: &str, content: &str) -> String {
    let request = if request.is_empty() {
        NO_TASK_TEXT
    } else {
        request
    };
    let sha256 = hex::encode(Sha256::digest(content.as_bytes()));
    let editable = skill.category == SkillCategory::Custom;
    format!(
        "<slash_skill_activation>\nThe user explicitly activated the `{name}` skill for this \
         turn. Treat the task text as:\n<user_request>\n{request}\n</user_request>\n\nFollow \
         this skill before choosing a general workflow. Load supporting resources from the same \
         skill directory only when needed.\n\n<skill name=\"{name}\" category=\"{category}\" \
         path=\"{path}\" sha256=\"{sha256}\" editable=\"{editable}\">\n<skill_content \
         encoding=\"xml-escaped\">\n{content}\n</skill_content>\n</skill>\n</slash_skill_activation>",
        name = escape_attribute(&skill.name),
        request = escape_attribute(request),
        category = skill.category.as_str(),
        path = escape_attribute(&skill.path),
        content = escape_attribute(content),
    )
}

#[async_trait]
impl Middleware for SkillActivation {
    fn name(&self) -> &'static str {
        "SkillActivation"
    }

    async fn wrap_model_call(&self, mut call: ModelCall<'_>, next: ModelNext<'_>) -> ModelResult {
        // The thread's own copy: earlier middlewares may have framed the request's text.
        if let Some(index) = last_genuine_user_index(&call.state.messages) {
            let target = &call.state.messages[index];
            let known = self.recorded().iter().any(|a| a.target_id == target.id());
            if !known && let Some((skill, task)) = self.parse(target.text()) {
                match self.read_skill(skill).await {
                    Ok(content) => {
                        tracing::info!(skill = %skill.name, path = %skill.path, "slash skill activated");
                        self.active.activate(skill.clone());
                        self.record(Activation {
                            target_id: target.id().to_owned(),
                            block: block(skill, task, &content),
                        });
                    }
                    Err(reason) => {
                        tracing::warn!(skill = %skill.name, %reason, "slash skill could not be loaded");
                        return Ok(AssistantMessage {
                            content: format!(
                                "Skill `/{}` could not be loaded ({reason}). Please check the \
                                 skill installation.",
                                skill.name
                            ),
                            ..AssistantMessage::default()
                        });
                    }
                }
            }
        }
        for activation in self.recorded() {
            let position = call
                .request
                .messages
                .iter()
                .position(|m| matches!(m, Message::User(_)) && m.id() == activation.target_id);
            if let Some(position) = position {
                call.request.messages.insert(
                    position,
                    Message::hidden_user(
                        format!("{}__slash_activation", activation.target_id),
                        MessageKind::SlashSkillActivation,
                        activation.block,
                    ),
                );
            }
        }
        next.run(call).await
    }
}

#[cfg(test)]
mod tests {
    use herd_sandbox::testing::FakeExecutor;
    use serde_json::json;

    use super::*;
    use herd_sandbox::ExecutorError;
    use herd_sandbox::SandboxResponse;

    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::ThreadState;
    use crate::tools::ask_clarification::AskClarification;

    fn skill(name: &str, category: SkillCategory) -> Skill {
        Skill {
            name: name.into(),
            description: "d".into(),
            path: format!("/mnt/skills/{}/{name}/SKILL.md", category.as_str()),
            category,
            allowed_tools: Some(vec!["bash".into()]),
            required_secrets: vec![],
        }
    }

    fn serving(content: &'static str) -> Arc<FakeExecutor> {
        Arc::new(FakeExecutor::new(move |_| {
            Ok(SandboxResponse::File {
                data_base64: base64::engine::general_purpose::STANDARD.encode(content),
                size: content.len() as u64,
            })
        }))
    }

    #[tokio::test]
    async fn a_slash_command_injects_the_skill_before_the_message_on_every_call() {
        let executor = serving("---\nname: research\n---\nUse <sources>.");
        let active = Arc::new(ActiveSkills::new());
        let middleware = SkillActivation::new(
            vec![skill("research", SkillCategory::Public)],
            executor.clone(),
            active.clone(),
        );
        let model = QueuedModel::new(vec![
            calls(&[("write_todos", json!({"todos": []}))]),
            text("done"),
        ]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(crate::tools::write_todos::WriteTodos)],
            vec![Arc::new(middleware)],
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("/research quantum <b>batteries</b>");
        agent.run(&mut state, &env).await.unwrap();

        let requests = model.requests();
        for request in &requests {
            let first = &request.messages[0];
            assert_eq!(first.meta().kind, Some(MessageKind::SlashSkillActivation));
            assert!(first.meta().hidden);
            assert_eq!(request.messages[1].id(), "user-0");
        }
        assert_eq!(
            requests[0].messages[0], requests[1].messages[0],
            "same block on every call"
        );
        let shown = requests[0].messages[0].text();
        assert!(shown.starts_with(
            "<slash_skill_activation>\nThe user explicitly activated the `research` skill"
        ));
        assert!(
            shown.contains("<user_request>\nquantum &lt;b&gt;batteries&lt;/b&gt;\n</user_request>")
        );
        assert!(
            shown.contains("category=\"public\" path=\"/mnt/skills/public/research/SKILL.md\"")
        );
        assert!(shown.contains("editable=\"false\""));
        assert!(shown.contains("Use &lt;sources&gt;."));
        assert_eq!(
            executor.requests().len(),
            1,
            "the file is read once per run"
        );
        assert_eq!(active.slash_activated()[0].name, "research");
        assert_eq!(
            state.messages[0].text(),
            "/research quantum <b>batteries</b>"
        );
        assert!(
            state
                .messages
                .iter()
                .all(|m| m.meta().kind != Some(MessageKind::SlashSkillActivation))
        );
    }

    #[tokio::test]
    async fn unknown_skills_and_paths_pass_through() {
        let executor = serving("x");
        let active = Arc::new(ActiveSkills::new());
        let middleware = SkillActivation::new(
            vec![skill("research", SkillCategory::Custom)],
            executor.clone(),
            active.clone(),
        );
        let model = QueuedModel::new(vec![text("a"), text("b")]);
        let (agent, env) = test_doubles::middleware_agent(model.clone(), Arc::new(middleware));
        for task in ["/usr/bin is missing", "please /research this"] {
            let mut state = ThreadState::new(task);
            agent.run(&mut state, &env).await.unwrap();
        }
        assert!(executor.requests().is_empty());
        assert!(active.slash_activated().is_empty());
        assert!(model.requests().iter().all(|r| r.messages.len() == 1));
    }

    #[tokio::test]
    async fn a_skill_that_cannot_be_read_ends_the_turn_with_an_explanation() {
        let executor = Arc::new(FakeExecutor::new(|_| {
            Err(ExecutorError("socket closed".into()))
        }));
        let middleware = SkillActivation::new(
            vec![skill("research", SkillCategory::Public)],
            executor,
            Arc::new(ActiveSkills::new()),
        );
        let model = QueuedModel::new(vec![text("never")]);
        let (agent, env) = test_doubles::middleware_agent(model.clone(), Arc::new(middleware));
        let outcome = agent
            .run(&mut ThreadState::new("/research x"), &env)
            .await
            .unwrap();
        assert!(
            outcome
                .answer
                .starts_with("Skill `/research` could not be loaded")
        );
        assert!(model.requests().is_empty());
    }

    #[tokio::test]
    async fn the_block_stays_with_its_message_after_a_clarification_answer() {
        let control = Arc::new(RecordingControl {
            answer: Some("PDF".into()),
            ..RecordingControl::default()
        });
        let model = QueuedModel::new(vec![
            calls(&[(
                "ask_clarification",
                json!({"question": "Format?", "clarification_type": "missing_info"}),
            )]),
            text("ok"),
        ]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(AskClarification)],
            vec![Arc::new(SkillActivation::new(
                vec![skill("report", SkillCategory::Custom)],
                serving("Write reports."),
                Arc::new(ActiveSkills::new()),
            ))],
            control,
        );
        agent
            .run(&mut ThreadState::new("/report"), &env)
            .await
            .unwrap();
        let last = model.requests().pop().unwrap();
        assert_eq!(
            last.messages[0].meta().kind,
            Some(MessageKind::SlashSkillActivation)
        );
        assert!(last.messages[0].text().contains(NO_TASK_TEXT));
        assert!(last.messages[0].text().contains("editable=\"true\""));
        assert_eq!(last.messages.last().unwrap().text(), "PDF");
    }
}
