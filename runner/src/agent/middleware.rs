//! The `Middleware` trait: DeerFlow's hook points around the agent loop.
//!
//! Order (LangChain's, which DeerFlow relies on): `before_agent` and `before_model` run in
//! chain order; `after_model` and `after_agent` in reverse; `wrap_model_call` and
//! `wrap_tool_call` nest with the first middleware outermost.
//!
//! What persists is explicit in the types: hooks that get `&mut ThreadState` change the thread
//! (it is checkpointed and resumed); `wrap_model_call` gets an owned `ModelRequest` that is
//! built fresh for every call, so whatever it changes affects that one request only.

use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::report::StopReason;

use crate::model::{ChatModel, DeltaSink, ModelError, ModelRequest};
use crate::thread::{AssistantMessage, ThreadState, ToolCall};
use crate::tools::{ToolContext, ToolOutput};

use super::tool_registry::ToolRegistry;

/// What the loop does after a `before_*`/`after_*` hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Go on as usual.
    Continue,
    /// Skip the tools of this turn (if any) and call the model again (`jump_to: model`).
    JumpToModel,
    /// End the run now with this reason.
    End(StopReason),
}

/// One middleware of the chain. Every hook is optional.
#[async_trait]
pub trait Middleware: Send + Sync {
    /// A stable name, used to place custom middlewares before or after this one.
    fn name(&self) -> &'static str;

    /// Once, before the first model call of a run (or of a resumed run).
    async fn before_agent(&self, _state: &mut ThreadState) -> Flow {
        Flow::Continue
    }

    /// Before every model call; changes persist in the thread.
    async fn before_model(&self, _state: &mut ThreadState) -> Flow {
        Flow::Continue
    }

    /// Edits this call's own request before it goes on; changes are not persisted. The chain
    /// runs it just before this middleware's `wrap_model_call`, so a middleware that only
    /// rewrites the request cannot forget to pass it on or answer in the model's place.
    fn rewrite_request(&self, _state: &ThreadState, _request: &mut ModelRequest) {}

    /// Around the model call. `call.request` is this call's own copy: changes are not persisted.
    async fn wrap_model_call(&self, call: ModelCall<'_>, next: ModelNext<'_>) -> ModelResult {
        next.run(call).await
    }

    /// After every model call; the new assistant message is the thread's last message.
    /// A middleware may edit it (strip tool calls, append a note) — that persists.
    async fn after_model(&self, _state: &mut ThreadState) -> Flow {
        Flow::Continue
    }

    /// Around one tool call. Tool calls of one turn run concurrently, so this sees the thread
    /// as it was when the turn's model answer arrived.
    async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
        next.run(request).await
    }

    /// Once, when the run stops (whatever the reason).
    async fn after_agent(&self, _state: &mut ThreadState) {}
}

/// What a model call through the chain ends in: the assistant's answer or why there is none.
pub type ModelResult = Result<AssistantMessage, ModelError>;

/// One model call on its way through the chain.
#[derive(Clone)]
pub struct ModelCall<'a> {
    /// The thread as of this call; the chain reads it, the loop alone changes it.
    pub state: &'a ThreadState,
    /// This call's own request, built fresh for it: changes are not persisted.
    pub request: ModelRequest,
}

/// The rest of the model-call chain, ending at the model itself.
pub struct ModelNext<'a> {
    pub(crate) rest: &'a [Arc<dyn Middleware>],
    pub(crate) model: &'a dyn ChatModel,
    pub(crate) on_delta: DeltaSink<'a>,
}

impl ModelNext<'_> {
    /// Passes the call to the next middleware, or its request to the model after the last one.
    pub async fn run(self, mut call: ModelCall<'_>) -> ModelResult {
        match self.rest.split_first() {
            Some((first, rest)) => {
                let next = ModelNext {
                    rest,
                    model: self.model,
                    on_delta: self.on_delta,
                };
                first.rewrite_request(call.state, &mut call.request);
                first.wrap_model_call(call, next).await
            }
            None => self.model.complete(&call.request, self.on_delta).await,
        }
    }
}

/// One tool call on its way through the chain.
#[derive(Clone)]
pub struct ToolRequest<'a> {
    pub call: ToolCall,
    /// The thread as of the model answer that made this call.
    pub state: &'a ThreadState,
    pub ctx: ToolContext,
}

/// The rest of the tool-call chain, ending at the tool itself.
pub struct ToolNext<'a> {
    pub(crate) rest: &'a [Arc<dyn Middleware>],
    pub(crate) tools: &'a ToolRegistry,
}

impl ToolNext<'_> {
    /// Passes the call to the next middleware, or executes the tool after the last one.
    pub async fn run(self, request: ToolRequest<'_>) -> ToolOutput {
        match self.rest.split_first() {
            Some((first, rest)) => {
                let next = ToolNext {
                    rest,
                    tools: self.tools,
                };
                first.wrap_tool_call(request, next).await
            }
            None => self.tools.execute(&request.call, &request.ctx).await,
        }
    }
}
