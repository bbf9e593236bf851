//! Text from a Run shown to a person: the agent's answer, questions, todos and titles, and
//! the API server's messages, are untrusted. `ESC ] 0 ; title BEL` would set the window title,
//! `ESC [ 2 J` clear the screen, a right-to-left override make `txt.exe` read as `exe.txt`.
//! Everything printed passes through [`for_terminal`], which shows such characters as visible
//! escapes, by the same rules as `herd-runner run`.

use std::borrow::Cow;

/// Whether a terminal could act on `c` rather than show it: C0 controls other than newline
/// and tab, DEL, the C1 controls (U+009B is an 8-bit CSI) and the bidirectional embeddings,
/// overrides and isolates.
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{00}'..='\u{08}'
        | '\u{0b}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// `text` with every unsafe character written as a visible escape (`\u{1b}`, `\r`); Windows
/// line ends become plain newlines. Safe text is borrowed unchanged.
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

/// `value` as one line of JSON that no terminal acts on: what serde leaves as is of the unsafe
/// characters (DEL, C1 controls, bidirectional marks) written as `\uXXXX` escapes, which JSON
/// readers decode back. They can only stand inside strings, so the JSON stays valid.
pub fn json_line(value: &serde_json::Value) -> String {
    let line = value.to_string();
    if !line.chars().any(is_unsafe) {
        return line;
    }
    let mut out = String::with_capacity(line.len() + 16);
    for c in line.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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
        assert_eq!(for_terminal("fake\rreal"), "fake\\rreal");
    }

    #[test]
    fn ordinary_text_is_untouched() {
        for text in ["plain", "tabs\tand\nnewlines", "ünïcödé ✓ → 中文", ""] {
            assert!(matches!(for_terminal(text), Cow::Borrowed(t) if t == text));
        }
        assert_eq!(for_terminal("windows\r\nline"), "windows\nline");
    }

    #[test]
    fn one_line_keeps_everything_on_one_line() {
        assert_eq!(one_line("a\nb\tc\u{1b}"), "a\\nb\\tc\\u{1b}");
    }

    #[test]
    fn json_lines_stay_json_and_safe() {
        let value = serde_json::json!({"q": "a\u{7f}b\u{202e}c\u{1b}d\nline"});
        let line = json_line(&value);
        assert!(
            !line.chars().any(is_unsafe) && !line.contains('\n'),
            "{line}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&line).unwrap(),
            value
        );
    }

    proptest! {
        #[test]
        fn json_lines_round_trip(text in any::<String>()) {
            let value = serde_json::json!({"text": text});
            let line = json_line(&value);
            prop_assert!(!line.chars().any(is_unsafe));
            prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&line).unwrap(), value);
        }

        #[test]
        fn nothing_unsafe_survives(text in any::<String>()) {
            prop_assert!(!for_terminal(&text).chars().any(is_unsafe));
            let line = one_line(&text);
            prop_assert!(!line.contains('\n') && !line.chars().any(is_unsafe));
        }
    }
}
