//! PPTX to Markdown: one `## Slide <n>` section per slide (`ppt/slides/slide<n>.xml`, in
//! slide-number order), each text paragraph of the slide on its own line.

use super::limits::Output;
use super::ooxml::{Node, Package, local_name, walk};

const SLIDES: &str = "ppt/slides/slide";

/// Converts a PPTX package; the error is the reason it could not be.
pub(super) fn convert(bytes: &[u8]) -> Result<Output, String> {
    let mut package = Package::open(bytes, "PPTX")?;
    let mut slides: Vec<(u32, String)> = package
        .names()
        .into_iter()
        .filter_map(|name| {
            let number = name
                .strip_prefix(SLIDES)?
                .strip_suffix(".xml")?
                .parse()
                .ok()?;
            Some((number, name))
        })
        .collect();
    if slides.is_empty() {
        return Err("not a PPTX file (no ppt/slides/slide<n>.xml)".to_owned());
    }
    slides.sort();
    let mut output = Output::new();
    for (number, name) in slides {
        let xml = package.read_text(&name)?;
        let paragraphs = slide_paragraphs(&xml).map_err(|error| format!("{name}: {error}"))?;
        let mut section = format!("## Slide {number}\n\n");
        for paragraph in paragraphs {
            section.push_str(&paragraph);
            section.push('\n');
        }
        section.push('\n');
        if !output.push(&section) {
            break;
        }
    }
    Ok(output)
}

/// The non-empty text paragraphs (`<a:p>`, runs `<a:t>`) of one slide.
fn slide_paragraphs(xml: &str) -> Result<Vec<String>, String> {
    let mut paragraphs = Vec::new();
    let mut current = String::new();
    let mut in_text = false;
    walk(xml, |node| {
        match node {
            Node::Open(start) if local_name(start) == "t" => in_text = true,
            Node::Empty(start) if local_name(start) == "br" => current.push(' '),
            Node::Close("t") => in_text = false,
            Node::Close("p") => {
                let text = std::mem::take(&mut current);
                if !text.trim().is_empty() {
                    paragraphs.push(text.trim().to_owned());
                }
            }
            Node::Text(text) if in_text => current.push_str(&text),
            _ => {}
        }
        true
    })?;
    Ok(paragraphs)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::convert::ooxml::tests::zip_of;

    /// A minimal PPTX whose slides hold `slides` (each a list of paragraphs).
    pub(crate) fn pptx(slides: &[&[&str]]) -> Vec<u8> {
        let xmls: Vec<(String, String)> = slides
            .iter()
            .enumerate()
            .map(|(index, paragraphs)| {
                let body: String = paragraphs
                    .iter()
                    .map(|text| format!("<a:p><a:r><a:t>{text}</a:t></a:r></a:p>"))
                    .collect();
                (
                    format!("ppt/slides/slide{}.xml", index + 1),
                    format!(
                        "<?xml version=\"1.0\"?><p:sld \
                         xmlns:a=\"http://schemas.openxmlformats.org/drawingml/2006/main\" \
                         xmlns:p=\"http://schemas.openxmlformats.org/presentationml/2006/main\">\
                         <p:cSld><p:spTree><p:sp><p:txBody>{body}</p:txBody></p:sp>\
                         </p:spTree></p:cSld></p:sld>"
                    ),
                )
            })
            .collect();
        let mut entries: Vec<(&str, &[u8])> = vec![("[Content_Types].xml", b"<Types/>")];
        // Reverse archive order: slides are ordered by number, not by where they sit.
        for (name, xml) in xmls.iter().rev() {
            entries.push((name.as_str(), xml.as_bytes()));
        }
        zip_of(&entries)
    }

    #[test]
    fn slides_become_sections_in_number_order() {
        let mut slides: Vec<&[&str]> = vec![&["Roadmap", "Ship &amp; measure"], &["Thanks"]];
        let filler: Vec<&[&str]> = (0..9).map(|_| &["x"][..]).collect();
        slides.extend(filler);
        let (text, note) = convert(&pptx(&slides)).unwrap().finish();
        assert!(
            text.starts_with(
                "## Slide 1\n\nRoadmap\nShip & measure\n\n## Slide 2\n\nThanks\n\n## Slide 3\n"
            ),
            "{text}"
        );
        assert!(text.contains("## Slide 11\n"), "{text}");
        assert_eq!(note, None);
    }

    #[test]
    fn a_zip_without_slides_is_refused() {
        let error = convert(&zip_of(&[("word/document.xml", b"<x/>")])).unwrap_err();
        assert!(error.starts_with("not a PPTX file"), "{error}");
    }
}
