//! Document uploads to Markdown, as DeerFlow converts uploads on arrival: PDF, DOCX, XLSX,
//! PPTX and HTML become text the model can read with `read_file` (docs/runner.md,
//! "Document uploads").
//!
//! Each converter is a pure function from bytes to Markdown or a refusal; [`convert`]
//! dispatches by extension (and the PDF magic for a file without one) and applies the caps
//! of [`limits`]. [`convert_guarded`] adds what a pure function cannot: a time bound and a
//! panic boundary around third-party parsers. [`uploads`] is the one place with file I/O:
//! it writes the `.md` siblings and the outcome sidecar the uploads listing reads.

mod docx;
mod html;
pub(crate) mod limits;
mod ooxml;
mod pdf;
mod pptx;
pub(crate) mod uploads;
mod xlsx;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::time::Duration;

use limits::{MAX_INPUT_BYTES, Output, STACK_BYTES, TIME_LIMIT, mib};

/// A document format this module converts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Pdf,
    Docx,
    Xlsx,
    Pptx,
    Html,
}

impl Format {
    /// The format a file name's extension names (case-insensitive), if any.
    pub(crate) fn of_name(name: &str) -> Option<Format> {
        let (_, extension) = name.rsplit_once('.')?;
        match extension.to_ascii_lowercase().as_str() {
            "pdf" => Some(Format::Pdf),
            "docx" => Some(Format::Docx),
            "xlsx" | "xlsm" => Some(Format::Xlsx),
            "pptx" => Some(Format::Pptx),
            "html" | "htm" | "xhtml" => Some(Format::Html),
            _ => None,
        }
    }

    /// The format of an upload: its extension, else a PDF recognised by its header. A zip
    /// without a telling extension is not guessed at (DOCX, XLSX and PPTX all are zips).
    pub(crate) fn detect(name: &str, bytes: &[u8]) -> Option<Format> {
        match Format::of_name(name) {
            Some(format) => Some(format),
            None if !name.contains('.') && pdf::has_header(bytes) => Some(Format::Pdf),
            None => None,
        }
    }

    /// The format's usual name, for messages.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Format::Pdf => "PDF",
            Format::Docx => "DOCX",
            Format::Xlsx => "XLSX",
            Format::Pptx => "PPTX",
            Format::Html => "HTML",
        }
    }
}

/// A converted document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Markdown {
    /// The Markdown, at most [`limits::MAX_OUTPUT_BYTES`] plus a closing note.
    pub text: String,
    /// Set when the conversion stopped at a cap: what was left out, for the uploads listing.
    pub note: Option<String>,
}

/// Why a document was not converted: a sentence for the model, naming no host path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub(crate) struct Refusal {
    pub reason: String,
}

impl Refusal {
    fn new(reason: impl Into<String>) -> Self {
        Refusal {
            reason: reason.into(),
        }
    }
}

/// Converts `bytes` as `format`, within the size caps. Pure: no I/O, no threads; a
/// pathological input may still be slow or make a parser panic, which [`convert_guarded`]
/// bounds.
pub(crate) fn convert(format: Format, bytes: &[u8]) -> Result<Markdown, Refusal> {
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(Refusal::new(format!(
            "the file is {}, over the {} conversion limit",
            mib(bytes.len() as u64),
            mib(MAX_INPUT_BYTES as u64)
        )));
    }
    if bytes.is_empty() {
        return Err(Refusal::new("the file is empty"));
    }
    let output: Output = match format {
        Format::Pdf => pdf::convert(bytes),
        Format::Docx => docx::convert(bytes),
        Format::Xlsx => xlsx::convert(bytes),
        Format::Pptx => pptx::convert(bytes),
        Format::Html => html::convert(bytes),
    }
    .map_err(Refusal::new)?;
    if output.is_blank() {
        return Err(Refusal::new(format!(
            "the {} has no text to convert",
            format.label()
        )));
    }
    let (text, note) = output.finish();
    Ok(Markdown { text, note })
}

/// [`convert`] on its own thread: a panic in a parser becomes a refusal, and a conversion
/// still running after [`TIME_LIMIT`] is abandoned with one.
///
/// A plain thread rather than `tokio::task::spawn_blocking`: the callers (the work folder's
/// uploads, the sandbox's `install_inputs`) are synchronous, and an abandoned blocking task
/// would hold a Tokio runtime's shutdown until it ended, where a detached thread ends with
/// the process.
pub(crate) fn convert_guarded(format: Format, bytes: Vec<u8>) -> Result<Markdown, Refusal> {
    run_bounded(TIME_LIMIT, move || convert(format, &bytes))
}

