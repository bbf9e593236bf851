//! PDF to Markdown: the text of each page (pdf-extract over lopdf), pages apart by an HTML
//! comment `<!-- page <n> -->`, the first [`MAX_PDF_PAGES`] pages only.
//!
//! lopdf inflates streams whole (object streams while loading), so before it sees the file
//! every Flate stream in the raw bytes is inflated once into nothing, within the caps: a
//! stream that inflates past them refuses the document before any parser allocates for it.
//! A page that fails or panics is named in a note; the others are still converted.

use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};

use flate2::read::{DeflateDecoder, ZlibDecoder};
use lopdf::Document;

use super::limits::{InflateBudget, MAX_PART_BYTES, MAX_PDF_PAGES, Output, mib};

/// The PDF header must start within the first KiB (the specification's allowance for junk
/// before it).
const HEADER_WINDOW: usize = 1024;

/// Whether `bytes` look like a PDF (`%PDF-` near the start).
pub(super) fn has_header(bytes: &[u8]) -> bool {
    let window = &bytes[..bytes.len().min(HEADER_WINDOW)];
    memchr::memmem::find(window, b"%PDF-").is_some()
}

/// Converts a PDF; the error is the reason it could not be.
pub(super) fn convert(bytes: &[u8]) -> Result<Output, String> {
    if !has_header(bytes) {
        return Err("not a PDF file (no %PDF- header)".to_owned());
    }
    check_streams(bytes)?;
    let mut document =
        Document::load_mem(bytes).map_err(|error| format!("not a readable PDF: {error}"))?;
    if document.is_encrypted() && document.decrypt("").is_err() {
        return Err("the PDF is encrypted with a password".to_owned());
    }
    let pages = document.get_pages();
    if pages.is_empty() {
        return Err("the PDF has no pages".to_owned());
    }
    let mut output = Output::new();
    let mut failed = Vec::new();
    let mut any_text = false;
    for &number in pages.keys().take(MAX_PDF_PAGES) {
        let text = match page_text(&document, number) {
            Ok(text) => text,
            Err(reason) => {
                failed.push(format!("page {number}: {reason}"));
                continue;
            }
        };
        let text = text.trim();
        any_text |= !text.is_empty();
        let piece = if number == 1 {
            format!("{text}\n\n")
        } else {
            format!("<!-- page {number} -->\n\n{text}\n\n")
        };
        if !output.push(&piece) {
            break;
        }
    }
    if !any_text {
        return Err(match failed.first() {
            Some(first) => format!("no page could be read ({first})"),
            None => "the PDF has no text layer (a scan?); nothing to convert".to_owned(),
        });
    }
    if !failed.is_empty() {
        output.push(&format!(
            "[{} pages could not be read: {}]\n",
            failed.len(),
            failed
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if pages.len() > MAX_PDF_PAGES && !output.is_full() {
        output.left_out(format!("first {MAX_PDF_PAGES} of {} pages", pages.len()));
        output.push(&format!(
            "[Conversion stopped after page {MAX_PDF_PAGES} of {}: pages past the first \
             {MAX_PDF_PAGES} are not converted.]\n",
            pages.len()
        ));
    }
    Ok(output)
}

/// One page's text; a parser error or panic becomes the reason.
fn page_text(document: &Document, number: u32) -> Result<String, String> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut text = String::new();
        let mut sink = pdf_extract::PlainTextOutput::new(&mut text);
        pdf_extract::output_doc_page(document, &mut sink, number).map(|()| text)
    }));
    match result {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("the PDF parser failed on it".to_owned()),
    }
}

/// Inflates each `stream ... endstream` body that is Flate (zlib or raw deflate, as lopdf
/// accepts) into nothing, refusing one past [`MAX_PART_BYTES`] or all past the total cap.
fn check_streams(bytes: &[u8]) -> Result<(), String> {
    let mut budget = InflateBudget::default();
    let mut from = 0;
    while let Some(found) = memchr::memmem::find(&bytes[from..], b"stream") {
        let keyword = from + found;
        let mut start = keyword + b"stream".len();
        from = start;
        if keyword >= 3 && &bytes[keyword - 3..keyword] == b"end" {
            continue;
        }
        match bytes.get(start..start + 2) {
            Some(b"\r\n") => start += 2,
            Some([b'\n', _]) | Some([b'\r', _]) => start += 1,
            _ => continue,
        }
        let end = memchr::memmem::find(&bytes[start..], b"endstream")
            .map_or(bytes.len(), |offset| start + offset);
        let body = &bytes[start..end];
        let inflated =
            inflated_size(ZlibDecoder::new(body)).max(inflated_size(DeflateDecoder::new(body)));
        if inflated > MAX_PART_BYTES {
            return Err(format!(
                "a compressed stream inflates past {} (a decompression bomb?)",
                mib(MAX_PART_BYTES)
            ));
        }
        budget.spend(inflated)?;
        from = end;
    }
    Ok(())
}

