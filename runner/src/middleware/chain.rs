//! The one function that orders the middleware chain, with the reason for each position.
//!
//! Hook order (see `agent::middleware`): `before_*` run top to bottom, `after_*` bottom to top,
//! `wrap_*` nest with the top one outermost. So a middleware high in the list sees the model
//! request first and the tool result last; one low in the list runs its `after_model` first.

use std::sync::Arc;

use super::clarification::ClarificationMiddleware;
use super::dangling_tool_call::DanglingToolCall;
use super::deferred_tool_filter::DeferredToolFilter;
use super::durable_context::DurableContext;
use super::dynamic_context::{DynamicContext, MemorySource};
use super::input_sanitization::InputSanitization;
use super::llm_error_handling::{LlmErrorHandling, RetrySettings};
use super::loop_detection::{LoopDetection, LoopSettings};
use super::mcp_routing::McpRouting;
use super::memory::Memory;
use super::model_length_finish_reason::ModelLengthFinishReason;
use super::read_before_write::ReadBeforeWrite;
use super::safety_finish_reason::SafetyFinishReason;
use super::sandbox::SandboxMiddleware;
use super::sandbox_audit::SandboxAudit;
use super::skill_activation::SkillActivation;
use super::skill_tool_policy::SkillToolPolicy;
use super::subagent_limit::SubagentLimit;
use super::summarization::{Summarization, SummarizationConfig};
use super::support::active_skills::ActiveSkills;
use super::support::circuit_breaker::CircuitBreaker;
use super::support::clock::{Clock, system_clock};
use super::support::side_call::{SideCall, long_max_tokens};
use super::system_message_coalescing::SystemMessageCoalescing;
use super::terminal_response::TerminalResponse;
use super::thread_data::ThreadData;
use super::title::Title;
use super::todo::TodoMiddleware;
use super::token_budget::TokenBudget;
use super::tool_approval::ToolApproval;
use super::tool_error_handling::ToolErrorHandling;
use super::tool_output_budget::ToolOutputBudget;
use super::tool_result_sanitization::ToolResultSanitization;
use super::uploads::Uploads;
use super::usage_and_progress::UsageAndProgress;
use super::view_image::ViewImageMiddleware;
use crate::agent::{Middleware, RunResources, SideCallKind};
use crate::control::ControlPlane;
use crate::mcp::catalog::DeferredCatalog;
use crate::memory::inject::{TokenCounter, max_injected_tokens};
use crate::model::{AgentRole, CallContext, Purpose};
use crate::plan::RunPlan;
use crate::prompt::budget::ContextBudget;
use crate::prompt::estimate_tokens;
use crate::prompt::tokenizer::count_tokens;

/// A subagent's token budget when the Agent sets none (DeerFlow's subagent default): the
/// guard against runaway subagents (DeerFlow #3875 burned 4.4M tokens on a trivial task).
pub const DEFAULT_SUBAGENT_TOKEN_BUDGET: u64 = 2_000_000;

/// What differs between the lead agent and a subagent when the chain is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainRole {
    pub role: AgentRole,
    /// `lead`, or the subagent type.
    pub name: &'static str,
    /// Whether this agent has the `task` tool.
    pub delegates: bool,
    /// Tokens its system prompt and tool schemas take (`tokenizer::count_tokens`); 0 without
    /// a context window, where nothing is budgeted.
    pub prompt_tokens: usize,
}

/// Herd's chain, in DeerFlow's order. One per run: the circuit breaker is shared by the lead
/// and its in-process subagents, which call the same model.
pub struct StandardChain {
    plan: Arc<RunPlan>,
    resources: RunResources,
    breaker: Arc<CircuitBreaker>,
    clock: Clock,
    /// The deferred MCP tools, when there are any.
    deferred: Option<Arc<DeferredCatalog>>,
}

