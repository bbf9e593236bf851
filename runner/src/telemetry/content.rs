//! Prompt, answer and tool text on spans: only when the Agent opts in, always truncated.

use herd_sandbox::truncation::truncate_chars;
use serde::Serialize;

/// Most characters of one content attribute: enough to read a turn, small enough that a long
/// thread does not make every export megabytes.
pub const MAX_CONTENT_CHARS: usize = 4_096;

/// `text`, cut to [`MAX_CONTENT_CHARS`].
pub fn truncated(text: &str) -> String {
    truncate_chars(text, MAX_CONTENT_CHARS)
}

/// `value` as JSON, cut to [`MAX_CONTENT_CHARS`]; empty when it does not serialize.
pub fn truncated_json(value: &impl Serialize) -> String {
    serde_json::to_string(value)
        .map(|json| truncated(&json))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_content_is_cut_and_short_content_kept() {
        assert_eq!(truncated("short"), "short");
        let long = "x".repeat(MAX_CONTENT_CHARS * 2);
        assert_eq!(truncated(&long).chars().count(), MAX_CONTENT_CHARS + 1);
        assert_eq!(truncated_json(&vec!["a", "b"]), r#"["a","b"]"#);
    }
}
