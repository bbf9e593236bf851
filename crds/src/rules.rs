//! The CEL rules (`x-kubernetes-validations`) of the three CRDs, with their messages.
//!
//! The derives put these into the generated schemas, and the pure-Rust `validate()` methods
//! report the same messages, so a manifest run locally with `herd-runner run -f` fails with the
//! words the API server would use.

/// Pattern of a duration field: one or more `<digits><unit>` groups, units `ms`, `s`, `m`, `h`.
///
/// A `duration()` call in CEL would reject bad input with the evaluator's own text, so the rule
/// matches the pattern instead and carries a message of ours.
pub const DURATION_PATTERN: &str = "^([0-9]+(ms|s|m|h))+$";

/// CEL rule on every duration field.
pub const DURATION: &str = "self.matches('^([0-9]+(ms|s|m|h))+$')";
/// Message of [`DURATION`].
pub const DURATION_MESSAGE: &str = "must be a duration made of <number><unit> groups with units ms, s, m or h, such as 90s, 30m or 1h30m";

/// Agent and Run: names are copied into label values, which hold at most 63 characters.
pub const NAME_63: &str = "size(self.metadata.name) <= 63";
/// Message of [`NAME_63`].
pub const NAME_63_MESSAGE: &str =
    "metadata.name must be at most 63 characters, because it is used as a label value";

/// Skill: the name is also the skill's folder and its frontmatter `name`.
pub const SKILL_NAME: &str =
    "size(self.metadata.name) <= 64 && self.metadata.name.matches('^[a-z0-9]+(-[a-z0-9]+)*$')";
/// Message of [`SKILL_NAME`].
pub const SKILL_NAME_MESSAGE: &str = "metadata.name of a Skill must be at most 64 characters of lowercase letters and digits in groups joined by single hyphens (^[a-z0-9]+(-[a-z0-9]+)*$)";

/// Agent: the SOUL is written inline or taken from a ConfigMap, not both.
pub const SOUL_EXCLUSIVE: &str = "!(has(self.soul) && has(self.soulFrom))";
/// Message of [`SOUL_EXCLUSIVE`].
pub const SOUL_EXCLUSIVE_MESSAGE: &str =
    "soul and soulFrom are mutually exclusive: set at most one";

/// Agent `subagents.maxConcurrent`.
pub const MAX_CONCURRENT: &str = "self >= 1 && self <= 4";
/// Message of [`MAX_CONCURRENT`].
pub const MAX_CONCURRENT_MESSAGE: &str = "must be between 1 and 4";

/// Agent `subagents.maxTotal`.
pub const MAX_TOTAL: &str = "self >= 1 && self <= 50";
/// Message of [`MAX_TOTAL`].
pub const MAX_TOTAL_MESSAGE: &str = "must be between 1 and 50";

/// Agent `subagents.maxDepth`.
pub const MAX_DEPTH: &str = "self >= 1 && self <= 3";
/// Message of [`MAX_DEPTH`].
pub const MAX_DEPTH_MESSAGE: &str = "must be between 1 and 3";

/// Agent `runDefaults.retries`.
pub const RETRIES: &str = "self >= 0 && self <= 3";
/// Message of [`RETRIES`].
pub const RETRIES_MESSAGE: &str = "must be between 0 and 3";

/// Agent `sandbox.egress`: the CIDR list goes with mode `CIDRs` and only with it.
pub const EGRESS_CIDRS: &str =
    "(has(self.mode) && self.mode == 'CIDRs') == (has(self.cidrs) && size(self.cidrs) > 0)";
/// Message of [`EGRESS_CIDRS`].
pub const EGRESS_CIDRS_MESSAGE: &str =
    "cidrs must be a non-empty list when mode is CIDRs, and must not be set for other modes";

/// Run: every spec field except `responses` and `cancel` is immutable, presence included.
pub const RUN_SPEC_IMMUTABLE: &str = concat!(
    "(has(self.agentRef) == has(oldSelf.agentRef) && (!has(self.agentRef) || self.agentRef == oldSelf.agentRef))",
    " && (has(self.task) == has(oldSelf.task) && (!has(self.task) || self.task == oldSelf.task))",
    " && (has(self.inputs) == has(oldSelf.inputs) && (!has(self.inputs) || self.inputs == oldSelf.inputs))",
    " && (has(self.model) == has(oldSelf.model) && (!has(self.model) || self.model == oldSelf.model))",
    " && (has(self.planMode) == has(oldSelf.planMode) && (!has(self.planMode) || self.planMode == oldSelf.planMode))",
    " && (has(self.thinking) == has(oldSelf.thinking) && (!has(self.thinking) || self.thinking == oldSelf.thinking))",
    " && (has(self.timeout) == has(oldSelf.timeout) && (!has(self.timeout) || self.timeout == oldSelf.timeout))",
    " && (has(self.inputTimeout) == has(oldSelf.inputTimeout) && (!has(self.inputTimeout) || self.inputTimeout == oldSelf.inputTimeout))",
    " && (has(self.parentRef) == has(oldSelf.parentRef) && (!has(self.parentRef) || self.parentRef == oldSelf.parentRef))",
    " && (has(self.subagentType) == has(oldSelf.subagentType) && (!has(self.subagentType) || self.subagentType == oldSelf.subagentType))",
    " && (has(self.ttlSecondsAfterFinished) == has(oldSelf.ttlSecondsAfterFinished) && (!has(self.ttlSecondsAfterFinished) || self.ttlSecondsAfterFinished == oldSelf.ttlSecondsAfterFinished))",
);
/// Message of [`RUN_SPEC_IMMUTABLE`].
pub const RUN_SPEC_IMMUTABLE_MESSAGE: &str =
    "a Run's spec is immutable except responses and cancel; create a new Run instead";

/// Run: a child Run carries both its parent and the subagent type, a top-level Run neither.
pub const PARENT_WITH_TYPE: &str = "has(self.parentRef) == has(self.subagentType)";
/// Message of [`PARENT_WITH_TYPE`].
pub const PARENT_WITH_TYPE_MESSAGE: &str =
    "parentRef and subagentType are set together, and only on child Runs";

/// Run `cancel`: once true, it stays true.
pub const CANCEL_STAYS: &str = "self || !oldSelf";
/// Message of [`CANCEL_STAYS`].
pub const CANCEL_STAYS_MESSAGE: &str = "cancel cannot be set back to false once a Run is cancelled";

/// Run `responses`: no answer is ever removed. Compares ids only: comparing whole answers of
/// every pair would exceed the per-rule cost limit.
pub const RESPONSES_APPEND_ONLY: &str = "oldSelf.all(o, self.exists(n, n.id == o.id))";
/// Message of [`RESPONSES_APPEND_ONLY`].
pub const RESPONSES_APPEND_ONLY_MESSAGE: &str =
    "responses are append-only: an answer cannot be removed";

/// Run `responses[]`: an answer, once given, does not change (correlated by `id`).
pub const RESPONSE_IMMUTABLE: &str = "self == oldSelf";
/// Message of [`RESPONSE_IMMUTABLE`].
pub const RESPONSE_IMMUTABLE_MESSAGE: &str = "an answer cannot be changed once given";

/// Run `status.report`: a delayed write from the runner never replaces a newer one.
pub const REPORT_NOT_STALE: &str = "self.attempt > oldSelf.attempt || (self.attempt == oldSelf.attempt && self.seq >= oldSelf.seq)";
/// Message of [`REPORT_NOT_STALE`].
pub const REPORT_NOT_STALE_MESSAGE: &str =
    "stale report: attempt must not decrease, and seq must not decrease within an attempt";