/// Runs `work` on a thread with a large stack, waiting at most `limit`.
fn run_bounded(
    limit: Duration,
    work: impl FnOnce() -> Result<Markdown, Refusal> + Send + 'static,
) -> Result<Markdown, Refusal> {
    let (sender, receiver) = mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("herd-convert".to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let result = catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| {
                Err(Refusal::new(
                    "the converter failed on this file (a parser panicked)",
                ))
            });
            // The receiver is gone when the time limit passed; nothing waits for the result.
            let _ = sender.send(result);
        });
    if let Err(error) = spawned {
        return Err(Refusal::new(format!("no thread to convert it on: {error}")));
    }
    match receiver.recv_timeout(limit) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(Refusal::new(format!(
            "the conversion took longer than {} s and was abandoned",
            limit.as_secs_f64()
        ))),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(Refusal::new("the converter failed on this file"))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn formats_come_from_extensions_and_the_pdf_header() {
        assert_eq!(Format::detect("Report.PDF", b""), Some(Format::Pdf));
        assert_eq!(Format::detect("a.docx", b""), Some(Format::Docx));
        assert_eq!(Format::detect("a.xlsx", b""), Some(Format::Xlsx));
        assert_eq!(Format::detect("deck.pptx", b""), Some(Format::Pptx));
        assert_eq!(Format::detect("page.htm", b""), Some(Format::Html));
        assert_eq!(Format::detect("scan", b"%PDF-1.4\n"), Some(Format::Pdf));
        assert_eq!(Format::detect("notes.txt", b"%PDF-1.4\n"), None);
        assert_eq!(Format::detect("data.csv", b"a,b"), None);
        assert_eq!(Format::detect("archive", b"PK\x03\x04"), None);
    }

    #[test]
    fn every_format_converts_through_the_guard() {
        let cases = [
            (
                Format::Pdf,
                pdf::tests::pdf(2, "Hello from a PDF"),
                "Hello from a PDF 2",
            ),
            (
                Format::Docx,
                docx::tests::docx(&docx::tests::paragraph(Some("Heading1"), "Hello DOCX")),
                "# Hello DOCX",
            ),
            (Format::Xlsx, xlsx_fixture(), "| Region | Revenue |"),
            (
                Format::Pptx,
                pptx::tests::pptx(&[&["Hello PPTX"]]),
                "## Slide 1\n\nHello PPTX",
            ),
            (
                Format::Html,
                b"<h2>Hello HTML</h2><p>body</p>".to_vec(),
                "## Hello HTML",
            ),
        ];
        for (format, bytes, expected) in cases {
            let markdown = convert_guarded(format, bytes).unwrap();
            assert!(
                markdown.text.contains(expected),
                "{format:?}: {}",
                markdown.text
            );
        }
    }

    fn xlsx_fixture() -> Vec<u8> {
        let mut workbook = rust_xlsxwriter::Workbook::new();
        let sheet = workbook.add_worksheet();
        sheet.write_string(0, 0, "Region").unwrap();
        sheet.write_string(0, 1, "Revenue").unwrap();
        sheet.write_number(1, 1, 3).unwrap();
        workbook.save_to_buffer().unwrap()
    }

    #[test]
    fn hostile_inputs_end_in_clear_refusals() {
        let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
        let refusal = convert_guarded(Format::Pdf, garbage.clone()).unwrap_err();
        assert_eq!(refusal.reason, "not a PDF file (no %PDF- header)");
        let refusal = convert_guarded(Format::Docx, garbage).unwrap_err();
        assert_eq!(refusal.reason, "not a DOCX file (no zip header)");
        let huge = vec![b' '; MAX_INPUT_BYTES + 1];
        let refusal = convert_guarded(Format::Html, huge).unwrap_err();
        assert_eq!(
            refusal.reason,
            "the file is 32.0 MiB, over the 32.0 MiB conversion limit"
        );
        let refusal = convert_guarded(Format::Pdf, Vec::new()).unwrap_err();
        assert_eq!(refusal.reason, "the file is empty");
        let nested = format!(
            "<html><body>{}deep{}</body></html>",
            "<div>".repeat(100_000),
            "</div>".repeat(100_000)
        );
        match convert_guarded(Format::Html, nested.into_bytes()) {
            Ok(markdown) => assert!(markdown.text.contains("deep") || markdown.text.len() < 1024),
            Err(refusal) => assert!(!refusal.reason.is_empty()),
        }
        let nested = format!("{}{}", "<w:p>".repeat(100_000), "</w:p>".repeat(100_000));
        let refusal = convert_guarded(Format::Docx, docx::tests::docx(&nested)).unwrap_err();
        assert_eq!(refusal.reason, "its XML nests deeper than 256 elements");
    }

    #[test]
    fn a_zip_bomb_upload_is_refused() {
        let zeros = vec![0u8; 40 * 1024 * 1024];
        let bomb = ooxml::tests::zip_of(&[("xl/worksheets/sheet1.xml", &zeros)]);
        let refusal = convert_guarded(Format::Xlsx, bomb).unwrap_err();
        assert!(refusal.reason.contains("zip bomb"), "{refusal}");
    }

    #[test]
    fn panics_and_slow_conversions_become_refusals() {
        let refusal = run_bounded(Duration::from_secs(5), || panic!("parser bug")).unwrap_err();
        assert_eq!(
            refusal.reason,
            "the converter failed on this file (a parser panicked)"
        );
        let refusal = run_bounded(Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_secs(2));
            Err(Refusal::new("late"))
        })
        .unwrap_err();
        assert_eq!(
            refusal.reason,
            "the conversion took longer than 0.05 s and was abandoned"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// No bytes make the dispatch panic or escape the guard, whatever the name says.
        #[test]
        fn no_bytes_make_the_converter_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..2048),
            format in prop_oneof![
                Just(Format::Pdf), Just(Format::Docx), Just(Format::Xlsx),
                Just(Format::Pptx), Just(Format::Html),
            ],
            prefix in prop_oneof![Just(&b""[..]), Just(&b"%PDF-1.7\n"[..]), Just(&b"PK\x03\x04"[..])],
        ) {
            let mut input = prefix.to_vec();
            input.extend_from_slice(&bytes);
            let unguarded = catch_unwind(|| convert(format, &input));
            prop_assert!(unguarded.is_ok(), "convert panicked on {format:?}");
        }
    }
}
