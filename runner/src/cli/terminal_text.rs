//! Text shown to a person on a terminal.
//!
//! Model answers, tool output, file names and error messages are untrusted: a tool result
//! holding `ESC ] 0 ; title BEL` sets the window title, `ESC [ 2 J` clears the screen, and a
//! right-to-left override makes `txt.exe` read as `exe.txt`. Everything printed for a person
//! goes through `for_terminal`, which shows such characters as visible escapes instead of
//! letting the terminal act on them. `--json` output stays JSON: see `json_line`.

use std::borrow::Cow;

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
}
