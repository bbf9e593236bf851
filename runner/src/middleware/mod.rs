//! The middleware chain: small cross-cutting behaviours around the loop, one per file.
//!
//! `chain.rs` builds the chain and says why each middleware sits where it does; every other
//! file here is one middleware. What several middlewares share (the clock, the circuit
//! breaker, side calls, reminders, editing the last turn, active skills, test doubles) lives
//! in `support/`.

pub mod chain;
pub mod clarification;
pub mod dangling_tool_call;
pub mod durable_context;
pub mod dynamic_context;
pub mod input_sanitization;
pub mod llm_error_handling;
pub mod loop_detection;
pub mod memory;
pub mod model_length_finish_reason;
pub mod read_before_write;
pub mod safety_finish_reason;
pub mod sandbox;
pub mod sandbox_audit;
pub mod skill_activation;
pub mod skill_tool_policy;
pub mod subagent_limit;
pub mod summarization;
pub mod support;
pub mod system_message_coalescing;
pub mod terminal_response;
pub mod thread_data;
pub mod title;
pub mod todo;
pub mod token_budget;
pub mod token_usage;
pub mod tool_error_handling;
pub mod tool_output_budget;
pub mod tool_result_sanitization;
pub mod uploads;
pub mod view_image;
