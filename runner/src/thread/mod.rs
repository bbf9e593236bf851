//! Messages and thread state.

pub mod message;
pub mod state;

pub use message::{
    AssistantMessage, FinishReason, ImagePart, Message, MessageMeta, SystemMessage, ToolCall,
    ToolMessage, ToolStatus, UserMessage,
};
pub use state::ThreadState;
