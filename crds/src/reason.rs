//! Condition types and reasons, as named constants so the operator, the runner and the tests
//! spell them one way.

/// Condition types of Agents and Skills.
pub mod condition_type {
    /// The spec is valid and understood.
    pub const ACCEPTED: &str = "Accepted";
    /// Every referenced Skill, Secret and ConfigMap exists and may be used (Agents).
    pub const RESOLVED_REFS: &str = "ResolvedRefs";
    /// The object can be used: the summary of the other conditions.
    pub const READY: &str = "Ready";
    /// A Run's outcome, Tekton style: `Unknown` while it goes, then `True` or `False`.
    pub const SUCCEEDED: &str = "Succeeded";
    /// A Run's agent asked a question and waits for `spec.responses`.
    pub const INPUT_REQUIRED: &str = "InputRequired";
    /// A Budget has a limit reached in its current window.
    pub const EXCEEDED: &str = "Exceeded";
    /// kstatus: present and `True` only while the controller works on a new generation.
    pub const RECONCILING: &str = "Reconciling";
    /// kstatus: present and `True` only while a spec or reference error persists (its reason
    /// is the failing condition's).
    pub const STALLED: &str = "Stalled";
}

/// Reasons shared by the kstatus conditions of Agents and Skills.
pub mod kstatus {
    /// `Reconciling=True`: the controller is processing a new generation.
    pub const PROGRESSING: &str = "Progressing";
}

/// Reasons of an Agent's conditions.
pub mod agent {
    /// `Accepted=True`, `ResolvedRefs=True`, `Ready=True`.
    pub const ACCEPTED: &str = "Accepted";
    /// `ResolvedRefs=True`.
    pub const RESOLVED_REFS: &str = "ResolvedRefs";
    /// `Ready=True`.
    pub const READY: &str = "Ready";
    /// `Accepted=False`: the spec is invalid in a way the schema could not catch.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// `ResolvedRefs=False`: a listed skill does not exist.
    pub const SKILL_NOT_FOUND: &str = "SkillNotFound";
    /// `ResolvedRefs=False`: a listed skill exists but is not ready.
    pub const SKILL_NOT_READY: &str = "SkillNotReady";
    /// `ResolvedRefs=False`: a referenced Secret or key does not exist.
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    /// `ResolvedRefs=False`: a referenced Secret lacks the label
    /// `herd.dev/model-credentials: "true"`.
    pub const SECRET_NOT_ALLOWED: &str = "SecretNotAllowed";
    /// `ResolvedRefs=False`: a referenced ConfigMap or key does not exist.
    pub const CONFIG_MAP_NOT_FOUND: &str = "ConfigMapNotFound";
    /// `Ready=False`: some other condition is not `True`.
    pub const NOT_READY: &str = "NotReady";
}

/// Reasons of a Skill's conditions.
pub mod skill {
    /// `Accepted=True`, `Ready=True`.
    pub const ACCEPTED: &str = "Accepted";
    /// `Ready=True`.
    pub const READY: &str = "Ready";
    /// `Accepted=False`: the SKILL.md frontmatter is missing or invalid.
    pub const INVALID_FRONTMATTER: &str = "InvalidFrontmatter";
    /// `Accepted=False`: the frontmatter `name` differs from `metadata.name`.
    pub const NAME_MISMATCH: &str = "NameMismatch";
    /// `Accepted=False`: content and files do not fit in one ConfigMap.
    pub const TOO_LARGE: &str = "TooLarge";
    /// `Accepted=False`: a `files` path is not a relative path inside the skill's folder.
    pub const INVALID_FILES: &str = "InvalidFiles";
    /// `Ready=False`: the rendered ConfigMap `<skill>-<digest8>` belongs to another object (a
    /// deleted Skill of the same name whose leftovers are not garbage-collected yet).
    pub const CONFIG_MAP_CONFLICT: &str = "ConfigMapConflict";
    /// `Ready=False`: the skill is disabled (`enabled: false`).
    pub const DISABLED: &str = "Disabled";
    /// `Ready=False`: some other condition is not `True`.
    pub const NOT_READY: &str = "NotReady";
}

