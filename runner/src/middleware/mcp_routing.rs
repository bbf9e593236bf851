//! McpRouting (DeerFlow's, deferred tools only): before each model call, the deferred tools
//! whose names the user's latest message speaks of (at most three, `catalog::route`) are
//! promoted, so the model gets their schemas without a `tool_search` first. Promotion only
//! adds, so routing the same message again changes nothing.

use std::sync::Arc;

use async_trait::async_trait;

use crate::agent::{Flow, Middleware};
use crate::mcp::catalog::DeferredCatalog;
use crate::thread::{Message, ThreadState};

/// Promotes the deferred tools the user names.
pub struct McpRouting {
    catalog: Arc<DeferredCatalog>,
}

impl McpRouting {
    pub fn new(catalog: Arc<DeferredCatalog>) -> Self {
        McpRouting { catalog }
    }
}

#[async_trait]
impl Middleware for McpRouting {
    fn name(&self) -> &'static str {
        "McpRouting"
    }

    async fn before_model(&self, state: &mut ThreadState) -> Flow {
        let latest = state
            .messages
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::User(user) if user.meta.kind.is_none() => Some(user.content.as_str()),
                _ => None,
            });
        if let Some(text) = latest {
            let routed = self.catalog.route(text);
            if !routed.is_empty() {
                tracing::debug!(?routed, "deferred tools promoted by the user's words");
            }
            state.promoted_tools.extend(routed);
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::ToolSchema;
    use crate::thread::MessageKind;

    #[tokio::test]
    async fn the_users_words_promote_and_reminders_do_not() {
        let catalog = Arc::new(DeferredCatalog::new(vec![ToolSchema {
            name: "time__get_current_time".into(),
            description: "Current time.".into(),
            parameters: json!({"type": "object"}),
        }]));
        let routing = McpRouting::new(catalog);
        let mut state = ThreadState::new("Write a haiku");
        state.messages.push(Message::hidden_user(
            "r",
            MessageKind::DynamicContext,
            "current time is 12:00",
        ));
        routing.before_model(&mut state).await;
        assert!(
            state.promoted_tools.is_empty(),
            "a reminder is not the user"
        );
        state
            .messages
            .push(Message::user("u2", "What time is it in Lima?"));
        routing.before_model(&mut state).await;
        assert!(state.promoted_tools.contains("time__get_current_time"));
    }
}
