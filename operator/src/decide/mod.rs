//! Pure decisions, tested without a cluster: controllers read, call these, and apply.

pub mod admission;
pub mod admission_ledger;
pub mod agent_refs;
pub mod agent_status;
pub mod answers;
pub mod backoff;
pub mod child_run;
pub mod conditions;
pub mod file_keys;
pub mod per_namespace;
pub mod pod_outcome;
pub mod run_api_tls;
pub mod run_deadlines;
pub mod run_network_policy;
pub mod run_pod;
pub mod run_snapshot;
pub mod run_status;
pub mod run_workspace;
pub mod runner_resources;
pub mod schedule_plan;
pub mod schedule_timetable;
pub mod skill_refs;
pub mod skill_status;
pub mod skill_version;
pub mod skill_version_gc;
pub mod trace_context;
