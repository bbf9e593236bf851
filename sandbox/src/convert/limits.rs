//! The caps every conversion works under, and the Markdown buffer that enforces the output
//! cap. An upload is untrusted input: a converter must end in a note, never in an OOM or a
//! hang, whatever the bytes are (docs/runner.md, "Document uploads").

use std::time::Duration;

/// Largest upload converted. Bigger files are listed as they are: parsers hold the whole
/// document (and its object tree) in memory.
pub(crate) const MAX_INPUT_BYTES: usize = 32 * 1024 * 1024;

/// Largest Markdown written for one upload; the rest is cut with a note. 2 MiB is far more
/// than a model reads at once, and `read_file` pages through it by line ranges.
pub(crate) const MAX_OUTPUT_BYTES: usize = 2 * 1024 * 1024;

/// PDF pages converted; later pages are named in a note. Each page is a full content-stream
/// interpretation, the slow part of a PDF.
pub(crate) const MAX_PDF_PAGES: usize = 500;

/// Entries a DOCX, XLSX or PPTX archive may have: real documents have tens to a few thousand.
pub(crate) const MAX_ZIP_ENTRIES: usize = 10_000;

/// Most bytes one compressed part (a zip entry, a PDF stream) may inflate to.
pub(crate) const MAX_PART_BYTES: u64 = 32 * 1024 * 1024;

/// Most bytes all the parts of one document may inflate to together: the zip-bomb guard
/// against many parts each under [`MAX_PART_BYTES`].
pub(crate) const MAX_INFLATED_BYTES: u64 = 256 * 1024 * 1024;

/// Deepest XML element nesting read in a DOCX or PPTX part (Word's own documents stay far
/// under 100; a deeper part is hostile or broken).
pub(crate) const MAX_XML_DEPTH: usize = 256;

/// Sheets converted from one workbook.
pub(crate) const MAX_SHEETS: usize = 100;

/// Columns kept per spreadsheet row; wider rows are cut (a note says so).
pub(crate) const MAX_COLUMNS: usize = 64;

/// Wall-clock time one conversion may take before the upload is listed as not converted.
pub(crate) const TIME_LIMIT: Duration = Duration::from_secs(30);

/// Stack of the conversion thread: third-party parsers recurse, and a stack overflow would
/// abort the process instead of ending in a refusal.
pub(crate) const STACK_BYTES: usize = 64 * 1024 * 1024;

/// Markdown under construction, never longer than [`MAX_OUTPUT_BYTES`]: once full it drops
/// what is pushed and remembers that it did, so converters can stop early.
#[derive(Debug, Default)]
pub(crate) struct Output {
    text: String,
    cut: bool,
    /// What a converter's own cap left out (pages, sheets), for the uploads listing.
    left_out: Option<String>,
}

impl Output {
    /// An empty buffer.
    pub(crate) fn new() -> Self {
        Output::default()
    }

    /// Appends `piece`, or as much of it as fits (cut at a character boundary). Returns
    /// `false` once the buffer is full, so the caller can stop reading.
    pub(crate) fn push(&mut self, piece: &str) -> bool {
        if self.cut {
            return false;
        }
        let room = MAX_OUTPUT_BYTES - self.text.len();
        if piece.len() <= room {
            self.text.push_str(piece);
            return true;
        }
        let mut end = room;
        while !piece.is_char_boundary(end) {
            end -= 1;
        }
        self.text.push_str(&piece[..end]);
        self.cut = true;
        false
    }

    /// Records what a converter's own cap left out; the note is already in the text.
    pub(crate) fn left_out(&mut self, what: String) {
        self.left_out = Some(what);
    }

    /// Whether the output cap was reached.
    pub(crate) fn is_full(&self) -> bool {
        self.cut
    }

    /// Whether nothing but whitespace was written.
    pub(crate) fn is_blank(&self) -> bool {
        self.text.trim().is_empty()
    }

    /// The Markdown, with the cut note appended when the cap was reached.
    pub(crate) fn finish(self) -> (String, Option<String>) {
        let mut text = self.text;
        if !self.cut {
            return (text, self.left_out);
        }
        let note = format!(
            "cut at {} MiB of Markdown",
            MAX_OUTPUT_BYTES / (1024 * 1024)
        );
        text.push_str(&format!(
            "\n\n[Conversion stopped: {note}; the rest of the document is not converted.]\n"
        ));
        (text, Some(note))
    }
}

/// Counts inflated bytes against [`MAX_INFLATED_BYTES`] across the parts of one document.
#[derive(Debug, Default)]
pub(crate) struct InflateBudget {
    used: u64,
}

impl InflateBudget {
    /// Records `bytes` more; refuses once the document's total passes the cap.
    pub(crate) fn spend(&mut self, bytes: u64) -> Result<(), String> {
        self.used = self.used.saturating_add(bytes);
        if self.used > MAX_INFLATED_BYTES {
            return Err(format!(
                "its compressed parts inflate to more than {} MiB (a zip bomb?)",
                MAX_INFLATED_BYTES / (1024 * 1024)
            ));
        }
        Ok(())
    }
}

/// A size for notes: `3.2 MiB`, `512 KiB`.
pub(crate) fn mib(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let value = bytes as f64 / MIB;
    if value >= 1.0 {
        format!("{value:.1} MiB")
    } else {
        format!("{:.0} KiB", bytes as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_stops_at_the_cap_on_a_char_boundary_with_a_note() {
        let mut output = Output::new();
        let line = "é".repeat(1000);
        let mut pushes = 0;
        while output.push(&line) {
            pushes += 1;
        }
        assert!(pushes > 0);
        assert!(output.is_full());
        assert!(!output.push("more"));
        let (text, note) = output.finish();
        assert!(text.len() <= MAX_OUTPUT_BYTES + 200);
        assert!(text.ends_with("the rest of the document is not converted.]\n"));
        assert_eq!(note.as_deref(), Some("cut at 2 MiB of Markdown"));
    }

    #[test]
    fn the_budget_refuses_past_the_total() {
        let mut budget = InflateBudget::default();
        assert!(budget.spend(MAX_INFLATED_BYTES).is_ok());
        assert!(budget.spend(1).unwrap_err().contains("zip bomb"));
    }
}
