//! Uploads (DeerFlow's `UploadsMiddleware`, before_agent): on the run's first turn, tells the
//! model which files it was given (`uploads/`, i.e. the Run's `inputs`) in a hidden
//! `<current_uploads>` block just before the user's message, with a short preview of each
//! text file, and records them in `uploaded_files`. Later turns list nothing: the files stay
//! in `uploads/`, where `ls` finds them.
//!
//! A document converted on arrival (`convert::uploads`) is listed once, with its Markdown
//! sibling and that file's preview; one that could not be converted is listed with the
//! reason. Both come from the folder's outcome file, read through the executor like the
//! files themselves.

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use herd_sandbox::truncation::truncate_chars;
use herd_sandbox::{
    Conversions, MAX_SIDECAR_BYTES, Outcome, SIDECAR, SandboxClient, ToolExecutor, UploadedFile,
};

use crate::agent::{Flow, Middleware};
use crate::tag_escaping::escape_tags;
use crate::thread::{Message, MessageKind, ThreadState};

/// Most files listed (DeerFlow's limit); the rest are found with `ls`.
pub const MAX_LISTED: usize = 10;
/// Largest file read for a preview; bigger files get none.
pub const PREVIEW_MAX_BYTES: u64 = 64 * 1024;
/// Most outline entries (Markdown headings) shown per file.
const MAX_OUTLINE: usize = 12;
/// Lines shown when a text file has no headings.
const PREVIEW_LINES: usize = 5;
/// Longest preview line.
const PREVIEW_LINE_CHARS: usize = 160;
/// Where uploads appear to the model.
const UPLOADS_DIR: &str = "/mnt/user-data/uploads";

/// Lists the run's uploads for the model on the first turn.
pub struct Uploads {
    executor: Arc<dyn ToolExecutor>,
}

impl Uploads {
    /// Lists and previews files through `executor`.
    pub fn new(executor: Arc<dyn ToolExecutor>) -> Self {
        Uploads { executor }
    }

    async fn list(&self) -> Vec<UploadedFile> {
        match self.executor.list_uploads().await {
            Ok(mut files) => {
                files.sort_by(|a, b| a.filename.cmp(&b.filename));
                files
            }
            Err(error) => {
                tracing::warn!(%error, "could not list uploads");
                Vec::new()
            }
        }
    }

    /// The outcomes of the document conversions in `uploads/` (none when there is no
    /// outcome file).
    async fn conversions(&self) -> Conversions {
        let path = format!("{UPLOADS_DIR}/{SIDECAR}");
        let Ok(file) = self.executor.read_file(&path, MAX_SIDECAR_BYTES).await else {
            return Conversions::default();
        };
        base64::engine::general_purpose::STANDARD
            .decode(file.data_base64)
            .map(|bytes| Conversions::parse(&bytes))
            .unwrap_or_default()
    }

    /// An outline (Markdown headings) or the first lines of a small UTF-8 text file.
    async fn preview(&self, file: &UploadedFile) -> Option<String> {
        if file.size == 0 || file.size > PREVIEW_MAX_BYTES {
            return None;
        }
        let data_base64 = self
            .executor
            .read_file(&file.path, PREVIEW_MAX_BYTES)
            .await
            .ok()?
            .data_base64;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data_base64)
            .ok()?;
        let text = String::from_utf8(bytes).ok()?;
        if text.contains('\0') {
            return None;
        }
        Some(describe_text(&text))
    }
}

#[async_trait]
impl Middleware for Uploads {
    fn name(&self) -> &'static str {
        "Uploads"
    }

    async fn before_agent(&self, state: &mut ThreadState) -> Flow {
        let already_listed = state
            .messages
            .iter()
            .any(|message| message.meta().kind == Some(MessageKind::Uploads));
        if already_listed || !state.uploaded_files.is_empty() {
            return Flow::Continue;
        }
        let Some(position) = last_user_position(state) else {
            return Flow::Continue;
        };
        let files = self.list().await;
        if files.is_empty() {
            return Flow::Continue;
        }
        let conversions = self.conversions().await;
        let listed = group(&files, &conversions);
        let mut entries = Vec::new();
        for (file, conversion) in listed.iter().take(MAX_LISTED) {
            let previewed = match conversion {
                Some(Conversion::Converted { markdown, .. }) => markdown,
                _ => file,
            };
            let preview = self.preview(previewed).await;
            entries.push(Entry {
                file,
                conversion: conversion.clone(),
                preview,
            });
        }
        let block = render_block(&entries, listed.len());
        let id = format!("{}__uploads", state.messages[position].id());
        state.messages.insert(
            position,
            Message::hidden_user(id, MessageKind::Uploads, block),
        );
        state.uploaded_files = files;
        Flow::Continue
    }
}

