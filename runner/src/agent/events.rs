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
    /// A side call starts: a model call outside the agent loop (the title, the memory update,
    /// a summary), capped and timed on its own; it streams nothing.
    SideCall { agent: String, call: SideCallKind },
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
    /// Tool calls wait for a person's approval (all of one turn).
    ApprovalAsked {
        agent: String,
        requests: Vec<herd_crds::approval::ApprovalRequest>,
    },
    /// A person (or the approval timeout) decided on a held tool call.
    ApprovalDecided {
        agent: String,
        /// The call in one line (`bash: rm -rf build/`).
        call: String,
        verdict: herd_crds::approval::Verdict,
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

/// What a side call is for.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum SideCallKind {
    /// Naming the thread after its first exchange.
    Title,
    /// Learning from a finished run.
    Memory,
    /// Replacing older messages by a summary.
    Summary,
}

impl SideCallKind {
    /// What the agent is doing meanwhile, for progress lines ("[lead] writing the title").
    pub fn doing(self) -> &'static str {
        match self {
            SideCallKind::Title => "writing the title",
            SideCallKind::Memory => "updating memory",
            SideCallKind::Summary => "summarizing the conversation",
        }
    }

    /// The call's name in warnings ("the title call timed out").
    pub fn name(self) -> &'static str {
        match self {
            SideCallKind::Title => "title",
            SideCallKind::Memory => "memory",
            SideCallKind::Summary => "summary",
        }
    }
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
