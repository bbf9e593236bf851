//! Todo (plan mode; DeerFlow's `TodoMiddleware` over LangChain's `TodoListMiddleware`): the
//! agent keeps a plan with `write_todos`, and the framework keeps the agent honest about it.
//!
//! - rewrite_request: the `<todo_list_system>` instructions ride on every request (unless the
//!   system prompt already has them); wrap_model_call delivers a queued completion nudge.
//! - before_model: when the list exists but no `write_todos` call is visible any more (e.g.
//!   summarized away), a hidden `todo_reminder` with the current list is added once.
//! - after_model: a final answer while items are unfinished queues a nudge for the next call
//!   and jumps back to the model, at most twice per run.
//! - wrap_tool_call: only the first `write_todos` of one answer runs; the others get an error
//!   result (parallel updates of one list would race).

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use herd_crds::report::{Todo as TodoItem, TodoStatus};

use super::shared::last_turn::last_assistant;
use super::shared::reminders::PendingReminders;
use crate::agent::{Flow, Middleware, ModelCall, ModelNext, ModelResult, ToolNext, ToolRequest};
use crate::model::ModelRequest;
use crate::prompt::render_todo_system;
use crate::tag_escaping::escape_tags;
use crate::thread::{Message, MessageKind, ThreadState};
use crate::tools::ToolOutput;

/// Completion nudges per run (DeerFlow's `_MAX_COMPLETION_REMINDERS`).
pub const MAX_COMPLETION_REMINDERS: u32 = 2;
/// The tag that marks the plan-mode instructions in a system prompt.
const SYSTEM_TAG: &str = "<todo_list_system>";
/// The answer to a second `write_todos` in one model answer (LangChain's wording).
pub const PARALLEL_ERROR: &str = "Error: The `write_todos` tool should never be called \
multiple times in parallel. Please call it only once per model invocation to update the todo \
list.";

/// Plan-mode bookkeeping around `write_todos`.
pub struct TodoMiddleware {
    nudges: Mutex<u32>,
    pending: PendingReminders,
}

impl Default for TodoMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl TodoMiddleware {
    /// The middleware; it needs no services.
    pub fn new() -> Self {
        TodoMiddleware {
            nudges: Mutex::new(0),
            pending: PendingReminders::new(MessageKind::TodoCompletionReminder, 1),
        }
    }
}

#[async_trait]
impl Middleware for TodoMiddleware {
    fn name(&self) -> &'static str {
        "Todo"
    }

    async fn before_agent(&self, _state: &mut ThreadState) -> Flow {
        *self.nudges.lock().unwrap_or_else(PoisonError::into_inner) = 0;
        self.pending.clear();
        Flow::Continue
    }

    async fn before_model(&self, state: &mut ThreadState) -> Flow {
        if state.todos.is_empty() {
            return Flow::Continue;
        }
        let visible = state.messages.iter().any(|message| match message {
            Message::Assistant(assistant) => assistant
                .tool_calls
                .iter()
                .any(|call| call.name == "write_todos"),
            other => other.meta().kind == Some(MessageKind::TodoReminder),
        });
        if !visible {
            let id = format!("todo-reminder-{}", state.usage.model_calls);
            let text = format!(
                "<system_reminder>\nYour todo list (written earlier with write_todos, no longer \
                 visible above) is still active:\n{}\nKeep it up to date with write_todos.\n\
                 </system_reminder>",
                list(&state.todos)
            );
            state
                .messages
                .push(Message::hidden_user(id, MessageKind::TodoReminder, text));
        }
        Flow::Continue
    }

    async fn after_model(&self, state: &mut ThreadState) -> Flow {
        let Some(answer) = last_assistant(state) else {
            return Flow::Continue;
        };
        let unfinished: Vec<TodoItem> = state
            .todos
            .iter()
            .filter(|todo| todo.status != TodoStatus::Completed)
            .cloned()
            .collect();
        if !answer.tool_calls.is_empty() || unfinished.is_empty() {
            return Flow::Continue;
        }
        let mut nudges = self.nudges.lock().unwrap_or_else(PoisonError::into_inner);
        if *nudges >= MAX_COMPLETION_REMINDERS {
            return Flow::Continue;
        }
        *nudges += 1;
        self.pending.push(format!(
            "<system_reminder>\nYou gave a final answer, but your todo list still has unfinished \
             items:\n{}\nFinish them, or update the list with write_todos (mark items completed, \
             drop the ones no longer needed), then give your final answer.\n</system_reminder>",
            list(&unfinished)
        ));
        Flow::JumpToModel
    }

    fn rewrite_request(&self, _state: &ThreadState, request: &mut ModelRequest) {
        if !request.system.contains(SYSTEM_TAG) {
            if !request.system.is_empty() {
                request.system.push_str("\n\n");
            }
            request.system.push_str(&render_todo_system());
        }
    }

    async fn wrap_model_call(&self, call: ModelCall<'_>, next: ModelNext<'_>) -> ModelResult {
        self.pending.deliver(call, next).await
    }

    async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
        if request.call.name == "write_todos" && !first_write_todos(&request) {
            return ToolOutput::error(PARALLEL_ERROR);
        }
        next.run(request).await
    }
}

