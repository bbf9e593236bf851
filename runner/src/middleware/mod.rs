//! The middleware chain: small cross-cutting behaviours around the loop, one per file.

pub mod placement;
