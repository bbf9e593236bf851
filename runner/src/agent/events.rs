//! What the loop tells observers (the terminal display, `--json`, the pod's logs).

use herd_crds::report::{SandboxLayer, StopReason, Todo};
use serde::Serialize;

use crate::model::AgentRole;

/// One thing that happened in a run.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A model call starts (1-based count within the thread).
    ModelCall {
        agent: String,
        role: AgentRole,
        call: u32,
    },
    /// Streamed answer text.
    Text { agent: String, text: String },
    /// Streamed reasoning text.
    Reasoning { agent: String, text: String },
    /// A tool call starts.
    ToolStarted {
        agent: String,
        id: String,
        name: String,
        /// A one-line summary of the arguments.
        summary: String,
    },
    /// A tool call finished.
    ToolFinished {
        agent: String,
        id: String,
        name: String,
        ok: bool,
        /// The first line of the result.
        preview: String,
    },
    /// The agent asked the user a question.
    Asked {
        agent: String,
        question: herd_crds::report::Clarification,
    },
    /// The question was answered and the run goes on.
    Answered {
        agent: String,
        id: String,
        answer: String,
    },
    /// The plan changed.
    Todos { agent: String, todos: Vec<Todo> },
    /// Something the user should know (a retry, a disabled option...).
    Warning { agent: String, message: String },
    /// The loop stopped.
    Stopped { agent: String, reason: StopReason },
    /// Where the tools run and which layers of isolation hold them (once, when the sandbox
    /// is open): `mode` is `confined`, `landlock` or `in-process`.
    Sandbox {
        mode: String,
        layers: Vec<SandboxLayer>,
    },
}

/// Receives events; must be cheap, it is called on the loop's path.
pub trait Observer: Send + Sync {
    fn on_event(&self, event: AgentEvent);
}

/// Discards every event.
pub struct NoObserver;

impl Observer for NoObserver {
    fn on_event(&self, _event: AgentEvent) {}
}