/// Reasons of a Schedule's conditions.
pub mod schedule {
    /// `Accepted=True`.
    pub const ACCEPTED: &str = "Accepted";
    /// `Accepted=False`: `schedule` does not parse as a cron expression or `@every` duration.
    pub const INVALID_SCHEDULE: &str = "InvalidSchedule";
    /// `Accepted=False`: `timeZone` names no time zone the operator knows.
    pub const UNKNOWN_TIME_ZONE: &str = "UnknownTimeZone";
    /// `Ready=True`: Runs are created at their slots.
    pub const SCHEDULED: &str = "Scheduled";
    /// `Ready=True`: `suspend` is set; no Run is created.
    pub const SUSPENDED: &str = "Suspended";
    /// `Ready=True`: the one-shot `at` Run was created, or no slot is left.
    pub const FINISHED: &str = "Finished";
    /// `Ready=False`: the API server refused the latest Run (its message is carried).
    pub const RUN_REJECTED: &str = "RunRejected";
    /// `Ready=False`: the spec is not accepted.
    pub const NOT_ACCEPTED: &str = "NotAccepted";
    /// Warning Event: more than 100 slots were missed; only the latest is run.
    pub const TOO_MANY_MISSED: &str = "TooManyMissedSlots";
    /// Warning Event: a slot passed its `startingDeadlineSeconds` before its Run was created.
    pub const MISSED_SLOT: &str = "MissedSlot";
    /// Normal Event: a slot was skipped because a Run is still going and the policy is `Forbid`.
    pub const FORBIDDEN: &str = "SkippedWhileActive";
    /// Normal Event: a Run was created for a slot.
    pub const RUN_CREATED: &str = "RunCreated";
    /// Normal Event: a going Run was cancelled for a new slot (policy `Replace`).
    pub const RUN_REPLACED: &str = "RunReplaced";
}

/// Reasons of a Budget's conditions and Events.
pub mod budget {
    /// `Ready=True`: the ledger counts the Runs' usage.
    pub const COUNTING: &str = "Counting";
    /// `Ready=False`: the window is neither a period nor a calendar window the operator reads.
    pub const INVALID_WINDOW: &str = "InvalidWindow";
    /// `Ready=False`: `window.timeZone` names no time zone the operator knows.
    pub const UNKNOWN_TIME_ZONE: &str = "UnknownTimeZone";
    /// `Exceeded=False`.
    pub const WITHIN_LIMITS: &str = "WithinLimits";
    /// `Exceeded=True`: a limit is reached; new Runs wait or are refused.
    pub const LIMIT_REACHED: &str = "LimitReached";
    /// Warning Event: a limit was reached.
    pub const EXCEEDED: &str = "BudgetExceeded";
    /// Normal Event: a window ended and `used` started again from zero.
    pub const WINDOW_RESET: &str = "WindowReset";
    /// Warning Event: Runs went uncounted because the ledger follows its most Runs.
    pub const UNTRACKED_RUNS: &str = "UntrackedRuns";
}

