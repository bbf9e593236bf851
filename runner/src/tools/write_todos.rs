//! `write_todos`: plan mode's todo list (LangChain's TodoListMiddleware tool).

use async_trait::async_trait;
use herd_crds::report::{Todo, TodoStatus};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolContext, ToolOutput, TypedTool};

/// Most items in a plan.
pub const MAX_TODOS: usize = 50;

/// Arguments of `write_todos`.
#[derive(Deserialize, JsonSchema)]
pub struct WriteTodosArgs {
    pub todos: Vec<Todo>,
}

/// The `write_todos` tool.
pub struct WriteTodos;

#[async_trait]
impl TypedTool for WriteTodos {
    const NAME: &'static str = "write_todos";
    // How to plan is in the system prompt's `<todo_list_system>`.
    const DESCRIPTION: &'static str = "Replace your plan with this todo list.";
    type Args = WriteTodosArgs;

    async fn run(&self, args: WriteTodosArgs, _ctx: &ToolContext) -> ToolOutput {
        if args.todos.len() > MAX_TODOS {
            return ToolOutput::error(format!(
                "Error: at most {MAX_TODOS} todos; merge small steps."
            ));
        }
        let mut output = ToolOutput::ok(format!("Updated todo list: {}", summary(&args.todos)));
        output.effect.todos = Some(args.todos);
        output
    }
}

fn summary(todos: &[Todo]) -> String {
    let count = |status| todos.iter().filter(|t| t.status == status).count();
    format!(
        "{} completed, {} in progress, {} pending.",
        count(TodoStatus::Completed),
        count(TodoStatus::InProgress),
        count(TodoStatus::Pending)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarizes_by_status() {
        let todos = vec![
            Todo {
                content: "a".into(),
                status: TodoStatus::Completed,
            },
            Todo {
                content: "b".into(),
                status: TodoStatus::InProgress,
            },
            Todo {
                content: "c".into(),
                status: TodoStatus::Pending,
            },
            Todo {
                content: "d".into(),
                status: TodoStatus::Pending,
            },
        ];
        assert_eq!(summary(&todos), "1 completed, 1 in progress, 2 pending.");
    }
}
