//! Memory: facts and context an agent remembers across runs, changed only through operations.

pub mod apply;
pub mod file;
pub mod extract;
pub mod inject;
