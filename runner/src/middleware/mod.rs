//! The middleware chain: small cross-cutting behaviours around the loop, one per file.

pub mod chain;
pub mod placement;
pub mod circuit_breaker;
pub mod last_turn;
pub mod llm_error_handling;
pub mod loop_detection;
pub mod reminders;
pub mod input_sanitization;
pub mod tool_output_budget;
pub mod tool_result_sanitization;
#[cfg(test)]
mod test_support;
pub mod dangling_tool_call;
pub mod clock;
pub mod text;
pub mod thread_data;
pub mod uploads;
pub mod sandbox;
pub mod dynamic_context;
pub mod sandbox_audit;
pub mod read_before_write;
pub mod model_length_finish_reason;
pub mod safety_finish_reason;
pub mod subagent_limit;
pub mod terminal_response;
pub mod token_budget;
pub mod active_skills;
pub mod tool_error_handling;
pub mod memory;
pub mod durable_context;
pub mod summarization;
pub mod skill_activation;
pub mod skill_tool_policy;
pub mod system_message_coalescing;
pub mod clarification;
pub mod token_usage;
