//! Converting uploads in place: each document in an uploads folder gets a `<name>.md` sibling
//! (`report.pdf` -> `report.pdf.md`), and the folder's `.herd-conversions.json` records each
//! document's outcome, the Markdown's name or why there is none. The uploads listing
//! (`middleware::uploads`) reads that file through the tool executor, so it works the same
//! in a local work folder and in a Run's pod, where the sandbox container converts.
//!
//! `<name>.md` rather than `report.md`: the name says which upload it came from, and it never
//! takes the name of another upload (`report.md` beside `report.pdf` is common).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::limits::MAX_INPUT_BYTES;
use super::{Format, convert_guarded};

/// The outcome file in each uploads folder; hidden, so `list_uploads` leaves it out.
pub const SIDECAR: &str = ".herd-conversions.json";

/// Largest outcome file read: a few hundred bytes per upload.
pub const MAX_SIDECAR_BYTES: u64 = 1024 * 1024;

/// What became of one document upload.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Converted to `markdown`, a file beside the upload; `note` says what a cap left out.
    Converted {
        markdown: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Not converted, and why.
    Refused { reason: String },
}

/// The outcomes of one uploads folder, by upload name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Conversions {
    pub files: BTreeMap<String, Outcome>,
}

impl Conversions {
    /// Parses an outcome file; anything unreadable counts as no outcomes (the uploads are
    /// then listed as they are).
    pub fn parse(bytes: &[u8]) -> Self {
        serde_json::from_slice(bytes).unwrap_or_default()
    }

    /// The outcomes recorded in `dir`.
    pub(crate) fn read(dir: &Path) -> Self {
        let Ok(file) = fs::File::open(dir.join(SIDECAR)) else {
            return Conversions::default();
        };
        let mut bytes = Vec::new();
        match file.take(MAX_SIDECAR_BYTES).read_to_end(&mut bytes) {
            Ok(_) => Conversions::parse(&bytes),
            Err(_) => Conversions::default(),
        }
    }

    /// The upload `markdown` was converted from, if it is a conversion recorded here.
    pub fn source_of(&self, markdown: &str) -> Option<&str> {
        self.files
            .iter()
            .find_map(|(source, outcome)| match outcome {
                Outcome::Converted { markdown: name, .. } if name == markdown => {
                    Some(source.as_str())
                }
                _ => None,
            })
    }

    fn write(&self, dir: &Path) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        write_replacing(&dir.join(SIDECAR), &json)
    }
}

/// The Markdown sibling's name for upload `name`.
pub(crate) fn markdown_name(name: &str) -> String {
    format!("{name}.md")
}

/// Converts the uploads `names` (plain file names in `dir`, just written) that are
/// documents, writes their Markdown beside them and records every outcome in `dir`'s
/// [`SIDECAR`]. Never fails the upload: a document that cannot be converted is recorded
/// with the reason, and a sidecar that cannot be written is logged.
pub fn convert_uploads(dir: &Path, names: &[String]) {
    let mut conversions = Conversions::read(dir);
    let mut changed = false;
    for name in names {
        if conversions.source_of(name).is_some() {
            continue;
        }
        let Some(outcome) = convert_one(dir, name, names, &conversions) else {
            continue;
        };
        // A document uploaded again that no longer converts leaves no stale Markdown.
        if let (Some(Outcome::Converted { markdown, .. }), Outcome::Refused { .. }) =
            (conversions.files.get(name), &outcome)
            && Path::new(markdown).components().count() == 1
        {
            let _ = fs::remove_file(dir.join(markdown));
        }
        match &outcome {
            Outcome::Converted { markdown, note } => {
                tracing::info!(upload = %name, %markdown, ?note, "upload converted to Markdown");
            }
            Outcome::Refused { reason } => {
                tracing::info!(upload = %name, %reason, "upload not converted");
            }
        }
        conversions.files.insert(name.clone(), outcome);
        changed = true;
    }
    if changed && let Err(error) = conversions.write(dir) {
        tracing::warn!(%error, "could not record the uploads' conversions");
    }
}

