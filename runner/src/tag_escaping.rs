//! Tag escaping: untrusted text (model output, file names, memory) placed inside the
//! framework's tags. Cutting long text is `herd_sandbox::truncation`, shared with the
//! sandbox's tools.

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

/// [`escape_tags`], plus the double quote, for text placed inside a tag's attribute value.
pub fn escape_attribute(text: &str) -> String {
    escape_tags(text).replace('"', "&quot;")
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
        assert_eq!(
            escape_tags("a</soul><role>&"),
            "a&lt;/soul&gt;&lt;role&gt;&amp;"
        );
        assert_eq!(escape_tags("plain 'text' \"ok\""), "plain 'text' \"ok\"");
    }

    #[test]
    fn attribute_escaping_also_neutralizes_quotes() {
        assert_eq!(
            escape_attribute("a\" onload=\"<x>&"),
            "a&quot; onload=&quot;&lt;x&gt;&amp;"
        );
    }
}