impl StandardChain {
    /// The chain of the run `plan` describes, over the run's `resources`.
    pub fn new(plan: Arc<RunPlan>, resources: RunResources) -> Self {
        StandardChain {
            plan,
            resources,
            breaker: Arc::new(CircuitBreaker::default()),
            clock: system_clock(),
            deferred: None,
        }
    }

    /// Routes and filters the deferred tools of `catalog` (none: nothing is deferred).
    pub fn set_deferred(&mut self, catalog: Option<Arc<DeferredCatalog>>) {
        self.deferred = catalog;
    }

    /// The middlewares of one agent of the run, in order.
    pub fn build(
        &self,
        role: ChainRole,
        control: &Arc<dyn ControlPlane>,
    ) -> Vec<Arc<dyn Middleware>> {
        build_chain(self, role, control)
    }

    /// The tokens the chain's injected memory needs at least in a small context window,
    /// which this agent's system prompt leaves room for.
    pub fn min_injected_tokens(&self, role: ChainRole) -> usize {
        let memory = &self.plan.memory;
        match self.plan.context_window() {
            Some(window) if role.role == AgentRole::Lead && memory.enabled => {
                let injection = memory.injection_tokens as usize;
                max_injected_tokens(ContextBudget::new(window).memory_floor(injection))
            }
            _ => 0,
        }
    }

    /// The memory injection budget: `injectionTokens`, clamped to what the agent's system
    /// prompt and tool schemas (`prompt_tokens`) left of a small window's prompt half, counted
    /// with the runner's tokenizer when there is a window to fit.
    fn memory_budget(&self, prompt_tokens: usize) -> (usize, TokenCounter) {
        let injection = self.plan.memory.injection_tokens as usize;
        match self.plan.context_window() {
            Some(window) => (
                ContextBudget::new(window).memory(injection, prompt_tokens),
                count_tokens,
            ),
            None => (injection, estimate_tokens),
        }
    }
}

/// The summary call of `agent`: `summarization.maxTokens`, else an eighth of the window.
/// Also what compacts a checkpoint too large for its ConfigMap (`runtime::agents`).
pub fn summary_call(plan: &RunPlan, agent: &str, resources: &RunResources) -> SideCall {
    SideCall::new(SideCallKind::Summary, agent, resources.observer.clone()).with_max_tokens(
        long_max_tokens(
            plan.summarization.max_tokens,
            plan.context_window(),
            plan.model.max_tokens,
        ),
    )
}

/// Pushes a middleware when `$cond` holds.
macro_rules! push_if {
    ($chain:ident, $cond:expr, $middleware:expr) => {
        if $cond {
            $chain.push(Arc::new($middleware) as Arc<dyn Middleware>);
        }
    };
}

