//! LLMErrorHandling (wrap_model_call): retries transient model failures with decorrelated
//! jitter, honours `Retry-After`, never retries what cannot succeed (auth, quota, context
//! overflow, bad requests), and fails fast through a circuit breaker while the provider is
//! down. The final failure is a `ModelError` with a message fit for the user; the loop turns
//! it into `StopReason::ModelError`.
//!
//! Chain position (DeerFlow #8): after DanglingToolCall and before every middleware that adds
//! to the request (SkillActivation, DurableContext, Todo, LoopDetection, TokenBudget,
//! TerminalResponse, SystemMessageCoalescing...). wrap_model_call nests with the first
//! middleware outermost, so everything after this one runs again on each retry: a retry sends
//! the same fully-built request, and their per-request reminders survive a failed attempt.
//!
//! Unlike DeerFlow (which answers with a fallback AIMessage), the final failure stays an
//! error, so the Run reports `ModelError` with the reason instead of a fake answer.

use crate::telemetry::{names, record_decision};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rand::Rng;

use crate::agent::{AgentEvent, Middleware, ModelCall, ModelNext, ModelResult, Observer};
use crate::model::{ModelError, ModelErrorKind};

use super::shared::circuit_breaker::{Admission, CircuitBreaker};

/// Attempts per model call, the first included (DeerFlow's `retry_max_attempts`).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// The smallest pause before a retry (DeerFlow's `retry_base_delay_ms`).
pub const BASE_DELAY: Duration = Duration::from_millis(1000);
/// The largest jittered pause (DeerFlow's `retry_cap_delay_ms`).
pub const MAX_DELAY: Duration = Duration::from_millis(8000);
/// The longest `Retry-After` obeyed: a server asking for minutes is treated as down, and the
/// run's own deadline matters more than its wish.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The most attempts `model.maxRetries` can ask for (the CRD allows at most 10 retries).
const MAX_ATTEMPTS_CEILING: u32 = 11;

/// How model calls are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetrySettings {
    /// Attempts per call, the first included (at least 1).
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    pub max_retry_after: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            base_delay: BASE_DELAY,
            max_delay: MAX_DELAY,
            max_retry_after: MAX_RETRY_AFTER,
        }
    }
}

impl RetrySettings {
    /// DeerFlow's defaults, with the Agent's `model.maxRetries` (retries after the first
    /// attempt) when it is set: `maxRetries: 0` means one attempt.
    pub fn from_max_retries(max_retries: Option<u32>) -> Self {
        let max_attempts = max_retries.map_or(DEFAULT_MAX_ATTEMPTS, |retries| {
            retries.saturating_add(1).min(MAX_ATTEMPTS_CEILING)
        });
        RetrySettings {
            max_attempts,
            ..RetrySettings::default()
        }
    }
}

/// Retries one agent's failed model calls within its settings, reporting retries to the
/// observer and sharing the run's circuit breaker.
pub struct LlmErrorHandling {
    settings: RetrySettings,
    agent: String,
    observer: Arc<dyn Observer>,
    breaker: Arc<CircuitBreaker>,
}

impl LlmErrorHandling {
    /// Retries per `settings`; retry warnings go to `observer` under the agent's name. The
    /// breaker is this run's own; use [`LlmErrorHandling::with_breaker`] to share one between
    /// the lead and its in-process subagents.
    pub fn new(
        settings: RetrySettings,
        agent: impl Into<String>,
        observer: Arc<dyn Observer>,
    ) -> Self {
        LlmErrorHandling {
            settings: RetrySettings {
                max_attempts: settings.max_attempts.max(1),
                ..settings
            },
            agent: agent.into(),
            observer,
            breaker: Arc::new(CircuitBreaker::default()),
        }
    }

    /// Uses `breaker` instead of a private one.
    pub fn with_breaker(mut self, breaker: Arc<CircuitBreaker>) -> Self {
        self.breaker = breaker;
        self
    }

    /// The pause before retry number `retry` (1-based) after `error`: decorrelated jitter
    /// (`min(cap, random(base, previous × 3))`), but never shorter than the server's
    /// `Retry-After` (itself capped).
    fn delay(&self, previous: Duration, error: &ModelError) -> Duration {
        let base = self.settings.base_delay;
        let upper = previous.saturating_mul(3).max(base);
        let jitter = if upper > base {
            rand::rng().random_range(base..=upper)
        } else {
            base
        };
        let jitter = jitter.min(self.settings.max_delay);
        match error.retry_after {
            Some(wanted) => jitter.max(wanted.min(self.settings.max_retry_after)),
            None => jitter,
        }
    }

    fn warn(&self, message: String) {
        // The observer shows it to the person (once); the log keeps it at debug level only.
        tracing::debug!(agent = %self.agent, "{message}");
        record_decision(names::EVENT_MODEL_RETRY, &message);
        self.observer.on_event(AgentEvent::Warning {
            agent: self.agent.clone(),
            message,
        });
    }

