//! Putting a run together: each shell reads its sources, plans the run (`crate::plan`) and
//! runs the plan's agents. `local` is `herd-runner run`; `pod_plan` is the plan of a Run's
//! pod.

pub(crate) mod agents;
pub(crate) mod in_process_subagents;
pub mod interrupt;
pub(crate) mod lead_run;
pub mod local;
pub mod local_error;
pub mod local_plan;
pub(crate) mod local_sandbox;
pub(crate) mod manifests;
pub mod pod_plan;
pub(crate) mod run_ending;
pub mod run_list;
pub(crate) mod run_record;
pub mod workdir;
