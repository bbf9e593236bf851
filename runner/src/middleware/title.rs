//! Title (DeerFlow's `TitleMiddleware`, after_model, lead agent only): names the thread after
//! its first exchange, shown in `kubectl get runs` and progress reports.
//!
//! With a title model: one short call (purpose Title), capped at `TITLE_MAX_TOKENS` and
//! `TITLE_TIMEOUT` (`shared::side_call`). Without one (DeerFlow's default,
//! `model_name: null`): the user's text, cut. A failed, timed-out or empty title call falls
//! back to the same (with a warning when it failed), so a thread always gets a title once it
//! has an answer.

use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::report::Usage;
use herd_sandbox::truncation::{take_chars, truncate_chars};

use super::shared::side_call::SideCall;
use crate::agent::{Flow, Middleware, NoObserver, SideCallKind};
use crate::model::{CallContext, ChatModel, Purpose, record_call};
use crate::thread::{Message, MessageKind, ThreadState};

/// Most words asked of the title model (DeerFlow's `max_words`).
pub const MAX_WORDS: usize = 6;
/// Longest title kept (DeerFlow's `max_chars`).
pub const MAX_CHARS: usize = 60;
/// The user text is cut past this many characters when no model writes the title.
pub const FALLBACK_CHARS: usize = 50;
/// How much of the user's and the assistant's text the title model sees.
pub const INPUT_CHARS: usize = 500;
/// The title of a thread whose first message is empty.
pub const EMPTY_TITLE: &str = "New Conversation";

/// Names the thread once.
pub struct Title {
    model: Option<Arc<dyn ChatModel>>,
    attempt: u32,
    call: SideCall,
}

impl Title {
    /// `model` writes titles when configured; otherwise the user's text is used. `attempt`
    /// is the Run's attempt, passed on to the call. Nobody hears of the call: see
    /// [`Title::with_call`].
    pub fn new(model: Option<Arc<dyn ChatModel>>, attempt: u32) -> Self {
        Title {
            model,
            attempt,
            call: SideCall::new(SideCallKind::Title, "lead", Arc::new(NoObserver)),
        }
    }

    /// This middleware making its title call as `call` (its observer, cap and timeout).
    pub fn with_call(mut self, call: SideCall) -> Self {
        self.call = call;
        self
    }

    async fn generate(
        &self,
        model: &dyn ChatModel,
        user: &str,
        answer: &str,
    ) -> Option<(String, Option<Usage>)> {
        let prompt = format!(
            "Generate a concise title (max {MAX_WORDS} words) for this conversation.\n\
             User: {}\nAssistant: {}\n\nReturn ONLY the title, no quotes, no explanation.",
            truncate_chars(user, INPUT_CHARS),
            truncate_chars(answer, INPUT_CHARS)
        );
        let context = CallContext {
            purpose: Purpose::Title,
            attempt: self.attempt,
            ..CallContext::default()
        };
        match self
            .call
            .send(model, "", MessageKind::TitleRequest, prompt, context)
            .await
        {
            Ok(answer) => {
                let title = clean_title(&answer.content);
                (!title.is_empty()).then_some((title, answer.usage))
            }
            Err(error) => {
                self.call.warn(format!(
                    "the title call failed ({}); the title is the user's text",
                    error.message
                ));
                None
            }
        }
    }
}

#[async_trait]
impl Middleware for Title {
    fn name(&self) -> &'static str {
        "Title"
    }

    async fn after_model(&self, state: &mut ThreadState) -> Flow {
        if state.title.as_deref().is_some_and(|t| !t.trim().is_empty()) {
            return Flow::Continue;
        }
        let mut users = state.messages.iter().filter_map(|message| match message {
            Message::User(user) if !user.meta.hidden => Some(user.content.as_str()),
            _ => None,
        });
        let (Some(user), None) = (users.next(), users.next()) else {
            return Flow::Continue;
        };
        let Some(answer) = state.messages.iter().find_map(Message::as_assistant) else {
            return Flow::Continue;
        };
        let generated = match &self.model {
            Some(model) => self.generate(model.as_ref(), user, &answer.content).await,
            None => None,
        };
        let title = match generated {
            Some((title, usage)) => {
                if let (Some(usage), Some(model)) = (usage, &self.model) {
                    record_call(&mut state.usage, model.as_ref(), &usage);
                }
                title
            }
            None => fallback_title(user),
        };
        state.title = Some(title);
        Flow::Continue
    }
}

