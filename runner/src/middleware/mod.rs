//! The middleware chain: small cross-cutting behaviours around the loop, one per file.
//!
//! `chain.rs` builds the chain and says why each middleware sits where it does; every other
//! file here is one middleware. What several middlewares share (the clock, the circuit
//! breaker, side calls, reminders, editing the last turn, active skills, test doubles) lives
//! in `shared/`.

pub(crate) mod chain;
pub(crate) mod clarification;
pub(crate) mod dangling_tool_call;
pub(crate) mod deferred_tool_filter;
pub(crate) mod durable_context;
pub(crate) mod dynamic_context;
pub(crate) mod input_sanitization;
pub(crate) mod llm_error_handling;
pub(crate) mod loop_detection;
pub(crate) mod mcp_routing;
pub(crate) mod memory;
pub(crate) mod model_length_finish_reason;
pub(crate) mod read_before_write;
pub(crate) mod safety_finish_reason;
pub(crate) mod sandbox;
pub(crate) mod sandbox_audit;
pub(crate) mod shared;
pub(crate) mod skill_activation;
pub(crate) mod skill_tool_policy;
pub(crate) mod subagent_limit;
pub(crate) mod summarization;
pub(crate) mod system_message_coalescing;
pub(crate) mod terminal_response;
pub(crate) mod thread_data;
pub(crate) mod title;
pub(crate) mod todo;
pub(crate) mod token_budget;
pub(crate) mod tool_approval;
pub(crate) mod tool_error_handling;
pub(crate) mod tool_output_budget;
pub(crate) mod tool_result_sanitization;
pub(crate) mod uploads;
pub(crate) mod usage_and_progress;
pub(crate) mod view_image;
