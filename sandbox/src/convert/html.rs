//! HTML to Markdown with html2text (the renderer `web_fetch` uses): headings as `#`,
//! emphasis, lists, links as footnotes, tables laid out. Scripts and styles are dropped.

use super::limits::Output;

/// Wide enough that prose is not hard-wrapped; tables still get a bounded layout.
const RENDER_WIDTH: usize = 400;

/// Converts an HTML document; the error is the reason it could not be.
pub(super) fn convert(bytes: &[u8]) -> Result<Output, String> {
    let text = html2text::config::plain()
        .string_from_read(bytes, RENDER_WIDTH)
        .map_err(|error| format!("the HTML could not be rendered: {error}"))?;
    let mut output = Output::new();
    let mut blank_run = 0;
    for line in text.lines() {
        let line = line.trim_end();
        blank_run = if line.is_empty() { blank_run + 1 } else { 0 };
        if blank_run > 1 {
            continue;
        }
        if !output.push(line) || !output.push("\n") {
            break;
        }
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_lists_and_text_are_kept_and_scripts_dropped() {
        let html = b"<html><head><title>T</title><script>alert(1)</script></head><body>\
            <h1>Release notes</h1><p>Faster <b>builds</b>.</p><ul><li>one</li><li>two</li></ul>\
            </body></html>";
        let (text, _) = convert(html).unwrap().finish();
        assert!(text.contains("# Release notes"), "{text}");
        assert!(text.contains("Faster **builds**."), "{text}");
        assert!(text.contains("* one\n* two"), "{text}");
        assert!(!text.contains("alert"), "{text}");
    }
}
