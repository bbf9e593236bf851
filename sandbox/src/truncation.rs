//! Cutting long text with one marker. Every place that shortens text for a model (tool
//! output, summaries, memory, briefs), in the sandbox's tools and in the runner alike, marks the
//! cut the same way, so the model learns one sign for "something is missing here".

/// The one marker for characters cut from the middle of a text.
pub fn omission_marker(omitted: usize) -> String {
    format!("[… {omitted} characters omitted …]")
}

/// `front` and `back` joined by the marker for `omitted` characters cut between them.
fn around_cut(front: &str, omitted: usize, back: &str) -> String {
    format!("{front}\n{}\n{back}", omission_marker(omitted))
}

/// `text` cut to its first `head` and last `tail` characters with a marker between, when it
/// is longer than both. The end of a long text (conclusions, errors) matters as much as its
/// start, so neither is dropped.
pub fn head_tail(text: &str, head: usize, tail: usize) -> String {
    let total = text.chars().count();
    if total <= head + tail {
        return text.to_owned();
    }
    around_cut(
        take_chars(text, head),
        total - head - tail,
        last_chars(text, tail),
    )
}

/// Keeps the first and last `max_chars / 2` characters of `head ++ <omitted chars> ++ tail`,
/// with the marker saying how many were cut. `omitted` counts characters already dropped
/// between `head` and `tail` (a bounded capture); pass 0 and `""` for plain text.
pub fn truncate_middle(head: &str, omitted: usize, tail: &str, max_chars: usize) -> String {
    let head_chars = head.chars().count();
    let tail_chars = tail.chars().count();
    let total = head_chars + omitted + tail_chars;
    if total <= max_chars {
        return format!("{head}{tail}");
    }
    let keep_front = max_chars / 2;
    let keep_back = max_chars - keep_front;
    let (front, back) = if omitted == 0 {
        let whole = format!("{head}{tail}");
        (
            take_chars(&whole, keep_front).to_owned(),
            last_chars(&whole, keep_back).to_owned(),
        )
    } else {
        (
            take_chars(head, keep_front).to_owned(),
            last_chars(tail, keep_back).to_owned(),
        )
    };
    let cut = total - front.chars().count() - back.chars().count();
    around_cut(&front, cut, &back)
}

/// `text` cut to `max_chars` characters, with `…` when something was cut.
pub fn truncate_chars(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut out = take_chars(text, max_chars).to_owned();
    out.push('…');
    out
}

/// Cuts `text` to at most `max` characters at a word boundary, marking the cut with `…`.
pub fn truncate_words(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let keep = max.saturating_sub(1);
    let head = take_chars(text, keep);
    let at_word_end = text.chars().nth(keep).is_some_and(char::is_whitespace);
    let head = match head.rfind(' ') {
        Some(space) if space > 0 && !at_word_end => &head[..space],
        _ => head,
    };
    format!("{}…", head.trim_end_matches([',', ';', ':', '.', '-', ' ']))
}

/// `text` cut to `max_chars` with `note` on its own line when something was cut: the note
/// tells the model how to get the rest.
pub fn truncate_end(text: String, max_chars: usize, note: &str) -> String {
    if text.chars().count() <= max_chars {
        return text;
    }
    format!("{}\n{note}", take_chars(&text, max_chars))
}

/// The first `n` characters of `text`.
pub fn take_chars(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((index, _)) => &text[..index],
        None => text,
    }
}

/// The last `n` characters of `text`.
pub fn last_chars(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    match text.char_indices().rev().nth(n - 1) {
        Some((index, _)) => &text[index..],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn head_tail_keeps_both_ends() {
        let text: String = ('a'..='z').collect();
        let cut = head_tail(&text, 6, 3);
        assert_eq!(cut, "abcdef\n[… 17 characters omitted …]\nxyz");
        assert_eq!(head_tail("short", 3, 2), "short");
    }

    #[test]
    fn middle_truncation_keeps_both_ends_and_counts_the_cut() {
        let text = format!("{}{}{}", "a".repeat(10), "m".repeat(40), "z".repeat(10));
        let out = truncate_middle(&text, 0, "", 20);
        assert_eq!(
            out,
            format!(
                "{}\n[… 40 characters omitted …]\n{}",
                "a".repeat(10),
                "z".repeat(10)
            )
        );
        assert_eq!(truncate_middle("short", 0, "", 20), "short");
    }

    #[test]
    fn middle_truncation_counts_characters_dropped_during_capture() {
        let out = truncate_middle(&"é".repeat(15), 100, &"z".repeat(15), 20);
        assert!(out.starts_with(&"é".repeat(10)));
        assert!(out.ends_with(&"z".repeat(10)));
        assert!(out.contains("[… 110 characters omitted …]"));
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate_chars("héllo world", 5), "héllo…");
        assert_eq!(truncate_chars("hi", 5), "hi");
        assert_eq!(
            truncate_end("abcdef".into(), 3, "[read on]"),
            "abc\n[read on]"
        );
        assert_eq!(truncate_end("abc".into(), 3, "[read on]"), "abc");
    }

    #[test]
    fn truncates_at_word_boundaries() {
        assert_eq!(truncate_words("short", 10), "short");
        assert_eq!(
            truncate_words("Analyze CSV data, then chart it", 20),
            "Analyze CSV data…"
        );
        assert_eq!(
            truncate_words("Analyze CSV data, then chart it", 23),
            "Analyze CSV data, then…"
        );
        assert!(truncate_words(&"ü".repeat(50), 10).chars().count() <= 10);
    }

    #[test]
    fn char_slices_respect_multibyte_characters() {
        assert_eq!(take_chars("héllo", 2), "hé");
        assert_eq!(last_chars("héllo", 4), "éllo");
        assert_eq!(last_chars("hé", 5), "hé");
        assert_eq!(last_chars("hé", 0), "");
    }

    proptest! {
        #[test]
        fn head_tail_never_exceeds_its_budget_plus_marker(text in "\\PC{0,200}", head in 0usize..60, tail in 0usize..60) {
            let cut = head_tail(&text, head, tail);
            let total = text.chars().count();
            if total <= head + tail {
                prop_assert_eq!(cut, text);
            } else {
                let marker = omission_marker(total - head - tail);
                prop_assert_eq!(cut.chars().count(), head + tail + marker.chars().count() + 2);
                prop_assert!(cut.contains(&marker));
            }
        }

        #[test]
        fn middle_truncation_keeps_at_most_max_chars_of_text(text in "\\PC{0,300}", max in 0usize..100) {
            let out = truncate_middle(&text, 0, "", max);
            let total = text.chars().count();
            if total <= max {
                prop_assert_eq!(out, text);
            } else {
                let marker = omission_marker(total - max);
                prop_assert_eq!(out.chars().count(), max + marker.chars().count() + 2);
            }
        }
    }
}
