//! HTML to text a model can read: the page's title and its visible text, links as footnotes.

use std::sync::LazyLock;

use regex::{Captures, Regex};
use reqwest::Url;

/// Wide enough that prose is never hard-wrapped (each wrap costs the model a newline token);
/// tables still get a bounded layout.
const RENDER_WIDTH: usize = 400;

/// Titles longer than this are cut; a title is a label, not content.
const MAX_TITLE_CHARS: usize = 300;

/// A page converted to text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageText {
    pub title: Option<String>,
    pub text: String,
}

static TITLE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?is)<title\b[^>]*>(.*?)</title\s*>").ok());

/// A link footnote line as html2text writes it: `[3]: /docs/intro`.
static FOOTNOTE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?m)^(\[\d+\]: )(\S+)$").ok());

/// Converts an HTML document (scripts, styles and the head dropped) to plain text. With
/// `base`, relative links become absolute, so the model can fetch them as they are.
pub fn html_to_text(html: &[u8], base: Option<&Url>) -> Result<PageText, String> {
    let text = html2text::config::plain()
        .no_table_borders()
        .string_from_read(html, RENDER_WIDTH)
        .map_err(|error| format!("could not convert the HTML page to text: {error}"))?;
    let text = tidy(&text);
    let text = match (base, FOOTNOTE.as_ref()) {
        (Some(base), Some(footnote)) => footnote
            .replace_all(&text, |caps: &Captures| {
                let target = base
                    .join(&caps[2])
                    .map(String::from)
                    .unwrap_or_else(|_| caps[2].to_owned());
                format!("{}{target}", &caps[1])
            })
            .into_owned(),
        _ => text,
    };
    Ok(PageText {
        title: title(html),
        text,
    })
}

/// The document's `<title>`, entities decoded and whitespace collapsed.
fn title(html: &[u8]) -> Option<String> {
    let source = String::from_utf8_lossy(html);
    let raw = TITLE.as_ref()?.captures(&source)?.get(1)?.as_str();
    // The title is RCDATA: entities but no tags, so rendering it as a paragraph decodes it.
    let decoded = html2text::config::plain_no_decorate()
        .string_from_read(format!("<p>{raw}</p>").as_bytes(), RENDER_WIDTH)
        .unwrap_or_else(|_| raw.to_owned());
    let collapsed = decoded.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return None;
    }
    Some(match collapsed.char_indices().nth(MAX_TITLE_CHARS) {
        Some((end, _)) => format!("{}…", &collapsed[..end]),
        None => collapsed,
    })
}

/// Drops trailing spaces and runs of blank lines, which carry no meaning for a model.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 || out.is_empty() {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<!doctype html>
<html><head>
  <title>  Rust &amp; Kubernetes
     Guide </title>
  <style>body { color: red; }</style>
  <script>var secret = "tracking";</script>
</head><body>
  <h1>Getting started</h1>
  <p>Herd runs <b>agents</b> on clusters. See <a href="https://example.com/docs">the docs</a>.</p>



  <ul><li>first</li><li>second</li></ul>
  <script>alert("x")</script>
</body></html>"#;

    #[test]
    fn converts_page_keeping_title_dropping_scripts_and_styles() {
        let page = html_to_text(PAGE.as_bytes(), None).unwrap();
        assert_eq!(page.title.as_deref(), Some("Rust & Kubernetes Guide"));
        insta::assert_snapshot!(page.text);
        assert!(!page.text.contains("tracking"));
        assert!(!page.text.contains("color: red"));
        assert!(!page.text.contains("alert"));
    }

    #[test]
    fn missing_or_empty_title_is_none() {
        assert_eq!(html_to_text(b"<p>hi</p>", None).unwrap().title, None);
        assert_eq!(
            html_to_text(b"<title>  </title><p>hi</p>", None)
                .unwrap()
                .title,
            None
        );
    }

    #[test]
    fn long_titles_are_cut() {
        let html = format!("<title>{}</title>", "é".repeat(1000));
        let title = html_to_text(html.as_bytes(), None).unwrap().title.unwrap();
        assert_eq!(title.chars().count(), MAX_TITLE_CHARS + 1);
    }

    #[test]
    fn resolves_relative_links_against_the_base() {
        let html = br#"<p><a href="/a">root</a> <a href="b?x=1">rel</a>
            <a href="https://other.org/c">abs</a> <a href="mailto:x@y.z">mail</a></p>"#;
        let base = Url::parse("https://example.com/docs/page").unwrap();
        let text = html_to_text(html, Some(&base)).unwrap().text;
        assert!(text.contains("[1]: https://example.com/a\n"), "{text}");
        assert!(
            text.contains("[2]: https://example.com/docs/b?x=1\n"),
            "{text}"
        );
        assert!(text.contains("[3]: https://other.org/c\n"), "{text}");
        assert!(text.ends_with("[4]: mailto:x@y.z"), "{text}");
    }

    #[test]
    fn tidy_collapses_blank_runs() {
        assert_eq!(tidy("\n\na  \n\n\n\nb\n\n"), "a\n\nb");
    }
}