/// Bytes `decoder` yields before it ends or fails, counted up to one past the part cap.
fn inflated_size(decoder: impl Read) -> u64 {
    let mut limited = decoder.take(MAX_PART_BYTES + 1);
    let mut buffer = [0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match limited.read(&mut buffer) {
            Ok(0) | Err(_) => return total,
            Ok(read) => total += read as u64,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;

    use lopdf::content::{Content, Operation};
    use lopdf::{Object, Stream, dictionary};

    use super::*;

    /// A PDF of `pages` pages, page `n` reading `"<text> <n>"` in Helvetica.
    pub(crate) fn pdf(pages: usize, text: &str) -> Vec<u8> {
        let mut document = Document::with_version("1.5");
        let pages_id = document.new_object_id();
        let font_id = document.add_object(dictionary! {
            "Type" => "Font",
            "Subtype" => "Type1",
            "BaseFont" => "Helvetica",
        });
        let resources_id = document.add_object(dictionary! {
            "Font" => dictionary! { "F1" => font_id },
        });
        let mut kids = Vec::new();
        for number in 1..=pages {
            let content = Content {
                operations: vec![
                    Operation::new("BT", vec![]),
                    Operation::new("Tf", vec!["F1".into(), 12.into()]),
                    Operation::new("Td", vec![72.into(), 720.into()]),
                    Operation::new(
                        "Tj",
                        vec![Object::string_literal(format!("{text} {number}"))],
                    ),
                    Operation::new("ET", vec![]),
                ],
            };
            let content_id =
                document.add_object(Stream::new(dictionary! {}, content.encode().unwrap()));
            let page_id = document.add_object(dictionary! {
                "Type" => "Page",
                "Parent" => pages_id,
                "Contents" => content_id,
            });
            kids.push(page_id.into());
        }
        document.objects.insert(
            pages_id,
            Object::Dictionary(dictionary! {
                "Type" => "Pages",
                "Kids" => kids,
                "Count" => pages as i64,
                "Resources" => resources_id,
                "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
            }),
        );
        let catalog_id = document.add_object(dictionary! {
            "Type" => "Catalog",
            "Pages" => pages_id,
        });
        document.trailer.set("Root", catalog_id);
        let mut bytes = Vec::new();
        document.save_to(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn page_text_is_extracted_in_order() {
        let (text, note) = convert(&pdf(3, "Quarterly revenue")).unwrap().finish();
        assert!(
            text.starts_with("Quarterly revenue 1\n\n<!-- page 2 -->\n\nQuarterly revenue 2"),
            "{text}"
        );
        assert!(text.contains("Quarterly revenue 3"), "{text}");
        assert_eq!(note, None);
    }

    #[test]
    fn pages_past_the_cap_are_named_in_a_note() {
        let (text, note) = convert(&pdf(2_000, "p")).unwrap().finish();
        assert_eq!(note.as_deref(), Some("first 500 of 2000 pages"));
        assert!(
            text.contains(&format!("p {MAX_PDF_PAGES}\n")),
            "{}",
            &text[text.len() - 300..]
        );
        assert!(!text.contains(&format!("p {}\n", MAX_PDF_PAGES + 1)));
        assert!(
            text.ends_with(
                "[Conversion stopped after page 500 of 2000: pages past the first 500 are not converted.]\n"
            ),
            "{}",
            &text[text.len() - 300..]
        );
    }

    #[test]
    fn garbage_and_headerless_bytes_are_refused() {
        assert_eq!(
            convert(b"\x00\x01garbage").unwrap_err(),
            "not a PDF file (no %PDF- header)"
        );
        let error = convert(b"%PDF-1.7\n\x00\xff garbage without objects").unwrap_err();
        assert!(error.starts_with("not a readable PDF"), "{error}");
    }

    #[test]
    fn a_flate_bomb_stream_is_refused_before_parsing() {
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1024 * 1024];
        for _ in 0..40 {
            encoder.write_all(&zeros).unwrap();
        }
        let bomb = encoder.finish().unwrap();
        let mut bytes =
            b"%PDF-1.5\n1 0 obj\n<< /Type /ObjStm /Filter /FlateDecode >>\nstream\n".to_vec();
        bytes.extend_from_slice(&bomb);
        bytes.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
        let error = convert(&bytes).unwrap_err();
        assert!(error.contains("decompression bomb"), "{error}");
    }
}
