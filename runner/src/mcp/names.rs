//! Tool names: `<server>__<tool>`, fit for every model API (`^[A-Za-z0-9_-]{1,64}$`). A
//! server's tool name is kept where it fits; other characters become `_`, and a name too
//! long is cut and given a short hash of the original, so two long names stay apart.

use sha2::{Digest, Sha256};

/// Between the server's name and the tool's.
pub const SEPARATOR: &str = "__";
/// The longest tool name OpenAI-compatible APIs accept.
pub const MAX_NAME: usize = 64;

/// The name the model calls `tool` of `server` by.
pub fn qualified(server: &str, tool: &str) -> String {
    let cleaned: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let full = format!("{server}{SEPARATOR}{cleaned}");
    if full.len() <= MAX_NAME && !cleaned.is_empty() {
        return full;
    }
    let hash = hex::encode(&Sha256::digest(tool.as_bytes())[..3]);
    let room = MAX_NAME.saturating_sub(server.len() + SEPARATOR.len() + hash.len() + 1);
    let cut: String = cleaned.chars().take(room).collect();
    format!("{server}{SEPARATOR}{cut}_{hash}")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn names_are_prefixed_cleaned_and_cut_to_fit() {
        assert_eq!(
            qualified("time", "get_current_time"),
            "time__get_current_time"
        );
        assert_eq!(
            qualified("docs", "search.pages v2"),
            "docs__search_pages_v2"
        );
        let long = "a".repeat(80);
        let name = qualified("docs", &long);
        assert_eq!(name.len(), MAX_NAME);
        assert_ne!(name, qualified("docs", &format!("{long}b")));
        assert!(qualified("docs", "").starts_with("docs___"));
    }

    proptest! {
        #[test]
        fn every_name_is_a_valid_tool_name(server in "[a-z0-9]{1,32}", tool in "\\PC{0,100}") {
            let name = qualified(&server, &tool);
            prop_assert!(name.len() <= MAX_NAME);
            prop_assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
            let prefix = format!("{server}__");
            prop_assert!(name.starts_with(&prefix));
        }
    }
}
