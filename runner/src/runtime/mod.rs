//! Putting a run together: manifests and settings in, a configured lead agent out.

pub(crate) mod blueprint;
pub mod local;
pub(crate) mod manifests;
pub mod settings;
pub mod workdir;