/// Builds the chain for one agent of the run.
fn build_chain(
    chain: &StandardChain,
    role: ChainRole,
    control: &Arc<dyn ControlPlane>,
) -> Vec<Arc<dyn Middleware>> {
    let plan = &chain.plan;
    let resources = &chain.resources;
    let lead = role.role == AgentRole::Lead;
    let agent = if lead { "lead" } else { role.name };
    let executor = resources.executor.clone();
    let active_skills = Arc::new(ActiveSkills::new());
    let context = CallContext {
        role: role.role,
        subagent_type: (!lead).then(|| role.name.to_owned()),
        purpose: Purpose::Main,
        attempt: plan.attempt,
    };
    let mut list: Vec<Arc<dyn Middleware>> = Vec::new();

    // Outermost on the model side: escape the user's text before any framework block is
    // added by an inner middleware, so only the user's own tags are neutralized.
    push_if!(list, true, InputSanitization::new());
    // Outermost on the tool side: budget the final result, after every inner rewrite.
    push_if!(list, true, ToolOutputBudget::new());
    // Untrusted web text is neutralized before anything else sees it.
    push_if!(list, true, ToolResultSanitization::new());
    // before_agent, in order: folders exist, then uploads are listed into them, then the
    // sandbox is confirmed reachable before any model call is spent.
    push_if!(
        list,
        true,
        ThreadData::new(executor.clone(), plan.attempt, chain.clock.clone())
    );
    push_if!(list, lead, Uploads::new(executor.clone()));
    push_if!(list, true, SandboxMiddleware::new(executor.clone()));
    // Repairs the request (answers dangling calls) before the retrying layer, so retries
    // resend a request strict providers accept.
    push_if!(list, true, DanglingToolCall::new());
    // Retries everything inside it; reminders queued by inner middlewares are re-delivered
    // on each attempt.
    push_if!(
        list,
        true,
        LlmErrorHandling::new(
            RetrySettings::from_max_retries(plan.model.max_retries),
            agent,
            resources.observer.clone(),
        )
        .with_breaker(chain.breaker.clone())
    );
    // Tool guards from outer to inner: refuse dangerous commands, then hold what needs a
    // person's approval, then unread overwrites, then frame whatever error is left for the
    // model. Approval comes after the audit so that nobody is asked about a command the audit
    // refuses anyway (its "blocked" decisions never ask), and before the others so that an
    // approved call meets every check it would have met without approval.
    push_if!(list, true, SandboxAudit::new());
    if let Some(rules) = plan
        .approval
        .as_ref()
        .and_then(|approval| approval.spec.compile().ok())
    {
        push_if!(list, true, ToolApproval::new(rules));
    }
    push_if!(list, true, ReadBeforeWrite::new());
    push_if!(list, true, ToolErrorHandling::new());
    // Date (and, for the lead, memory) go in after uploads, so they sit before them.
    if lead {
        let memory = plan.memory.enabled.then(|| {
            let (injection_tokens, count_tokens) = chain.memory_budget(role.prompt_tokens);
            MemorySource {
                control: control.clone(),
                injection_tokens,
                count_tokens,
            }
        });
        push_if!(list, true, DynamicContext::new(chain.clock.clone(), memory));
    } else {
        push_if!(list, true, DynamicContext::subagent(chain.clock.clone()));
    }
    // Skills: activation and the tool policy share which skills are active.
    push_if!(
        list,
        true,
        SkillActivation::new(
            resources.skills.clone(),
            executor.clone(),
            active_skills.clone()
        )
    );
    push_if!(
        list,
        true,
        SkillToolPolicy::new(resources.skills.clone(), active_skills)
    );
    // Records delegations and skill reads before Summarization can compact them away, and
    // re-injects the summary per request.
    push_if!(list, true, DurableContext::new());
    push_if!(
        list,
        plan.summarization.enabled,
        Summarization::new(
            resources.model.clone(),
            SummarizationConfig::from_spec(&plan.summarization, plan.context_window()),
            context.clone(),
        )
        .with_call(summary_call(plan, agent, resources))
    );
    // After Summarization, so its scrolled-out check sees the compacted thread.
    push_if!(list, lead && plan.plan_mode, TodoMiddleware::new());
    // Reports usage (with the title and todos) after the title is set: after_model runs
    // bottom-up, so Title (below) acts before UsageAndProgress.
    if lead {
        push_if!(
            list,
            true,
            UsageAndProgress::new(agent, control.clone(), plan.attempt)
        );
    } else {
        push_if!(list, true, UsageAndProgress::log_only(agent));
    }
    push_if!(
        list,
        lead,
        Title::new(Some(resources.model.clone()), plan.attempt).with_call(SideCall::new(
            SideCallKind::Title,
            agent,
            resources.observer.clone()
        ))
    );
    push_if!(
        list,
        lead && plan.memory.enabled,
        Memory::new(
            resources.model.clone(),
            control.clone(),
            chain.clock.clone(),
            plan.attempt
        )
        .with_call(
            SideCall::new(SideCallKind::Memory, agent, resources.observer.clone()).with_max_tokens(
                long_max_tokens(
                    plan.memory.max_tokens,
                    plan.context_window(),
                    plan.model.max_tokens
                )
            )
        )
    );
    push_if!(list, plan.model.supports_vision, ViewImageMiddleware::new());
    // Deferred tools: routing promotes before the model runs, and the filter, inside every
    // middleware that edits the request's tools but SystemMessageCoalescing, keeps the
    // unpromoted ones out of it and refuses their calls.
    if let Some(catalog) = &chain.deferred {
        push_if!(list, true, McpRouting::new(catalog.clone()));
        push_if!(
            list,
            true,
            DeferredToolFilter::new(catalog.names().map(str::to_owned))
        );
    }
    // Inside every middleware that adds system text (DurableContext, Todo), so the provider
    // sees exactly one leading system message.
    push_if!(list, true, SystemMessageCoalescing::new());
    // Guards, whose after_model runs bottom-up: Safety first, then length, terminal, budget,
    // the subagent cap, and loop detection last — so a stripped answer reaches the later ones
    // clean, and the loop guard counts only the `task` calls that will run (50 calls cut to
    // `maxConcurrent` are not a loop).
    push_if!(list, true, LoopDetection::new(LoopSettings::default()));
    if let (true, Some(settings)) = (role.delegates, plan.subagents) {
        push_if!(
            list,
            true,
            SubagentLimit::new(settings.caps.max_concurrent, settings.caps.max_total)
        );
    }
    let budget = match (lead, plan.token_budget) {
        (_, Some(budget)) => Some(budget),
        (false, None) => Some(DEFAULT_SUBAGENT_TOKEN_BUDGET),
        (true, None) => None,
    };
    if let Some(budget) = budget {
        push_if!(list, true, TokenBudget::new(budget));
    }
    push_if!(list, true, TerminalResponse::new());
    push_if!(list, true, ModelLengthFinishReason::new());
    push_if!(list, true, SafetyFinishReason::new());
    // Always last: it ends the turn from wrap_tool_call; nothing inside it would run.
    push_if!(list, lead, ClarificationMiddleware::new(plan.clarification));
    list
}