/// The outcome for one upload, `None` when it is not a document.
fn convert_one(
    dir: &Path,
    name: &str,
    batch: &[String],
    conversions: &Conversions,
) -> Option<Outcome> {
    let path = dir.join(name);
    let bytes = read_capped(&path).ok()?;
    let format = Format::detect(name, &bytes)?;
    let markdown = markdown_name(name);
    let ours = matches!(
        conversions.files.get(name),
        Some(Outcome::Converted { markdown: recorded, .. }) if *recorded == markdown
    );
    let taken =
        batch.contains(&markdown) || (!ours && fs::symlink_metadata(dir.join(&markdown)).is_ok());
    if taken {
        return Some(Outcome::Refused {
            reason: format!("{markdown} is another upload; it was not overwritten"),
        });
    }
    Some(match convert_guarded(format, bytes) {
        Ok(converted) => match write_replacing(&dir.join(&markdown), converted.text.as_bytes()) {
            Ok(()) => Outcome::Converted {
                markdown,
                note: converted.note,
            },
            Err(error) => Outcome::Refused {
                reason: format!("could not write {markdown}: {error}"),
            },
        },
        Err(refusal) => Outcome::Refused {
            reason: refusal.reason,
        },
    })
}

/// At most one byte past the input cap of `path`: enough for `convert` to refuse it by size
/// without reading a huge file whole.
fn read_capped(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    fs::File::open(path)?
        .take(MAX_INPUT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes `bytes` to `path`; a symlink there is replaced, never written through (an earlier
/// attempt's model may have left one).
fn write_replacing(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_symlink()) {
        fs::remove_file(path)?;
    }
    fs::write(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{docx, pdf};

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
        fs::write(dir.join(name), bytes).unwrap();
        name.to_owned()
    }

    #[test]
    fn documents_get_a_sibling_and_failures_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec![
            write(dir.path(), "report.pdf", &pdf::tests::pdf(1, "Findings")),
            write(dir.path(), "broken.pdf", b"not a pdf at all"),
            write(dir.path(), "data.csv", b"a,b\n"),
        ];
        convert_uploads(dir.path(), &names);
        let markdown = fs::read_to_string(dir.path().join("report.pdf.md")).unwrap();
        assert!(markdown.contains("Findings 1"), "{markdown}");
        assert!(!dir.path().join("data.csv.md").exists());
        let conversions = Conversions::read(dir.path());
        assert_eq!(
            conversions.files.get("report.pdf"),
            Some(&Outcome::Converted {
                markdown: "report.pdf.md".to_owned(),
                note: None
            })
        );
        assert_eq!(
            conversions.files.get("broken.pdf"),
            Some(&Outcome::Refused {
                reason: "not a PDF file (no %PDF- header)".to_owned()
            })
        );
        assert_eq!(conversions.files.len(), 2);
        assert_eq!(conversions.source_of("report.pdf.md"), Some("report.pdf"));

        // Installing again (a retried attempt) converts again in place, not to a new name.
        convert_uploads(dir.path(), &names[..1]);
        assert_eq!(Conversions::read(dir.path()), conversions);
    }

    #[test]
    fn another_uploads_name_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let document = docx::tests::docx(&docx::tests::paragraph(None, "text"));
        let names = vec![
            write(dir.path(), "notes.docx", &document),
            write(dir.path(), "notes.docx.md", b"the user's own notes"),
        ];
        convert_uploads(dir.path(), &names);
        assert_eq!(
            fs::read_to_string(dir.path().join("notes.docx.md")).unwrap(),
            "the user's own notes"
        );
        assert_eq!(
            Conversions::read(dir.path()).files.get("notes.docx"),
            Some(&Outcome::Refused {
                reason: "notes.docx.md is another upload; it was not overwritten".to_owned()
            })
        );
    }

    #[test]
    fn a_symlink_at_the_markdown_name_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        let name = write(dir.path(), "page.html", b"<p>hello</p>");
        let conversions = Conversions {
            files: BTreeMap::from([(
                name.clone(),
                Outcome::Converted {
                    markdown: "page.html.md".to_owned(),
                    note: None,
                },
            )]),
        };
        conversions.write(dir.path()).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("page.html.md")).unwrap();
        convert_uploads(dir.path(), &[name]);
        assert_eq!(fs::read_to_string(outside.path()).unwrap(), "");
        assert!(
            fs::read_to_string(dir.path().join("page.html.md"))
                .unwrap()
                .contains("hello")
        );
    }
}