/// The model's answer as a title: no `<think>` block, first line, no quotes or trailing
/// period, at most `MAX_CHARS`.
fn clean_title(answer: &str) -> String {
    let answer = match answer.rfind("</think>") {
        Some(end) => &answer[end + "</think>".len()..],
        // Thinking cut off by the small output cap: no title in it.
        None if answer.trim_start().starts_with("<think>") => "",
        None => answer,
    };
    let line = answer
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    let line = line
        .trim_start_matches(['#', '*', ' '])
        .trim_start_matches("Title:")
        .trim()
        .trim_matches(['"', '\'', '`', '*', '“', '”'])
        .trim_end_matches('.')
        .trim();
    line.chars()
        .take(MAX_CHARS)
        .collect::<String>()
        .trim_end()
        .to_owned()
}

/// The user's text on one line, cut to `FALLBACK_CHARS` plus `...`.
fn fallback_title(user: &str) -> String {
    let text = user.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        return EMPTY_TITLE.to_owned();
    }
    if text.chars().count() <= FALLBACK_CHARS {
        return text;
    }
    format!("{}…", take_chars(&text, FALLBACK_CHARS).trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_doubles::{QueuedModel, calls, text};

    fn first_exchange(user: &str) -> ThreadState {
        let mut state = ThreadState::new(user);
        state.messages.insert(
            0,
            Message::hidden_user("m", MessageKind::Memory, "<memory/>"),
        );
        state
            .messages
            .push(Message::Assistant(calls(&[("ls", serde_json::json!({}))])));
        state
    }

    #[tokio::test]
    async fn the_title_model_names_the_thread_once() {
        let model = QueuedModel::new(vec![text(
            "<think>hmm</think>\n\"Quarterly Sales Report.\"\n",
        )]);
        let title = Title::new(Some(model.clone()), 1);
        let mut state = first_exchange(&format!("Make a sales report {}", "x".repeat(1000)));
        title.after_model(&mut state).await;
        assert_eq!(state.title.as_deref(), Some("Quarterly Sales Report"));
        let request = &model.requests()[0];
        assert_eq!(request.context.purpose, Purpose::Title);
        let prompt = request.messages[0].text();
        assert!(prompt.starts_with("Generate a concise title (max 6 words)"));
        assert!(
            prompt.chars().count() < 2 * INPUT_CHARS + 300,
            "inputs are truncated"
        );
        assert_eq!(state.usage.input_tokens, 10);

        title.after_model(&mut state).await;
        assert_eq!(model.requests().len(), 1, "titled threads are left alone");
    }

    #[tokio::test]
    async fn without_a_model_the_user_text_is_cut() {
        let title = Title::new(None, 1);
        let mut state = first_exchange(&"word ".repeat(30));
        title.after_model(&mut state).await;
        let expected = format!("{}…", "word ".repeat(10).trim_end());
        assert_eq!(state.title.as_deref(), Some(expected.as_str()));
        assert!(expected.chars().count() <= FALLBACK_CHARS + 3);

        let mut short = first_exchange("Fix the\nbuild");
        title.after_model(&mut short).await;
        assert_eq!(short.title.as_deref(), Some("Fix the build"));

        let mut empty = first_exchange("   ");
        title.after_model(&mut empty).await;
        assert_eq!(empty.title.as_deref(), Some(EMPTY_TITLE));
    }

    #[tokio::test]
    async fn a_failed_title_call_falls_back() {
        let model = Arc::new(QueuedModel::default());
        model
            .answers
            .lock()
            .unwrap()
            .push_back(Err(crate::model::ModelError::new(
                crate::model::ModelErrorKind::Server,
                "down",
            )));
        let observer = Arc::new(crate::test_doubles::RecordingObserver::default());
        let mut state = first_exchange("Plan a trip");
        Title::new(Some(model), 1)
            .with_call(SideCall::new(SideCallKind::Title, "lead", observer.clone()))
            .after_model(&mut state)
            .await;
        assert_eq!(state.title.as_deref(), Some("Plan a trip"));
        assert_eq!(
            observer.warnings(),
            ["the title call failed (down); the title is the user's text"]
        );
    }

    #[tokio::test]
    async fn only_the_first_exchange_is_titled() {
        let title = Title::new(None, 1);
        let mut two_users = first_exchange("first");
        two_users.messages.push(Message::user("u2", "second"));
        title.after_model(&mut two_users).await;
        assert_eq!(two_users.title, None);

        let mut no_answer = ThreadState::new("hi");
        title.after_model(&mut no_answer).await;
        assert_eq!(no_answer.title, None);
    }

    #[test]
    fn titles_are_capped() {
        assert_eq!(clean_title(&"a".repeat(100)).chars().count(), MAX_CHARS);
        assert_eq!(clean_title("Title: **Rust Tips**"), "Rust Tips");
        assert_eq!(clean_title("<think>The user wants"), "", "thinking cut off");
    }
}
