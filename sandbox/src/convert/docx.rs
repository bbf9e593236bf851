//! DOCX to Markdown: the paragraphs of `word/document.xml` in order, headings from their
//! `Heading<n>`/`Title` styles, list items as `- `, tables as Markdown tables.

use super::limits::Output;
use super::ooxml::{Node, Package, attribute, local_name, walk};

const DOCUMENT: &str = "word/document.xml";

/// Converts a DOCX package; the error is the reason it could not be.
pub(super) fn convert(bytes: &[u8]) -> Result<Output, String> {
    let mut package = Package::open(bytes, "DOCX")?;
    if !package.has(DOCUMENT) {
        return Err(format!("not a DOCX file (no {DOCUMENT})"));
    }
    let xml = package.read_text(DOCUMENT)?;
    let mut writer = Writer::default();
    walk(&xml, |node| writer.visit(node))?;
    writer.flush_paragraph();
    Ok(writer.output)
}

/// The walk's state: the paragraph being read and the table it sits in.
#[derive(Default)]
struct Writer {
    output: Output,
    paragraph: String,
    heading: Option<usize>,
    list_item: bool,
    in_text: bool,
    /// Table nesting: only the outermost table is laid out, inner ones flatten into its cell.
    table_depth: usize,
    row: Vec<String>,
    rows_written: usize,
}

impl Writer {
    fn visit(&mut self, node: Node<'_>) -> bool {
        match node {
            Node::Open(start) => match local_name(start).as_ref() {
                "t" => self.in_text = true,
                "tbl" => {
                    self.flush_paragraph();
                    self.table_depth += 1;
                    if self.table_depth == 1 {
                        self.rows_written = 0;
                    }
                }
                "tr" if self.table_depth == 1 => self.row.clear(),
                "tc" if self.table_depth == 1 => self.row.push(String::new()),
                _ => self.mark(start),
            },
            Node::Empty(start) => self.mark(start),
            Node::Close(name) => match name {
                "t" => self.in_text = false,
                "p" => return self.end_paragraph(),
                "tr" if self.table_depth == 1 => return self.end_row(),
                "tbl" => {
                    self.table_depth = self.table_depth.saturating_sub(1);
                    if self.table_depth == 0 {
                        return self.output.push("\n");
                    }
                }
                _ => {}
            },
            Node::Text(text) if self.in_text => self.paragraph.push_str(&text),
            Node::Text(_) => {}
        }
        true
    }

    /// Properties and inline marks, whether written `<x/>` or `<x>...</x>`.
    fn mark(&mut self, start: &quick_xml::events::BytesStart<'_>) {
        match local_name(start).as_ref() {
            "pStyle" => {
                self.heading = attribute(start, "val").and_then(|style| heading_level(&style));
            }
            "numPr" => self.list_item = true,
            "tab" => self.paragraph.push('\t'),
            "br" | "cr" => self.paragraph.push(' '),
            _ => {}
        }
    }

    /// A paragraph ends: into the current table cell, or as a Markdown block.
    fn end_paragraph(&mut self) -> bool {
        if self.table_depth > 0 {
            let text = std::mem::take(&mut self.paragraph);
            if let Some(cell) = self.row.last_mut() {
                if !cell.is_empty() && !text.trim().is_empty() {
                    cell.push(' ');
                }
                cell.push_str(text.trim());
            }
            self.heading = None;
            self.list_item = false;
            return true;
        }
        self.flush_paragraph()
    }

    fn flush_paragraph(&mut self) -> bool {
        let text = std::mem::take(&mut self.paragraph);
        let heading = self.heading.take();
        let list_item = std::mem::take(&mut self.list_item);
        let text = text.trim();
        if text.is_empty() {
            return !self.output.is_full();
        }
        let block = match (heading, list_item) {
            (Some(level), _) => format!("{} {text}\n\n", "#".repeat(level)),
            (None, true) => format!("- {text}\n"),
            (None, false) => format!("{text}\n\n"),
        };
        self.output.push(&block)
    }

