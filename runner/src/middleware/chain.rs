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
use super::shared::active_skills::ActiveSkills;
use super::shared::circuit_breaker::CircuitBreaker;
use super::shared::clock::{Clock, system_clock};
use super::shared::side_call::{SideCall, long_max_tokens};
use super::skill_activation::SkillActivation;
use super::skill_tool_policy::SkillToolPolicy;
use super::subagent_limit::SubagentLimit;
use super::summarization::{Summarization, SummarizationConfig};
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
use herd_sandbox::ToolExecutor;

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

/// What each position of the chain is built from: one agent of the run.
struct Agent<'a> {
    chain: &'a StandardChain,
    role: ChainRole,
    control: &'a Arc<dyn ControlPlane>,
    lead: bool,
    /// `lead`, or the subagent type.
    name: &'a str,
    /// Which skills are active, shared by SkillActivation and SkillToolPolicy.
    active_skills: Arc<ActiveSkills>,
}

impl Agent<'_> {
    fn plan(&self) -> &RunPlan {
        &self.chain.plan
    }

    fn resources(&self) -> &RunResources {
        &self.chain.resources
    }

    fn executor(&self) -> Arc<dyn ToolExecutor> {
        self.chain.resources.executor.clone()
    }

    fn clock(&self) -> Clock {
        self.chain.clock.clone()
    }

    /// A side call of `kind` made by this agent.
    fn side_call(&self, kind: SideCallKind) -> SideCall {
        SideCall::new(kind, self.name, self.resources().observer.clone())
    }

    /// The context of this agent's main model calls.
    fn call_context(&self) -> CallContext {
        CallContext {
            role: self.role.role,
            subagent_type: (!self.lead).then(|| self.role.name.to_owned()),
            purpose: Purpose::Main,
            attempt: self.plan().attempt,
        }
    }

    /// The run's token budget; a subagent without one gets `DEFAULT_SUBAGENT_TOKEN_BUDGET`.
    fn token_budget(&self) -> Option<u64> {
        match (self.lead, self.plan().token_budget) {
            (_, Some(budget)) => Some(budget),
            (false, None) => Some(DEFAULT_SUBAGENT_TOKEN_BUDGET),
            (true, None) => None,
        }
    }
}

/// One position of the chain: its middleware for an agent, or none where it has no place.
type Position = fn(&Agent<'_>) -> Option<Arc<dyn Middleware>>;

/// `middleware` at its position.
fn at(middleware: impl Middleware + 'static) -> Option<Arc<dyn Middleware>> {
    Some(Arc::new(middleware))
}

/// The middleware `build` makes, at its position when `place` holds.
fn when<M: Middleware + 'static>(
    place: bool,
    build: impl FnOnce() -> M,
) -> Option<Arc<dyn Middleware>> {
    place.then(|| Arc::new(build()) as Arc<dyn Middleware>)
}

