//! Herd's API: the `Agent`, `Skill` and `Run` custom resources (group `herd.dev`), the runner's
//! report types, and the run-API wire bodies.

pub mod agent;
pub mod condition;
pub mod duration;
pub mod generate;
pub mod manifest;
pub mod reason;
pub mod refs;
pub mod report;
pub mod rules;
pub mod run;
mod schema;
pub mod skill;
pub mod validation;
pub mod wire;
