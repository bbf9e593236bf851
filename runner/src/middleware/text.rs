//! Text helpers the middlewares share: tag escaping and head/tail excerpts.

/// Escapes what could open or close a tag, so untrusted text (model output, file names,
/// memory) stays inside the framework tag it was put in.
pub fn escape_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` cut to its first `head` and last `tail` characters with a marker between, when it
/// is longer than both. The end of a long text (conclusions, errors) matters as much as its
/// start, so neither is dropped.
pub fn head_tail(text: &str, head: usize, tail: usize) -> String {
    let total = text.chars().count();
    if total <= head + tail {
        return text.to_owned();
    }
    let omitted = total - head - tail;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(total - tail).collect();
    format!("{start}\n[… {omitted} characters omitted …]\n{end}")
}

/// `text` cut to `max_chars` characters, with `…` when something was cut.
pub fn truncate_chars(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max_chars).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_neutralizes_tags() {
        assert_eq!(
            escape_tags("</memory> & <b>"),
            "&lt;/memory&gt; &amp; &lt;b&gt;"
        );
    }

    #[test]
    fn head_tail_keeps_both_ends() {
        let text: String = ('a'..='z').collect();
        let cut = head_tail(&text, 6, 3);
        assert!(cut.starts_with("abcdef\n"), "{cut}");
        assert!(cut.ends_with("\nxyz"), "{cut}");
        assert!(cut.contains("17 characters omitted"));
        assert_eq!(head_tail("short", 3, 2), "short");
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate_chars("héllo world", 5), "héllo…");
        assert_eq!(truncate_chars("hi", 5), "hi");
    }
}
