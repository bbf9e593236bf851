//! Text shown to a person on a terminal, by `herd-runner run` and `kubectl herd` alike.
//!
//! Model answers, tool output, file names, questions and error messages are untrusted: a tool
//! result holding `ESC ] 0 ; title BEL` sets the window title, `ESC [ 2 J` clears the screen,
//! and a right-to-left override makes `txt.exe` read as `exe.txt`. Everything printed for a
//! person goes through [`for_terminal`] (or [`one_line`]), which shows such characters as
//! visible escapes instead of letting the terminal act on them; JSON lines go through
//! [`json_line`], which keeps them JSON.

use std::borrow::Cow;
use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

/// Whether a terminal could act on `c` rather than show it: C0 controls other than newline
/// and tab (ESC starts every escape sequence, CR rewrites the line), DEL, the C1 controls
/// (U+009B is an 8-bit CSI) and the bidirectional embeddings, overrides and isolates.
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{00}'..='\u{08}'
        | '\u{0b}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// `text` with every unsafe character written as a visible escape (`\u{1b}`, `\r`,
/// `\u{202e}`); Windows line ends become plain newlines. Safe text is borrowed unchanged.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        if is_unsafe(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` on one line: [`for_terminal`], with newlines and tabs shown as `\n` and `\t`, for a
/// spinner's message or a table cell.
pub fn one_line(text: &str) -> String {
    for_terminal(text).replace('\n', "\\n").replace('\t', "\\t")
}

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

/// `value` as one line of JSON, without the newline: serde_json's compact output, except that
/// what it leaves raw of the unsafe characters (DEL, the C1 controls, the bidirectional marks)
/// is written as `\uXXXX` escapes, which a JSON parser reads back unchanged.
pub fn json_line<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, TerminalSafeFormatter);
    if let Err(error) = value.serialize(&mut serializer) {
        // A value that does not serialize is said so in JSON rather than printed as half a line.
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
    fn escape_sequences_become_visible() {
        assert_eq!(
            for_terminal("\u{1b}]0;pwned\u{7}\u{1b}[2Jdone"),
            "\\u{1b}]0;pwned\\u{7}\\u{1b}[2Jdone"
        );
        assert_eq!(for_terminal("a\u{9b}31mb"), "a\\u{9b}31mb");
        assert_eq!(
            for_terminal("invoice\u{202e}txt.exe"),
            "invoice\\u{202e}txt.exe"
        );
        assert_eq!(for_terminal("x\u{2066}y\u{2069}"), "x\\u{2066}y\\u{2069}");
        assert_eq!(for_terminal("fake\rreal"), "fake\\rreal");
    }

    #[test]
    fn ordinary_text_is_untouched() {
        for text in [
            "plain",
            "tabs\tand\nnewlines",
            "ünïcödé ✓ → 中文",
            "עברית",
            "",
        ] {
            assert!(matches!(for_terminal(text), Cow::Borrowed(t) if t == text));
        }
        assert_eq!(for_terminal("windows\r\nline"), "windows\nline");
    }

    proptest! {
        #[test]
        fn nothing_a_terminal_acts_on_survives(text in any::<String>()) {
            let shown = for_terminal(&text);
            prop_assert!(!shown.chars().any(is_unsafe), "{shown:?}");
        }

        #[test]
        fn safe_characters_pass_through_in_order(text in any::<String>()) {
            let kept: String = text.chars().filter(|c| !is_unsafe(*c)).collect();
            let shown: String = for_terminal(&text)
                .chars()
                .filter(|c| !is_unsafe(*c))
                .collect();
            // Escapes only add characters: what was safe is still there, in order.
            let mut rest = shown.chars();
            prop_assert!(kept.chars().all(|c| rest.any(|s| s == c)), "{shown:?}");
        }
    }

    #[test]
    fn one_line_keeps_everything_on_one_line() {
        assert_eq!(one_line("a\nb\tc\u{1b}"), "a\\nb\\tc\\u{1b}");
    }

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

    proptest! {
        #[test]
        fn one_line_is_one_safe_line(text in any::<String>()) {
            let line = one_line(&text);
            prop_assert!(!line.contains('\n') && !line.chars().any(is_unsafe), "{line:?}");
        }
    }
}
