//! The controllers, in kube-runtime's shape (`reconcile` + `error_policy` + a `Context`): each
//! reads its caches, calls the pure decisions of [`crate::decide`], and applies the result.
//! Every replica runs them to keep its caches warm; only the leader's reconciles act.

pub mod admission;
pub mod agent;
pub mod budget;
pub mod budget_admission;
pub mod budget_allowance;
pub mod budget_views;
pub mod create_child;
pub mod lifecycle;
pub mod prologue;
pub mod run;
pub mod run_accept;
mod run_answers;
pub mod run_api_tls;
pub mod run_changes;
pub mod run_children;
pub mod run_context;
pub mod run_objects;
pub mod run_start;
mod run_trace;
pub mod schedule;
pub mod skill;
pub mod superseded;