    fn breaker_open(
        &self,
        model: &str,
        retry_in: Duration,
        last: Option<&ModelError>,
    ) -> ModelError {
        let mut message = format!(
            "The model at {model} is failing continuously, so calls are paused (circuit breaker open; next try in {}s).",
            retry_in.as_secs().max(1)
        );
        if let Some(last) = last {
            message.push_str(&format!(" Last error: {}", last.message));
        }
        ModelError {
            kind: last.map_or(ModelErrorKind::Server, |error| error.kind),
            status: last.and_then(|error| error.status),
            retry_after: Some(retry_in),
            message,
        }
    }
}

/// Another handle on the rest of the chain, for one more attempt.
fn again<'a>(next: &ModelNext<'a>) -> ModelNext<'a> {
    ModelNext {
        rest: next.rest,
        model: next.model,
        on_delta: next.on_delta,
    }
}

#[async_trait]
impl Middleware for LlmErrorHandling {
    fn name(&self) -> &'static str {
        "LLMErrorHandling"
    }

    async fn wrap_model_call(&self, call: ModelCall<'_>, next: ModelNext<'_>) -> ModelResult {
        let model = next.model.name().to_owned();
        let max_attempts = self.settings.max_attempts;
        let mut previous_delay = self.settings.base_delay;
        let mut last_error: Option<ModelError> = None;
        for attempt in 1..=max_attempts {
            if let Admission::Refused { retry_in } = self.breaker.admit() {
                return Err(self.breaker_open(&model, retry_in, last_error.as_ref()));
            }
            let error = match again(&next).run(call.clone()).await {
                Ok(message) => {
                    self.breaker.record_success();
                    return Ok(message);
                }
                Err(error) => error,
            };
            if !error.is_retriable() {
                // The provider answered; the request itself is at fault, and retrying it
                // cannot help.
                self.breaker.record_success();
                return Err(error);
            }
            self.breaker.record_failure();
            if let Admission::Refused { retry_in } = self.breaker.admit() {
                return Err(self.breaker_open(&model, retry_in, Some(&error)));
            }
            if attempt < max_attempts {
                let delay = self.delay(previous_delay, &error);
                previous_delay = delay;
                self.warn(format!(
                    "The model at {model} failed ({}); retry {attempt}/{} in {:.1}s.",
                    error.message,
                    max_attempts - 1,
                    delay.as_secs_f64()
                ));
                tokio::time::sleep(delay).await;
            }
            last_error = Some(error);
        }
        let last = last_error
            .unwrap_or_else(|| ModelError::new(ModelErrorKind::Server, "no attempt was made"));
        Err(ModelError {
            message: format!(
                "The model at {model} kept failing after {max_attempts} attempt{}: {}",
                if max_attempts == 1 { "" } else { "s" },
                last.message
            ),
            ..last
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use herd_crds::report::StopReason;

    use super::*;
    use crate::middleware::shared::test_doubles::direct_call;
    use crate::model::ChatModel;
    use crate::test_doubles::{self, QueuedModel, RecordingObserver, text};
    use crate::thread::{AssistantMessage, ThreadState};

    fn error(kind: ModelErrorKind, status: u16, message: &str) -> ModelError {
        ModelError {
            kind,
            status: Some(status),
            retry_after: None,
            message: message.into(),
        }
    }

    fn model(answers: Vec<Result<AssistantMessage, ModelError>>) -> Arc<QueuedModel> {
        Arc::new(QueuedModel {
            answers: Mutex::new(answers.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
        })
    }

    fn middleware(settings: RetrySettings) -> (LlmErrorHandling, Arc<RecordingObserver>) {
        let events = Arc::new(RecordingObserver::default());
        (
            LlmErrorHandling::new(settings, "lead", events.clone()),
            events,
        )
    }

    async fn call(middleware: &LlmErrorHandling, model: &dyn ChatModel) -> ModelResult {
        let state = ThreadState::new("t");
        let (call, next) = direct_call(&state, model);
        middleware.wrap_model_call(call, next).await
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_failure_is_retried_after_a_jittered_pause() {
        let model = model(vec![
            Err(error(
                ModelErrorKind::Server,
                503,
                "503 Service Unavailable",
            )),
            Err(error(
                ModelErrorKind::RateLimited,
                429,
                "429 Too Many Requests",
            )),
            Ok(text("fine")),
        ]);
        let (middleware, events) = middleware(RetrySettings::default());
        let start = tokio::time::Instant::now();
        let answer = call(&middleware, model.as_ref()).await.unwrap();
        let waited = start.elapsed();
        assert_eq!(answer.content, "fine");
        assert_eq!(model.requests().len(), 3);
        assert!(
            waited >= BASE_DELAY * 2,
            "two pauses of at least the base: {waited:?}"
        );
        assert!(waited <= MAX_DELAY * 2, "each pause capped: {waited:?}");
        let warnings = events.warnings();
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].contains("retry 1/2"), "{}", warnings[0]);
        assert!(
            warnings[1].contains("429 Too Many Requests"),
            "{}",
            warnings[1]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_honoured_up_to_the_cap() {
        let mut limited = error(ModelErrorKind::RateLimited, 429, "slow down");
        limited.retry_after = Some(Duration::from_secs(20));
        let mut greedy = limited.clone();
        greedy.retry_after = Some(Duration::from_secs(3600));
        let model = model(vec![Err(limited), Err(greedy), Ok(text("ok"))]);
        let (middleware, _) = middleware(RetrySettings::default());
        let start = tokio::time::Instant::now();
        call(&middleware, model.as_ref()).await.unwrap();
        let waited = start.elapsed();
        // 20 s asked and obeyed, then one hour asked and capped at 60 s.
        assert!(waited >= Duration::from_secs(80), "{waited:?}");
        assert!(waited < Duration::from_secs(81), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn errors_that_cannot_succeed_are_never_retried() {
        for (kind, status) in [
            (ModelErrorKind::Auth, 401),
            (ModelErrorKind::Quota, 402),
            (ModelErrorKind::ContextOverflow, 400),
            (ModelErrorKind::BadRequest, 400),
        ] {
            let model = model(vec![
                Err(error(kind, status, "nope")),
                Ok(text("unreached")),
            ]);
            let (middleware, events) = middleware(RetrySettings::default());
            let start = tokio::time::Instant::now();
            let failure = call(&middleware, model.as_ref()).await.unwrap_err();
            assert_eq!(failure.kind, kind);
            assert_eq!(failure.message, "nope", "the provider's message is kept");
            assert_eq!(model.requests().len(), 1, "{kind:?} was retried");
            assert_eq!(start.elapsed(), Duration::ZERO);
            assert!(events.warnings().is_empty());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_final_failure_names_the_model_and_the_last_error() {
        let failures = (0..3)
            .map(|i| Err(error(ModelErrorKind::Server, 502, &format!("502 #{i}"))))
            .collect();
        let model = model(failures);
        let (middleware, events) = middleware(RetrySettings::default());
        let failure = call(&middleware, model.as_ref()).await.unwrap_err();
        assert_eq!(
            failure.message,
            "The model at queued kept failing after 3 attempts: 502 #2"
        );
        assert_eq!(failure.status, Some(502));
        assert_eq!(
            events.warnings().len(),
            2,
            "no warning after the last attempt"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn max_retries_zero_means_a_single_attempt() {
        let settings = RetrySettings::from_max_retries(Some(0));
        assert_eq!(settings.max_attempts, 1);
        assert_eq!(RetrySettings::from_max_retries(None).max_attempts, 3);
        let model = model(vec![Err(error(ModelErrorKind::Timeout, 408, "timeout"))]);
        let (middleware, _) = middleware(settings);
        let failure = call(&middleware, model.as_ref()).await.unwrap_err();
        assert_eq!(
            failure.message,
            "The model at queued kept failing after 1 attempt: timeout"
        );
        assert_eq!(model.requests().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_breaker_fails_fast_then_lets_a_probe_through() {
        let failures: Vec<_> = (0..5)
            .map(|_| Err(error(ModelErrorKind::Connection, 503, "connection refused")))
            .chain([Ok(text("recovered"))])
            .collect();
        let model = model(failures);
        let settings = RetrySettings {
            max_attempts: 10,
            ..RetrySettings::default()
        };
        let (middleware, _) = middleware(settings);
        let failure = call(&middleware, model.as_ref()).await.unwrap_err();
        assert_eq!(
            model.requests().len(),
            5,
            "the breaker stops the sixth attempt"
        );
        assert!(
            failure.message.contains("circuit breaker open"),
            "{}",
            failure.message
        );
        assert!(
            failure.message.contains("connection refused"),
            "{}",
            failure.message
        );

        let start = tokio::time::Instant::now();
        let refused = call(&middleware, model.as_ref()).await.unwrap_err();
        assert!(refused.message.contains("circuit breaker open"));
        assert_eq!(model.requests().len(), 5, "no request while open");
        assert_eq!(start.elapsed(), Duration::ZERO, "fails fast");

        tokio::time::advance(super::super::shared::circuit_breaker::RECOVERY_TIMEOUT).await;
        let answer = call(&middleware, model.as_ref()).await.unwrap();
        assert_eq!(answer.content, "recovered");
        assert_eq!(model.requests().len(), 6);
    }

    #[tokio::test(start_paused = true)]
    async fn a_final_failure_stops_the_run_with_model_error() {
        let model = model(
            (0..3)
                .map(|_| Err(error(ModelErrorKind::Server, 500, "500 boom")))
                .collect(),
        );
        let (middleware, _) = middleware(RetrySettings::default());
        let (agent, env) = test_doubles::middleware_agent(model, Arc::new(middleware));
        let outcome = agent.run(&mut ThreadState::new("t"), &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::ModelError);
        assert_eq!(
            outcome.error.as_deref(),
            Some("The model at queued kept failing after 3 attempts: 500 boom")
        );
    }
}
