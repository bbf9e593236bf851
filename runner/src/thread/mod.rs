//! Messages and thread state.

pub(crate) mod message;
pub(crate) mod message_kind;
pub(crate) mod state;

pub use message::{
    AssistantMessage, FinishReason, ImagePart, Message, MessageMeta, SystemMessage, ToolCall,
    ToolMessage, ToolStatus, UserMessage,
};
pub use message_kind::MessageKind;
pub use state::ThreadState;
