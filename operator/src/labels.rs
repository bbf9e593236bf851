//! Label keys and values the operator writes and selects on.

/// The standard "managed by" label; the operator's caches select on it.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY`] on every object the operator creates.
pub const MANAGER: &str = "herd-operator";
/// The selector of the operator's ConfigMap and Pod caches.
pub const MANAGED_SELECTOR: &str = "app.kubernetes.io/managed-by=herd-operator";
/// On a skill's ConfigMap: the Skill's name.
pub const SKILL: &str = "herd.dev/skill";
/// On a skill's ConfigMap: the first 8 hex digits of the version's digest.
pub const SKILL_DIGEST: &str = "herd.dev/skill-digest";
/// On a Secret: `"true"` allows Agents to reference it.
pub const MODEL_CREDENTIALS: &str = "herd.dev/model-credentials";
/// The selector of the operator's Secret (metadata) cache.
pub const MODEL_CREDENTIALS_SELECTOR: &str = "herd.dev/model-credentials=true";
/// On a Run's Pod and ConfigMaps: the Run's name.
pub const RUN: &str = "herd.dev/run";
/// On a Run's Pod and the NetworkPolicy that opens its egress: the egress set's digest.
pub const EGRESS_SET: &str = "herd.dev/egress-set";
/// On a Run's Pod and a memory ConfigMap: the Agent's name.
pub const AGENT: &str = "herd.dev/agent";
/// On a Run's Pod: the attempt number.
pub const ATTEMPT: &str = "herd.dev/attempt";
/// On a Run: whose memory it uses when its Agent's memory has `scope: user`.
pub const USER: &str = "herd.dev/user";
/// On a Schedule's Run: the Schedule's name.
pub const SCHEDULE: &str = "herd.dev/schedule";
/// On a Run started by `kubectl herd trigger`: `manual`.
pub const TRIGGER: &str = "herd.dev/trigger";
/// Annotation on a Schedule's Run: its slot, RFC 3339 (absent on a manual Run).
pub const SCHEDULED_AT: &str = "herd.dev/scheduled-at";
