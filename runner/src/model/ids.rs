//! Random ids for messages and tool calls a provider left without one.

use rand::Rng;
use rand::distr::Alphanumeric;

/// `prefix` followed by 24 random letters and digits (unique in practice, like provider ids).
pub(crate) fn random_id(prefix: &str) -> String {
    let suffix: String = rand::rng()
        .sample_iter(Alphanumeric)
        .take(24)
        .map(char::from)
        .collect();
    format!("{prefix}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_the_prefix_and_differ() {
        let a = random_id("call_");
        let b = random_id("call_");
        assert!(a.starts_with("call_"));
        assert_eq!(a.len(), 29);
        assert_ne!(a, b);
    }
}