/// The chain, top (outermost) to bottom, in DeerFlow's order, each with why it sits there.
const ORDER: [Position; 32] = [
    // Outermost on the model side: the user's own tags are escaped before any inner block.
    |_| at(InputSanitization::new()),
    // Outermost on the tool side: budgets the final result, after every inner rewrite.
    |_| at(ToolOutputBudget::new()),
    // Untrusted web text is neutralized before anything else sees it.
    |_| at(ToolResultSanitization::new()),
    // First before_agent: the thread's folders exist before anything touches them.
    |a| at(ThreadData::new(a.executor(), a.plan().attempt, a.clock())),
    // Lists the uploads into those folders, so after ThreadData.
    |a| when(a.lead, || Uploads::new(a.executor())),
    // Confirms the sandbox answers before any model call is spent.
    |a| at(SandboxMiddleware::new(a.executor())),
    // Answers dangling calls outside the retrying layer, so retries resend a valid request.
    |_| at(DanglingToolCall::new()),
    // Retries everything inside it; reminders of inner middlewares are re-delivered each time.
    |a| {
        let retries = RetrySettings::from_max_retries(a.plan().model.max_retries);
        at(
            LlmErrorHandling::new(retries, a.name, a.resources().observer.clone())
                .with_breaker(a.chain.breaker.clone()),
        )
    },
    // Outermost tool guard: refuses dangerous commands, so nobody is asked about them.
    |_| at(SandboxAudit::new()),
    // Holds calls for approval, outside the other guards an approved call must still meet.
    |a| {
        let approval = a.plan().approval.as_ref()?;
        at(ToolApproval::new(approval.spec.compile().ok()?))
    },
    // Refuses overwrites of unread files, after approval.
    |_| at(ReadBeforeWrite::new()),
    // Innermost tool guard: frames whatever error is left for the model.
    |_| at(ToolErrorHandling::new()),
    // Date (and the lead's memory) go in after uploads, so they sit before them.
    |a| {
        if !a.lead {
            return at(DynamicContext::subagent(a.clock()));
        }
        let memory = a.plan().memory.enabled.then(|| {
            let (injection_tokens, count_tokens) = a.chain.memory_budget(a.role.prompt_tokens);
            MemorySource {
                control: a.control.clone(),
                injection_tokens,
                count_tokens,
            }
        });
        at(DynamicContext::new(a.clock(), memory))
    },
    // Activates skills; shares which are active with the policy below.
    |a| {
        let skills = a.resources().skills.clone();
        at(SkillActivation::new(
            skills,
            a.executor(),
            a.active_skills.clone(),
        ))
    },
    // Limits tools to what the active skills allow.
    |a| {
        at(SkillToolPolicy::new(
            a.resources().skills.clone(),
            a.active_skills.clone(),
        ))
    },
    // Records delegations and skill reads before Summarization can compact them away.
    |_| at(DurableContext::new()),
    // Compacts the thread inside DurableContext, which re-injects the summary per request.
    |a| {
        let plan = a.plan();
        when(plan.summarization.enabled, || {
            let config = SummarizationConfig::from_spec(&plan.summarization, plan.context_window());
            Summarization::new(a.resources().model.clone(), config, a.call_context())
                .with_call(summary_call(plan, a.name, a.resources()))
        })
    },
    // After Summarization, so its scrolled-out check sees the compacted thread.
    |a| when(a.lead && a.plan().plan_mode, TodoMiddleware::new),
    // Reports usage with the title and todos: after_model runs bottom-up, so after Title's.
    |a| {
        if a.lead {
            at(UsageAndProgress::new(
                a.name,
                a.control.clone(),
                a.plan().attempt,
            ))
        } else {
            at(UsageAndProgress::log_only(a.name))
        }
    },
    // Names the thread in after_model, before UsageAndProgress reports it.
    |a| {
        when(a.lead, || {
            Title::new(Some(a.resources().model.clone()), a.plan().attempt)
                .with_call(a.side_call(SideCallKind::Title))
        })
    },
    // Updates memory once the answer stands (after_agent).
    |a| {
        let plan = a.plan();
        when(a.lead && plan.memory.enabled, || {
            let model = a.resources().model.clone();
            let memory = Memory::new(model, a.control.clone(), a.clock(), plan.attempt);
            let (window, model_max) = (plan.context_window(), plan.model.max_tokens);
            let max_tokens = long_max_tokens(plan.memory.max_tokens, window, model_max);
            memory.with_call(
                a.side_call(SideCallKind::Memory)
                    .with_max_tokens(max_tokens),
            )
        })
    },
    // Adds image messages, which SystemMessageCoalescing (inside it) must still see.
    |a| when(a.plan().model.supports_vision, ViewImageMiddleware::new),
    // Promotes the deferred tools the model asked for before the model runs.
    |a| {
        let catalog = a.chain.deferred.as_ref()?;
        at(McpRouting::new(catalog.clone()))
    },
    // Inside every tool-editing middleware but coalescing: keeps unpromoted tools out.
    |a| {
        let catalog = a.chain.deferred.as_ref()?;
        at(DeferredToolFilter::new(catalog.names().map(str::to_owned)))
    },
    // Inside every middleware that adds system text, so the provider sees one system message.
    |_| at(SystemMessageCoalescing::new()),
    // Guards act bottom-up in after_model, so this one last: it counts only calls that run.
    |_| at(LoopDetection::new(LoopSettings::default())),
    // Cuts `task` calls to the caps before LoopDetection counts them.
    |a| {
        let settings = a.plan().subagents.filter(|_| a.role.delegates)?;
        at(SubagentLimit::new(
            settings.caps.max_concurrent,
            settings.caps.max_total,
        ))
    },
    // A budget stop strips the answer before LoopDetection and SubagentLimit see it.
    |a| at(TokenBudget::new(a.token_budget()?)),
    // Re-asks after an empty answer, once the finish-reason guards have settled theirs.
    |_| at(TerminalResponse::new()),
    // A length-cut answer is marked before TerminalResponse, which then leaves it alone.
    |_| at(ModelLengthFinishReason::new()),
    // Sees the answer first: a blocked answer is a safety stop, with its calls stripped.
    |_| at(SafetyFinishReason::new()),
    // Always last: it ends the turn from wrap_tool_call; nothing inside it would run.
    |a| {
        when(a.lead, || {
            ClarificationMiddleware::new(a.plan().clarification)
        })
    },
];

/// Builds the chain for one agent of the run: each position of `ORDER` that has a place.
fn build_chain(
    chain: &StandardChain,
    role: ChainRole,
    control: &Arc<dyn ControlPlane>,
) -> Vec<Arc<dyn Middleware>> {
    let lead = role.role == AgentRole::Lead;
    let agent = Agent {
        chain,
        role,
        control,
        lead,
        name: if lead { "lead" } else { role.name },
        active_skills: Arc::new(ActiveSkills::new()),
    };
    ORDER
        .iter()
        .filter_map(|position| position(&agent))
        .collect()
}

#[cfg(test)]
mod tests {
    use herd_sandbox::SandboxResponse;
    use herd_sandbox::testing::FakeExecutor;

    use super::*;
    use crate::agent::NoObserver;
    use crate::control::SubagentCaps;
    use crate::plan::{SubagentSettings, test_plan};
    use crate::test_doubles::{QueuedModel, RecordingControl, calls};
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