/// Whether this call is the first `write_todos` of the answer that made it.
fn first_write_todos(request: &ToolRequest<'_>) -> bool {
    let id = request.call.id.as_str();
    let answer = request.state.messages.iter().rev().find_map(|message| {
        let assistant = message.as_assistant()?;
        assistant
            .tool_calls
            .iter()
            .any(|call| call.id == id)
            .then_some(assistant)
    });
    let Some(answer) = answer else {
        return true;
    };
    answer
        .tool_calls
        .iter()
        .find(|call| call.name == "write_todos")
        .is_none_or(|first| first.id == id)
}

fn list(todos: &[TodoItem]) -> String {
    todos
        .iter()
        .map(|todo| {
            let status = match todo.status {
                TodoStatus::Pending => "pending",
                TodoStatus::InProgress => "in_progress",
                TodoStatus::Completed => "completed",
            };
            format!("- [{status}] {}", escape_tags(&todo.content))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::ToolStatus;
    use crate::tools::write_todos::WriteTodos;

    fn todos(items: &[(&str, TodoStatus)]) -> Vec<TodoItem> {
        items
            .iter()
            .map(|(content, status)| TodoItem {
                content: (*content).into(),
                status: *status,
            })
            .collect()
    }

    fn write(items: serde_json::Value) -> (&'static str, serde_json::Value) {
        ("write_todos", json!({ "todos": items }))
    }

    #[tokio::test]
    async fn unfinished_todos_get_at_most_two_nudges() {
        let plan = json!([{"content": "a", "status": "completed"},
                          {"content": "b <x>", "status": "in_progress"}]);
        let model = QueuedModel::new(vec![
            calls(&[write(plan)]),
            text("done?"),
            text("done!"),
            text("really done"),
        ]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(WriteTodos)],
            vec![Arc::new(TodoMiddleware::new())],
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("plan it");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.answer, "really done");
        let requests = model.requests();
        assert_eq!(requests.len(), 4, "two nudges, then the answer stands");
        let nudge = requests[2].messages.last().unwrap();
        assert_eq!(nudge.meta().kind, Some(MessageKind::TodoCompletionReminder));
        assert!(
            nudge.text().contains("- [in_progress] b &lt;x&gt;"),
            "{}",
            nudge.text()
        );
        assert!(!nudge.text().contains("- [completed] a"));
        assert!(
            state
                .messages
                .iter()
                .all(|m| m.meta().kind != Some(MessageKind::TodoCompletionReminder)),
            "nudges are per request"
        );
        assert!(requests.iter().all(|r| r.system.contains(SYSTEM_TAG)));
    }

    #[tokio::test]
    async fn finished_todos_need_no_nudge_and_the_prompt_is_not_doubled() {
        let plan = json!([{"content": "a", "status": "completed"}]);
        let model = QueuedModel::new(vec![calls(&[write(plan)]), text("done")]);
        let (mut agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(WriteTodos)],
            vec![Arc::new(TodoMiddleware::new())],
            Arc::new(RecordingControl::default()),
        );
        agent.system_prompt = format!("Base.\n\n{}", render_todo_system());
        agent.run(&mut ThreadState::new("t"), &env).await.unwrap();
        let requests = model.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].system.matches(SYSTEM_TAG).count(), 1);
    }

    #[tokio::test]
    async fn a_second_write_todos_in_one_answer_is_refused() {
        let model = QueuedModel::new(vec![
            calls(&[
                write(json!([{"content": "first", "status": "pending"}])),
                write(json!([{"content": "second", "status": "pending"}])),
            ]),
            text("ok"),
        ]);
        let (agent, env) = test_doubles::agent(
            model,
            vec![Arc::new(WriteTodos)],
            vec![Arc::new(TodoMiddleware::new())],
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("t");
        agent.run(&mut state, &env).await.unwrap();
        assert_eq!(state.todos, todos(&[("first", TodoStatus::Pending)]));
        let results: Vec<_> = state
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(t) => Some((t.status, t.content.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(results[0].0, ToolStatus::Success);
        assert_eq!(results[1], (ToolStatus::Error, PARALLEL_ERROR.to_owned()));
    }

    #[tokio::test]
    async fn a_list_that_scrolled_away_is_recalled_once() {
        let middleware = TodoMiddleware::new();
        let mut state = ThreadState::new("t");
        state.todos = todos(&[("x", TodoStatus::Pending)]);
        middleware.before_model(&mut state).await;
        middleware.before_model(&mut state).await;
        let reminders: Vec<&Message> = state
            .messages
            .iter()
            .filter(|m| m.meta().kind == Some(MessageKind::TodoReminder))
            .collect();
        assert_eq!(reminders.len(), 1);
        assert!(reminders[0].meta().hidden);
        assert!(reminders[0].text().contains("- [pending] x"));

        let mut visible = ThreadState::new("t");
        visible.todos = state.todos.clone();
        visible
            .messages
            .push(Message::Assistant(calls(&[write(json!([]))])));
        middleware.before_model(&mut visible).await;
        assert_eq!(
            visible.messages.len(),
            2,
            "the write_todos call is still in view"
        );
    }
}
