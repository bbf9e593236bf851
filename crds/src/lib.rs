//! Herd's API: the `Agent`, `Skill`, `Run`, `Schedule` and `Budget` custom resources (group
//! `herd.dev`), the runner's report types, and the run-API wire bodies.
//!
//! All five resources are namespaced, version `v1alpha1`, in category `herd` (`kubectl get
//! herd` lists them all), with a status subresource. Short names carry an `h` prefix so they
//! do not collide with other operators' `ag`/`run`/`skill` resources: `hag` (Agent), `hskill`
//! (Skill), `hrun` (Run), `hsched` (Schedule), `hbudget` (Budget).
//!
//! - [`agent`], [`skill`], [`run`], [`schedule`], [`budget`]: the resource types, with serde
//!   defaults equal to the schema defaults and `validate()` methods mirroring the create-time
//!   CEL rules ([`rules`]).
//! - [`condition`], [`reason`]: KEP-1623 conditions, `set_condition`, and named reasons.
//! - [`skill_md`]: SKILL.md frontmatter parsing with DeerFlow's rules (operator and runner).
//! - [`manifest`]: multi-document YAML to typed resources, for `herd-runner run -f`.
//! - [`memory`]: memory operations applied to a memory document (runner and operator).
//! - [`generate`]: the CRDs as committed under `charts/herd/crds/` (bin `crdgen`).

pub mod agent;
pub mod approval;
pub mod budget;
pub mod condition;
pub mod duration;
pub mod formats;
pub mod generate;
pub mod manifest;
pub mod memory;
pub mod micros;
pub mod pricing;
pub mod reason;
pub mod refs;
pub mod report;
pub mod rules;
pub mod run;
pub mod schedule;
mod schema;
pub mod skill;
pub mod skill_md;
pub mod terminal_text;
pub mod validation;
pub mod wire;
