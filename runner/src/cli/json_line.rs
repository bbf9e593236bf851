//! One JSON value per line for `--json`, safe to show on a terminal.
//!
//! serde_json escapes the C0 controls but writes DEL, the C1 controls and the bidirectional
//! overrides as raw UTF-8, which a terminal displaying the stream may act on. This formatter
//! writes those as `\uXXXX` escapes too: the value a JSON parser reads is unchanged.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

use super::terminal_text::is_unsafe;

/// serde_json's compact output with every terminal-unsafe character `\u`-escaped.
struct TerminalSafeFormatter;

impl Formatter for TerminalSafeFormatter {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (index, c) in fragment.char_indices() {
            if is_unsafe(c) {
                writer.write_all(&fragment.as_bytes()[start..index])?;
                // Every unsafe character is in the Basic Multilingual Plane: one escape each.
                write!(writer, "\\u{:04x}", u32::from(c))?;
                start = index + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

/// `value` as one line of JSON, without the newline.
pub fn json_line<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, TerminalSafeFormatter);
    if let Err(error) = value.serialize(&mut serializer) {
        // Our event types always serialize; say so in JSON rather than print half a line.
        return serde_json::json!({"event": "error", "message": error.to_string()}).to_string();
    }
    String::from_utf8(out).unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn escapes_what_a_terminal_acts_on() {
        let line = json_line(&json!({"text": "a\u{1b}[2Jb\u{9b}c\u{202e}d\u{7f}"}));
        assert_eq!(line, r#"{"text":"a\u001b[2Jb\u009bc\u202ed\u007f"}"#);
    }

    #[test]
    fn matches_serde_json_on_ordinary_values() {
        let value = json!({"event": "text", "n": [1, 2.5, null, true], "s": "ü \"q\" \\ \n\t ✓"});
        assert_eq!(json_line(&value), value.to_string());
    }

    proptest! {
        #[test]
        fn round_trips_and_never_carries_unsafe_characters(text in any::<String>()) {
            let line = json_line(&json!({"text": text}));
            prop_assert!(!line.chars().any(is_unsafe), "{line:?}");
            prop_assert!(!line.contains('\n'));
            let back: Value = serde_json::from_str(&line).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(back["text"].as_str(), Some(text.as_str()));
        }
    }
}
