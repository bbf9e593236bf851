//! Messages and thread state.

pub(crate) mod message;
pub(crate) mod state;

pub use message::{
    AssistantMessage, FinishReason, ImagePart, Message, MessageMeta, SystemMessage, ToolCall,
    ToolMessage, ToolStatus, UserMessage,
};
pub use state::ThreadState;