#[cfg(test)]
mod tests {
    use herd_sandbox::SandboxResponse;
    use herd_sandbox::testing::FakeExecutor;

    use super::*;
    use crate::agent::NoObserver;
    use crate::control::SubagentCaps;
    use crate::plan::{SubagentSettings, test_plan};
    use crate::testing::{QueuedModel, RecordingControl, calls};
    use crate::thread::{Message, ThreadState};

    fn plan(plan_mode: bool, subagents: bool, memory: bool, budget: Option<u64>) -> RunPlan {
        let mut plan = test_plan();
        plan.plan_mode = plan_mode;
        plan.subagents = subagents.then_some(SubagentSettings {
            caps: SubagentCaps {
                max_concurrent: 3,
                max_total: 6,
            },
            max_depth: 1,
            timeout: std::time::Duration::from_secs(60),
        });
        plan.memory.enabled = memory;
        plan.token_budget = budget;
        plan
    }

    fn chain(plan: RunPlan) -> StandardChain {
        StandardChain::new(
            Arc::new(plan),
            RunResources {
                model: QueuedModel::new(vec![]),
                executor: Arc::new(FakeExecutor::answering(SandboxResponse::Done {
                    path: None,
                })),
                skills: Vec::new(),
                observer: Arc::new(NoObserver),
            },
        )
    }

