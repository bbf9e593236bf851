//! Span and attribute names: the OpenTelemetry GenAI semantic conventions, and Herd's own under
//! `herd.`.

/// `chat`, `execute_tool` or `invoke_agent`.
pub const OPERATION_NAME: &str = "gen_ai.operation.name";
/// `openai`, `anthropic`, or `herd.scripted` for the scripted test model.
pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
pub const AGENT_NAME: &str = "gen_ai.agent.name";
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
pub const REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
pub const REQUEST_TEMPERATURE: &str = "gen_ai.request.temperature";
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const RESPONSE_ID: &str = "gen_ai.response.id";
pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// Seconds from the request to the first streamed chunk.
pub const RESPONSE_TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const TOOL_NAME: &str = "gen_ai.tool.name";
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub const TOOL_TYPE: &str = "gen_ai.tool.type";
/// Content, recorded only when the Agent opts in.
pub const SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
pub const TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
pub const TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
/// The class of a failure (`timeout`, `rate_limited`, `tool_error`...).
pub const ERROR_TYPE: &str = "error.type";

/// `lead` or `subagent`.
pub const AGENT_ROLE: &str = "herd.agent.role";
/// The subagent type of a subagent (`general-purpose`, `bash`).
pub const SUBAGENT_TYPE: &str = "herd.subagent.type";
/// The Run's attempt (1 for the first pod).
pub const RUN_ATTEMPT: &str = "herd.run.attempt";
/// Why the agent stopped (`Completed`, `ModelCallLimit`...).
pub const STOP_REASON: &str = "herd.stop_reason";
/// `success` or `error`.
pub const TOOL_OUTCOME: &str = "herd.tool.outcome";
/// The sandbox request of a `sandbox {op}` span (`tool`, `read_file`...).
pub const SANDBOX_OPERATION: &str = "herd.sandbox.operation";
/// What the model call was for (`main`, `title`, `summary`, `memory`).
pub const PURPOSE: &str = "herd.purpose";

/// Span events of the chain's decisions that change a run; each says what in `herd.message`.
pub const EVENT_LOOP_WARNING: &str = "herd.loop_warning";
pub const EVENT_LOOP_STOP: &str = "herd.loop_stop";
pub const EVENT_SUMMARIZED: &str = "herd.summarized";
pub const EVENT_BUDGET_WARNING: &str = "herd.token_budget_warning";
pub const EVENT_BUDGET_STOP: &str = "herd.token_budget_stop";
/// A failed model call retried, or the breaker holding calls back (after a 429...).
pub const EVENT_MODEL_RETRY: &str = "herd.model_retry";
pub const MESSAGE: &str = "herd.message";