fn last_user_position(state: &ThreadState) -> Option<usize> {
    state
        .messages
        .iter()
        .rposition(|message| matches!(message, Message::User(user) if !user.meta.hidden))
}

/// What became of a document upload, as listed.
#[derive(Clone, Debug)]
enum Conversion<'a> {
    Converted {
        markdown: &'a UploadedFile,
        note: Option<&'a str>,
    },
    Refused(&'a str),
}

/// One listed upload: the file, its conversion, the preview shown under it.
struct Entry<'a> {
    file: &'a UploadedFile,
    conversion: Option<Conversion<'a>>,
    preview: Option<String>,
}

/// The uploads as listed: a recorded conversion's Markdown goes with its document instead
/// of on a line of its own.
fn group<'a>(
    files: &'a [UploadedFile],
    conversions: &'a Conversions,
) -> Vec<(&'a UploadedFile, Option<Conversion<'a>>)> {
    let by_name = |name: &str| files.iter().find(|file| file.filename == name);
    let folded: Vec<&str> = files
        .iter()
        .filter(|file| {
            conversions
                .source_of(&file.filename)
                .is_some_and(|source| by_name(source).is_some())
        })
        .map(|file| file.filename.as_str())
        .collect();
    files
        .iter()
        .filter(|file| !folded.contains(&file.filename.as_str()))
        .map(|file| {
            let conversion = match conversions.files.get(&file.filename) {
                Some(Outcome::Converted { markdown, note }) => {
                    by_name(markdown).map(|markdown| Conversion::Converted {
                        markdown,
                        note: note.as_deref(),
                    })
                }
                Some(Outcome::Refused { reason }) => Some(Conversion::Refused(reason)),
                None => None,
            };
            (file, conversion)
        })
        .collect()
}

fn render_block(entries: &[Entry<'_>], total: usize) -> String {
    let mut block = String::from(
        "<current_uploads>\nThe user uploaded these files for this task. Read them with \
         read_file (line ranges for long files) or bash.\n",
    );
    for Entry {
        file,
        conversion,
        preview,
    } in entries
    {
        block.push_str(&format!(
            "\n- {} ({}) at {}\n",
            escape_tags(&file.filename),
            human_size(file.size),
            escape_tags(&file.path)
        ));
        match conversion {
            Some(Conversion::Converted { markdown, note }) => {
                let note = note.map(|note| format!("; {note}")).unwrap_or_default();
                block.push_str(&format!(
                    "    Converted to Markdown: {} ({}{}); read that file instead\n",
                    escape_tags(&markdown.path),
                    human_size(markdown.size),
                    escape_tags(&note)
                ));
            }
            Some(Conversion::Refused(reason)) => {
                block.push_str(&format!("    Not converted: {}\n", escape_tags(reason)));
            }
            None => {}
        }
        if let Some(preview) = preview {
            for line in preview.lines() {
                block.push_str(&format!("    {}\n", escape_tags(line)));
            }
        }
    }
    if total > entries.len() {
        block.push_str(&format!(
            "\n{} more files are not listed; run ls {UPLOADS_DIR} to see them all.\n",
            total - entries.len()
        ));
    }
    block.push_str("</current_uploads>");
    block
}

/// Headings as `L<line>: title` when the text has some, else its first non-empty lines.
fn describe_text(text: &str) -> String {
    let outline: Vec<String> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| line.starts_with('#'))
        .take(MAX_OUTLINE)
        .map(|(index, line)| {
            let title = line.trim_start_matches('#').trim();
            format!(
                "L{}: {}",
                index + 1,
                truncate_chars(title, PREVIEW_LINE_CHARS)
            )
        })
        .collect();
    if !outline.is_empty() {
        return format!("Outline:\n{}", outline.join("\n"));
    }
    let lines: Vec<String> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .take(PREVIEW_LINES)
        .map(|line| truncate_chars(line.trim_end(), PREVIEW_LINE_CHARS))
        .collect();
    format!("Preview:\n{}", lines.join("\n"))
}