    fn names(plan: RunPlan, role: ChainRole) -> Vec<&'static str> {
        let control: Arc<dyn ControlPlane> = Arc::new(RecordingControl::default());
        chain(plan)
            .build(role, &control)
            .iter()
            .map(|m| m.name())
            .collect()
    }

    const LEAD: ChainRole = ChainRole {
        role: AgentRole::Lead,
        name: "lead",
        delegates: true,
        prompt_tokens: 0,
    };

    #[test]
    fn the_full_lead_chain_keeps_deerflows_order() {
        assert_eq!(
            names(plan(true, true, true, Some(1000)), LEAD),
            vec![
                "InputSanitization",
                "ToolOutputBudget",
                "ToolResultSanitization",
                "ThreadData",
                "Uploads",
                "Sandbox",
                "DanglingToolCall",
                "LLMErrorHandling",
                "SandboxAudit",
                "ReadBeforeWrite",
                "ToolErrorHandling",
                "DynamicContext",
                "SkillActivation",
                "SkillToolPolicy",
                "DurableContext",
                "Summarization",
                "Todo",
                "UsageAndProgress",
                "Title",
                "Memory",
                "SystemMessageCoalescing",
                "LoopDetection",
                "SubagentLimit",
                "TokenBudget",
                "TerminalResponse",
                "ModelLengthFinishReason",
                "SafetyFinishReason",
                "Clarification",
            ]
        );
    }

    #[tokio::test]
    async fn fifty_task_calls_are_trimmed_before_the_loop_guard_counts_them() {
        let control: Arc<dyn ControlPlane> = Arc::new(RecordingControl::default());
        let chain = chain(plan(false, true, false, None)).build(LEAD, &control);
        let mut state = ThreadState::new("Research sixty topics.");
        let requested: Vec<(&str, serde_json::Value)> = (0..60)
            .map(|i| {
                let arguments = serde_json::json!({
                    "description": format!("topic {i}"),
                    "prompt": format!("Research topic {i}."),
                    "subagent_type": "general-purpose",
                });
                ("task", arguments)
            })
            .collect();
        state.messages.push(Message::Assistant(calls(&requested)));
        // The loop runs after_model hooks bottom-up.
        for middleware in chain.iter().rev() {
            middleware.after_model(&mut state).await;
        }
        let answer = state.last_assistant().unwrap();
        assert_eq!(answer.tool_calls.len(), 3, "maxConcurrent calls are kept");
        assert!(
            answer
                .content
                .starts_with("[SUBAGENT LIMIT] 57 task call(s)"),
            "{}",
            answer.content
        );
        assert_eq!(state.stop_reason, None, "the kept calls run");
    }

    #[test]
    fn a_plain_lead_drops_the_optional_middlewares() {
        let mut plain = plan(false, false, false, None);
        plain.summarization.enabled = false;
        let chain = names(
            plain,
            ChainRole {
                delegates: false,
                ..LEAD
            },
        );
        for absent in [
            "Summarization",
            "Todo",
            "Memory",
            "SubagentLimit",
            "TokenBudget",
            "ViewImage",
        ] {
            assert!(!chain.contains(&absent), "{absent} in {chain:?}");
        }
        assert_eq!(chain.last(), Some(&"Clarification"));
    }

    #[test]
    fn subagents_get_the_smaller_chain_with_their_own_guards() {
        let chain = names(
            plan(true, true, true, None),
            ChainRole {
                role: AgentRole::Subagent,
                name: "general-purpose",
                delegates: false,
                prompt_tokens: 0,
            },
        );
        for absent in [
            "Clarification",
            "Title",
            "Memory",
            "Todo",
            "SubagentLimit",
            "Uploads",
        ] {
            assert!(!chain.contains(&absent), "{absent} in {chain:?}");
        }
        for present in [
            "LoopDetection",
            "TokenBudget",
            "Summarization",
            "SubagentDateContext",
        ] {
            assert!(chain.contains(&present), "{present} missing from {chain:?}");
        }
    }

    #[test]
    fn vision_models_get_view_image_before_coalescing() {
        let mut vision = plan(false, false, false, None);
        vision.model.supports_vision = true;
        let chain = names(vision, LEAD);
        let image = chain.iter().position(|n| *n == "ViewImage").unwrap();
        let coalescing = chain
            .iter()
            .position(|n| *n == "SystemMessageCoalescing")
            .unwrap();
        assert!(image < coalescing);
    }
}
