//! Herd operator.