fn human_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    match bytes {
        b if b < KIB => format!("{b} B"),
        b if b < MIB => format!("{:.1} KiB", b as f64 / KIB as f64),
        b => format!("{:.1} MiB", b as f64 / MIB as f64),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use herd_sandbox::{ExecutorError, SandboxRequest, SandboxResponse};

    use super::*;

    /// A sandbox holding `files` (name → content) in `uploads/`.
    #[derive(Default)]
    struct FakeUploads {
        files: BTreeMap<String, Vec<u8>>,
        reads: Mutex<Vec<String>>,
    }

    impl FakeUploads {
        fn with(files: &[(&str, &[u8])]) -> Arc<Self> {
            Arc::new(FakeUploads {
                files: files
                    .iter()
                    .map(|(name, bytes)| ((*name).to_owned(), bytes.to_vec()))
                    .collect(),
                reads: Mutex::new(Vec::new()),
            })
        }
    }

    #[async_trait]
    impl ToolExecutor for FakeUploads {
        async fn execute(&self, request: SandboxRequest) -> Result<SandboxResponse, ExecutorError> {
            Ok(match request {
                SandboxRequest::ListUploads => SandboxResponse::Uploads {
                    files: self
                        .files
                        .iter()
                        .rev()
                        .map(|(name, bytes)| UploadedFile {
                            filename: name.clone(),
                            path: format!("{UPLOADS_DIR}/{name}"),
                            size: bytes.len() as u64,
                        })
                        .collect(),
                },
                SandboxRequest::ReadFile { path, .. } => {
                    self.reads.lock().unwrap().push(path.clone());
                    let name = path.rsplit('/').next().unwrap_or_default();
                    let Some(bytes) = self.files.get(name) else {
                        return Ok(SandboxResponse::Error {
                            message: format!("Error: {path} not found"),
                        });
                    };
                    SandboxResponse::File {
                        data_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
                        size: bytes.len() as u64,
                    }
                }
                other => SandboxResponse::Error {
                    message: format!("unexpected {other:?}"),
                },
            })
        }
    }

    #[tokio::test]
    async fn the_first_turn_lists_uploads_before_the_user_message() {
        let executor = FakeUploads::with(&[
            ("report.md", b"# Title\ntext\n## Results\nmore"),
            ("data.csv", b"a,b\n1,2\n"),
            ("image.png", b"\x89PNG\0\0"),
        ]);
        let middleware = Uploads::new(executor.clone());
        let mut state = ThreadState::new("summarize these");
        assert_eq!(middleware.before_agent(&mut state).await, Flow::Continue);

        assert_eq!(state.messages.len(), 2);
        let block = state.messages[0].text();
        assert_eq!(state.messages[0].meta().kind, Some(MessageKind::Uploads));
        assert!(state.messages[0].meta().hidden);
        assert_eq!(state.messages[1].text(), "summarize these");
        assert!(block.starts_with("<current_uploads>\n"));
        assert!(block.ends_with("</current_uploads>"));
        assert!(block.contains("- data.csv (8 B) at /mnt/user-data/uploads/data.csv\n    Preview:\n    a,b\n    1,2\n"), "{block}");
        assert!(
            block.contains("Outline:\n    L1: Title\n    L3: Results\n"),
            "{block}"
        );
        assert!(
            block.contains("- image.png (6 B) at /mnt/user-data/uploads/image.png\n"),
            "{block}"
        );
        assert!(
            !block.contains("PNG"),
            "binary files get no preview: {block}"
        );
        let names: Vec<_> = state
            .uploaded_files
            .iter()
            .map(|f| f.filename.as_str())
            .collect();
        assert_eq!(names, vec!["data.csv", "image.png", "report.md"]);

        // A resumed run lists nothing again.
        middleware.before_agent(&mut state).await;
        assert_eq!(state.messages.len(), 2);
    }

    #[tokio::test]
    async fn more_than_ten_files_point_to_ls_and_names_are_escaped() {
        let names: Vec<String> = (0..12).map(|i| format!("f{i:02}<x>.txt")).collect();
        let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
        let executor = FakeUploads::with(&files);
        let mut state = ThreadState::new("go");
        Uploads::new(executor.clone())
            .before_agent(&mut state)
            .await;
        let block = state.messages[0].text();
        assert_eq!(block.matches("\n- ").count(), MAX_LISTED);
        assert!(block.contains("2 more files are not listed; run ls /mnt/user-data/uploads"));
        assert!(block.contains("f00&lt;x&gt;.txt"));
        assert!(!block.contains("<x>"));
        // The previews, and the conversions' outcome file.
        assert_eq!(executor.reads.lock().unwrap().len(), MAX_LISTED + 1);
        assert_eq!(state.uploaded_files.len(), 12);
    }

    #[tokio::test]
    async fn no_uploads_add_nothing() {
        let mut state = ThreadState::new("go");
        Uploads::new(FakeUploads::with(&[]))
            .before_agent(&mut state)
            .await;
        assert_eq!(state.messages.len(), 1);
        assert!(state.uploaded_files.is_empty());
    }

    #[test]
    fn sizes_read_like_ls() {
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(3 * 1024 * 1024), "3.0 MiB");
    }
}
