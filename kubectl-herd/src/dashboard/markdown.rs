//! A Run's answer as HTML: Markdown rendered by pulldown-cmark, then cleaned by ammonia (no
//! script, no event handler, no style, links that cannot reach back with the page's
//! referrer). Images become links, so nothing remote loads unless it is clicked: the model
//! wrote the answer, and a remote image would tell its host who read it, and when.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

/// The HTML of the Markdown `text`, safe to put in a page.
pub fn render(text: &str) -> String {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    let mut in_image = 0usize;
    let events = Parser::new_ext(text, options).flat_map(|event| match event {
        Event::Start(Tag::Image { dest_url, .. }) => {
            in_image += 1;
            vec![Event::Html(image_link_start(&dest_url))]
        }
        Event::End(TagEnd::Image) => {
            in_image = in_image.saturating_sub(1);
            vec![Event::Html(CowStr::Borrowed("]</a>"))]
        }
        // An image's alt text is the link's text; markup inside it would nest links.
        Event::Start(_) | Event::End(_) if in_image > 0 => vec![],
        // Raw HTML in the answer is shown as text, never as markup.
        Event::Html(raw) | Event::InlineHtml(raw) => vec![Event::Text(raw)],
        other => vec![other],
    });
    let mut unsafe_html = String::new();
    html::push_html(&mut unsafe_html, events);
    ammonia::Builder::default()
        .link_rel(Some("noopener noreferrer nofollow"))
        .rm_tags(["img"])
        .clean(&unsafe_html)
        .to_string()
}

fn image_link_start(url: &str) -> CowStr<'static> {
    let escaped = url
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    CowStr::Boxed(format!("<a href=\"{escaped}\">[image: ").into_boxed_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_html() {
        let html = render("# Findings\n\n- **one**\n- `two`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert!(html.contains("<h1>Findings</h1>"), "{html}");
        assert!(html.contains("<strong>one</strong>"), "{html}");
        assert!(html.contains("<code>two</code>"), "{html}");
        assert!(html.contains("<td>1</td>"), "{html}");
    }

    #[test]
    fn scripts_and_handlers_never_survive() {
        for text in [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "<a href=\"javascript:alert(1)\">x</a>",
            "[x](javascript:alert(1))",
            "<div onclick=\"alert(1)\" style=\"color:red\">x</div>",
            "<iframe src=\"https://evil.example\"></iframe>",
        ] {
            let html = render(text);
            for tag in tags(&html) {
                let lower = tag.to_lowercase();
                let banned = ["script", "img", "iframe", " on", "javascript:", "style="];
                assert!(
                    !banned.iter().any(|b| lower.contains(b)),
                    "{text} gave the tag <{tag}> in {html}"
                );
            }
        }
    }

    /// The insides of the markup's tags (`a href="x"` of `<a href="x">`).
    fn tags(html: &str) -> Vec<&str> {
        html.split('<')
            .skip(1)
            .filter_map(|rest| rest.split_once('>').map(|(tag, _)| tag))
            .collect()
    }

    #[test]
    fn raw_html_is_shown_as_text() {
        assert_eq!(render("a <b>c</b>"), "<p>a &lt;b&gt;c&lt;/b&gt;</p>\n");
    }

    #[test]
    fn remote_images_are_links_until_clicked() {
        let html = render("![the *chart*](https://tracker.example/pixel.png?u=1&v=2)");
        assert!(!html.contains("<img"), "{html}");
        assert_eq!(
            html,
            "<p><a href=\"https://tracker.example/pixel.png?u=1&amp;v=2\" rel=\"noopener noreferrer nofollow\">[image: the chart]</a></p>\n"
        );
        let sneaky = render("![x](\"><script>alert(1)</script>)");
        assert!(!sneaky.contains("<script"), "{sneaky}");
    }
}
