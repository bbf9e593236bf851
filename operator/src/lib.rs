//! The Herd operator as a library: [`start`] / [`run`] bring up its caches, controllers,
//! leader election and HTTP endpoints; the `herd-operator` binary is a thin wrapper around
//! [`cli::process_main`], and tests run several operators in one process (the library never
//! exits the process).
//!
//! Layers: [`decide`] holds the pure decisions; [`controller`] reads caches, decides, applies;
//! [`operator`] wires them to a [`scope::Scope`], the Lease ([`leader`]), [`http`] and the
//! [`run_api`] runner pods call.

pub mod apply;
pub mod builtin_skills;
pub mod certificates;
pub mod cli;
pub mod config;
pub mod controller;
pub mod controller_state;
pub mod crd_version;
pub mod decide;
pub mod error;
pub mod http;
pub mod labels;
pub mod leader;
pub mod metrics;
pub mod operator;
pub mod run_api;
pub mod scope;
pub mod secure_metrics;
pub mod slim;
pub mod traces;

pub use config::Config;
pub use error::Error;
pub use operator::{Running, run, start};
