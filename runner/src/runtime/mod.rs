//! Putting a run together: manifests and settings in, a configured lead agent out.

pub mod blueprint;
pub mod local;
pub mod manifests;
pub mod settings;
pub mod workdir;
