//! Memory: facts and context an agent remembers across runs, changed only through operations.

pub(crate) mod extract;
pub(crate) mod file;
pub(crate) mod inject;
