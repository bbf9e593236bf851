//! ViewImage (DeerFlow's `ViewImageMiddleware`, vision models only): images the model asked
//! for with `view_image` are sent exactly once.
//!
//! The loop adds a hidden `view_image` user message carrying the image right after the tool
//! result. before_model moves such messages after the last tool result of their turn, since
//! providers want an answer's tool results together, right after it. after_model, once the
//! model has seen the image, drops the bytes and keeps the text, so checkpoints stay small
//! and later requests do not pay for the image again (DeerFlow #4138).

use async_trait::async_trait;

use crate::agent::{Flow, Middleware};
use crate::thread::{Message, MessageKind, ThreadState};

/// Appended to an image message once its bytes are dropped.
pub const SHOWN_NOTE: &str = "(The image was shown to you once and is no longer attached; \
call view_image again to look at it again.)";

/// Sends viewed images once.
#[derive(Default)]
pub struct ViewImageMiddleware;

impl ViewImageMiddleware {
    /// The middleware; it needs no services.
    pub fn new() -> Self {
        ViewImageMiddleware
    }
}

#[async_trait]
impl Middleware for ViewImageMiddleware {
    fn name(&self) -> &'static str {
        "ViewImage"
    }

    async fn before_model(&self, state: &mut ThreadState) -> Flow {
        let misplaced = state
            .messages
            .windows(2)
            .any(|pair| is_image_message(&pair[0]) && matches!(pair[1], Message::Tool(_)));
        if misplaced {
            state.messages = after_tool_results(std::mem::take(&mut state.messages));
        }
        Flow::Continue
    }

    async fn after_model(&self, state: &mut ThreadState) -> Flow {
        for message in &mut state.messages {
            if let Message::User(user) = message
                && user.meta.kind == Some(MessageKind::ViewImage)
                && !user.images.is_empty()
            {
                user.images.clear();
                user.content.push('\n');
                user.content.push_str(SHOWN_NOTE);
            }
        }
        Flow::Continue
    }
}

fn is_image_message(message: &Message) -> bool {
    matches!(message, Message::User(user) if user.meta.kind == Some(MessageKind::ViewImage))
}

/// The messages with every image message inside a run of tool results moved to its end.
fn after_tool_results(messages: Vec<Message>) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut deferred = Vec::new();
    let mut in_results = false;
    for message in messages {
        if in_results && is_image_message(&message) {
            deferred.push(message);
            continue;
        }
        in_results = matches!(message, Message::Tool(_));
        if !in_results {
            out.append(&mut deferred);
        }
        out.push(message);
    }
    out.append(&mut deferred);
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::{ImagePart, ToolCall, ToolStatus};
    use crate::tools::ToolOutput;
    use crate::tools::write_todos::WriteTodos;

    fn image_message(id: &str) -> Message {
        let mut message = Message::hidden_user(
            id,
            MessageKind::ViewImage,
            format!("Here is the image {id}."),
        );
        if let Message::User(user) = &mut message {
            user.images.push(ImagePart {
                mime_type: "image/png".into(),
                data_base64: "iVBORw0KGgo=".into(),
            });
        }
        message
    }

    fn result(id: &str) -> Message {
        Message::tool(
            &ToolCall {
                id: id.into(),
                name: "view_image".into(),
                arguments: String::new(),
            },
            ToolStatus::Success,
            "Loaded",
        )
    }

    #[tokio::test]
    async fn image_messages_move_after_the_turns_tool_results() {
        let mut state = ThreadState::new("look");
        state.messages.extend([
            Message::Assistant(calls(&[("view_image", json!({})), ("ls", json!({}))])),
            result("c1"),
            image_message("img1"),
            result("c2"),
            image_message("img2"),
        ]);
        ViewImageMiddleware::new().before_model(&mut state).await;
        let ids: Vec<&str> = state.messages.iter().map(Message::id).collect();
        assert_eq!(
            ids,
            vec!["user-0", "", "tool:c1", "tool:c2", "img1", "img2"]
        );
        let unchanged = state.clone();
        ViewImageMiddleware::new().before_model(&mut state).await;
        assert_eq!(state, unchanged);
    }

    /// A `view_image` stand-in: returns the image effect without a sandbox.
    struct FakeViewImage;

    #[async_trait]
    impl crate::tools::Tool for FakeViewImage {
        fn name(&self) -> &str {
            "view_image"
        }
        fn group(&self) -> Option<crate::tools::ToolGroup> {
            Some(crate::tools::ToolGroup::FileRead)
        }
        fn schema(&self) -> crate::model::ToolSchema {
            crate::model::ToolSchema {
                name: "view_image".into(),
                description: "test".into(),
                parameters: json!({"type": "object"}),
            }
        }
        async fn call(
            &self,
            _arguments: serde_json::Value,
            _ctx: &crate::tools::ToolContext,
        ) -> ToolOutput {
            let mut output = ToolOutput::ok("Loaded chart.png");
            output.effect.viewed_image = Some((
                "/mnt/user-data/uploads/chart.png".into(),
                crate::thread::state::ViewedImage {
                    mime_type: "image/png".into(),
                    size: 8,
                },
                ImagePart {
                    mime_type: "image/png".into(),
                    data_base64: "iVBORw0KGgo=".into(),
                },
            ));
            output
        }
    }

    #[tokio::test]
    async fn the_image_is_sent_once_and_the_thread_keeps_only_text() {
        let model = QueuedModel::new(vec![
            calls(&[("view_image", json!({"image_path": "chart.png"}))]),
            calls(&[("write_todos", json!({"todos": []}))]),
            text("It shows growth."),
        ]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(FakeViewImage), Arc::new(WriteTodos)],
            vec![Arc::new(ViewImageMiddleware::new())],
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("what does the chart show?");
        agent.run(&mut state, &env).await.unwrap();

        let images_per_request: Vec<usize> = model
            .requests()
            .iter()
            .map(|request| {
                request
                    .messages
                    .iter()
                    .map(|m| match m {
                        Message::User(u) => u.images.len(),
                        _ => 0,
                    })
                    .sum()
            })
            .collect();
        assert_eq!(images_per_request, vec![0, 1, 0]);
        let kept = state
            .messages
            .iter()
            .find(|m| m.meta().kind == Some(MessageKind::ViewImage))
            .unwrap();
        assert!(kept.text().ends_with(SHOWN_NOTE));
        assert!(kept.text().contains("/mnt/user-data/uploads/chart.png"));
        assert!(
            state
                .viewed_images
                .contains_key("/mnt/user-data/uploads/chart.png")
        );
        let json = serde_json::to_string(&state).unwrap();
        assert!(
            !json.contains("iVBORw0KGgo="),
            "no image bytes in the checkpoint"
        );
    }
}