    fn end_row(&mut self) -> bool {
        let cells: Vec<String> = self.row.drain(..).map(|cell| table_cell(&cell)).collect();
        if cells.is_empty() {
            return true;
        }
        let mut line = format!("| {} |\n", cells.join(" | "));
        if self.rows_written == 0 {
            line.push_str(&format!("|{}\n", " --- |".repeat(cells.len())));
        }
        self.rows_written += 1;
        self.output.push(&line)
    }
}

/// `Heading1`..`Heading6` and `Title` (Word's built-in style ids) as a heading level.
fn heading_level(style: &str) -> Option<usize> {
    if style.eq_ignore_ascii_case("title") {
        return Some(1);
    }
    let level: usize = style.strip_prefix("Heading")?.parse().ok()?;
    (1..=6).contains(&level).then_some(level)
}

/// A cell's text safe inside a Markdown table row.
pub(super) fn table_cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::convert::ooxml::tests::zip_of;

    /// A minimal DOCX around `body` (the children of `<w:body>`).
    pub(crate) fn docx(body: &str) -> Vec<u8> {
        let document = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
             <w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">\
             <w:body>{body}</w:body></w:document>"
        );
        zip_of(&[
            ("[Content_Types].xml", CONTENT_TYPES.as_bytes()),
            ("word/document.xml", document.as_bytes()),
        ])
    }

    const CONTENT_TYPES: &str = "<?xml version=\"1.0\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">\
        <Override PartName=\"/word/document.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/></Types>";

    pub(crate) fn paragraph(style: Option<&str>, text: &str) -> String {
        let properties = style
            .map(|style| format!("<w:pPr><w:pStyle w:val=\"{style}\"/></w:pPr>"))
            .unwrap_or_default();
        format!("<w:p>{properties}<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>")
    }

    fn markdown(bytes: &[u8]) -> String {
        convert(bytes).unwrap().finish().0
    }

    #[test]
    fn headings_paragraphs_lists_and_tables_become_markdown() {
        let table = "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Name</w:t></w:r></w:p></w:tc>\
             <w:tc><w:p><w:r><w:t>Score</w:t></w:r></w:p></w:tc></w:tr>\
             <w:tr><w:tc><w:p><w:r><w:t>a|b</w:t></w:r></w:p></w:tc>\
             <w:tc><w:p><w:r><w:t>9</w:t></w:r></w:p></w:tc></w:tr></w:tbl>";
        let list = "<w:p><w:pPr><w:numPr><w:ilvl w:val=\"0\"/></w:numPr></w:pPr>\
             <w:r><w:t>first point</w:t></w:r></w:p>";
        let body = format!(
            "{}{}{}{list}{table}",
            paragraph(Some("Title"), "Quarterly report"),
            paragraph(Some("Heading2"), "Results"),
            paragraph(None, "Revenue grew &amp; costs fell."),
        );
        let text = markdown(&docx(&body));
        assert_eq!(
            text,
            "# Quarterly report\n\n## Results\n\nRevenue grew & costs fell.\n\n- first point\n\
             | Name | Score |\n| --- | --- |\n| a\\|b | 9 |\n\n"
        );
    }

    #[test]
    fn deep_nesting_and_missing_parts_are_refused() {
        let nested = format!(
            "{}{}",
            "<w:sdt>".repeat(100_000),
            "</w:sdt>".repeat(100_000)
        );
        let error = convert(&docx(&nested)).unwrap_err();
        assert!(error.contains("nests deeper than 256"), "{error}");
        let error = convert(&zip_of(&[("a.txt", b"a")])).unwrap_err();
        assert_eq!(error, "not a DOCX file (no word/document.xml)");
    }

    #[test]
    fn a_long_document_is_cut_at_the_output_cap() {
        let body = paragraph(None, &"lorem ipsum ".repeat(2000)).repeat(200);
        let (text, note) = convert(&docx(&body)).unwrap().finish();
        assert!(text.len() <= crate::convert::limits::MAX_OUTPUT_BYTES + 200);
        assert!(note.is_some());
    }
}
