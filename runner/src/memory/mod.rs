//! Memory: facts and context an agent remembers across runs, changed only through operations.

pub mod apply;
pub mod extract;
pub mod file;
pub mod inject;
