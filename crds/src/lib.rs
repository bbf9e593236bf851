//! Herd's API: the `Agent`, `Skill` and `Run` custom resources (group `herd.dev`), the runner's
//! report types, and the run-API wire bodies.

pub mod report;
pub mod wire;