/// Reasons of a Run's `Succeeded` and `InputRequired` conditions.
pub mod run {
    /// `Succeeded=Unknown`: waiting for a free slot under a concurrency cap.
    pub const QUEUED: &str = "Queued";
    /// `Succeeded=Unknown`: a Budget that selects the Run has a limit reached (`onExceeded:
    /// Queue`; its message names the Budget and when its window resets); `Succeeded=False`
    /// with `onExceeded: Refuse`.
    pub const BUDGET_EXCEEDED: &str = "BudgetExceeded";
    /// `Succeeded=Unknown`: the pod was created and has not started yet.
    pub const POD_PENDING: &str = "PodPending";
    /// `Succeeded=Unknown`: the agent is working.
    pub const RUNNING: &str = "Running";
    /// `Succeeded=Unknown`, `InputRequired=True`: a question waits for an answer.
    pub const WAITING_FOR_INPUT: &str = "WaitingForInput";
    /// `Succeeded=Unknown`, `InputRequired=True`: tool calls wait for a person's approval.
    pub const WAITING_FOR_APPROVAL: &str = "WaitingForApproval";
    /// `Succeeded=Unknown`, `InputRequired=True`: the wait outlasted `suspendAfter`; the Pod
    /// posted its checkpoint and ended, and the Run resumes in a new attempt once answered.
    pub const SUSPENDED: &str = "Suspended";
    /// `Succeeded=Unknown`: the Agent does not exist (yet); retried.
    pub const AGENT_NOT_FOUND: &str = "AgentNotFound";
    /// `Succeeded=Unknown`: the Agent exists but is not ready (its message is carried); retried.
    pub const AGENT_NOT_READY: &str = "AgentNotReady";
    /// `Succeeded=True`.
    pub const SUCCEEDED: &str = "Succeeded";
    /// `Succeeded=False`: the agent failed.
    pub const FAILED: &str = "Failed";
    /// `Succeeded=False`: the Run's `timeout` passed.
    pub const TIMED_OUT: &str = "TimedOut";
    /// `Succeeded=False`: a question went unanswered for `inputTimeout`.
    pub const INPUT_TIMED_OUT: &str = "InputTimedOut";
    /// `Succeeded=False`: a tool call waited for approval past `approval.timeout`, with
    /// `onTimeout: fail`.
    pub const APPROVAL_TIMED_OUT: &str = "ApprovalTimedOut";
    /// `Succeeded=False`: `spec.cancel` was set.
    pub const CANCELLED: &str = "Cancelled";
    /// `Succeeded=False`: the pod failed outside the agent's control.
    pub const POD_FAILED: &str = "PodFailed";
    /// `Succeeded=False`: a container ran out of memory.
    pub const OOM_KILLED: &str = "OOMKilled";
    /// `Succeeded=False`: the pod was evicted and no retries were left.
    pub const EVICTED: &str = "Evicted";
    /// `Succeeded=False`: the model could not be reached or kept failing.
    pub const MODEL_ERROR: &str = "ModelError";
    /// `Succeeded=False`: the result exceeded the result ConfigMap's cap.
    pub const RESULT_TOO_LARGE: &str = "ResultTooLarge";
    /// `Succeeded=False`: the checkpoint stayed too large after summarization.
    pub const CHECKPOINT_TOO_LARGE: &str = "CheckpointTooLarge";
    /// `Succeeded=False`: the spec is invalid in a way the schema could not catch.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// `Succeeded=False`: the Run's snapshot ConfigMap was deleted while the Run was active.
    pub const SNAPSHOT_LOST: &str = "SnapshotLost";

    // Why a Run's Pod does not start, from the kubelet's waiting reasons and the scheduler:
    // `Succeeded=Unknown` as soon as the Pod shows one, `Succeeded=False` (or a retry) once the
    // Pod has not started within the operator's `--pod-start-timeout`.

    /// The scheduler finds no node for the Pod (`PodScheduled=False`).
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    /// The kubelet backs off pulling an image after failed pulls.
    pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";
    /// An image pull failed (missing image or tag, no credentials, registry unreachable).
    pub const ERR_IMAGE_PULL: &str = "ErrImagePull";
    /// An image reference does not parse; never retried (the snapshot's image cannot change).
    pub const INVALID_IMAGE_NAME: &str = "InvalidImageName";
    /// The image is not on the node and its pull policy is `Never`.
    pub const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
    /// The kubelet could not inspect an image.
    pub const IMAGE_INSPECT_ERROR: &str = "ImageInspectError";
    /// A container's configuration cannot be made, e.g. a Secret or key named by its
    /// environment is missing, or its image runs as root.
    pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";
    /// The container runtime could not create a container.
    pub const CREATE_CONTAINER_ERROR: &str = "CreateContainerError";
    /// The container runtime could not start a container.
    pub const RUN_CONTAINER_ERROR: &str = "RunContainerError";
    /// A container keeps exiting (the `sandbox` sidecar, restarted by the kubelet).
    pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";
    /// The kubelet's pre-create step (device, CPU or memory manager) failed.
    pub const PRE_CREATE_HOOK_ERROR: &str = "PreCreateHookError";
    /// The kubelet's pre-start step (device, CPU or memory manager) failed.
    pub const PRE_START_HOOK_ERROR: &str = "PreStartHookError";
    /// `InputRequired=False`: no question is open.
    pub const NO_QUESTION: &str = "NoQuestion";
    /// `InputRequired=False`: the open question was answered.
    pub const ANSWERED: &str = "Answered";
}
