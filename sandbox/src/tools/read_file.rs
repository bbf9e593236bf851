//! `read_file`: a text file, or a 1-based inclusive line range of it, capped at 50000
//! characters. The result's meta carries the SHA-256 of the whole file, so a middleware can
//! tell whether a later write would clobber changes the model has not seen.

use super::ToolReply;
use crate::args::ReadFileArgs;
use crate::io_error::io_error;
use crate::paths::{Access, SandboxPaths};
use crate::truncation::take_chars;

/// DeerFlow's cap on `read_file` output.
pub(crate) const MAX_CHARS: usize = 50_000;
/// Files larger than this are not read whole; `bash` (head, sed, grep) handles them.
const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// How far into a file a NUL byte marks it as binary (git's heuristic).
const BINARY_PROBE_BYTES: usize = 8000;

/// Reads `args.path`, optionally only lines `start_line..=end_line`.
pub(crate) fn run(paths: &SandboxPaths, args: &ReadFileArgs) -> ToolReply {
    let resolved = match paths.resolve(&args.path, Access::Read) {
        Ok(resolved) => resolved,
        Err(refused) => return ToolReply::error(format!("Error: {refused}")),
    };
    let virtual_path = &resolved.virtual_path;
    match std::fs::metadata(&resolved.host) {
        Ok(metadata) if metadata.is_dir() => {
            return ToolReply::error(format!(
                "Error: {virtual_path} is a directory; use ls to list it"
            ));
        }
        Ok(metadata) if metadata.len() > MAX_FILE_BYTES => {
            return ToolReply::error(format!(
                "Error: {virtual_path} is {} bytes, too large to read whole; use bash \
                 (head, sed -n, grep) to read parts of it",
                metadata.len()
            ));
        }
        Ok(_) => {}
        Err(failure) => return ToolReply::error(io_error(virtual_path, &failure)),
    }
    let bytes = match std::fs::read(&resolved.host) {
        Ok(bytes) => bytes,
        Err(failure) => return ToolReply::error(io_error(virtual_path, &failure)),
    };
    let probe = &bytes[..bytes.len().min(BINARY_PROBE_BYTES)];
    if probe.contains(&0) {
        return ToolReply::error(format!(
            "Error: {virtual_path} is a binary file ({} bytes); inspect it with bash \
             (file, xxd | head)",
            bytes.len()
        ))
        .with_sha256(&bytes);
    }
    let text = String::from_utf8_lossy(&bytes);
    let reply = match select_lines(&text, args.start_line, args.end_line, virtual_path) {
        Ok((first, selected)) if selected.is_empty() && first == 1 => ToolReply::ok("(empty)"),
        Ok((first, selected)) => ToolReply::ok(cap(selected, first)),
        Err(message) => ToolReply::error(message),
    };
    reply.with_sha256(&bytes)
}

/// The requested lines and the number of the first one.
fn select_lines<'a>(
    text: &'a str,
    start_line: Option<u64>,
    end_line: Option<u64>,
    virtual_path: &str,
) -> Result<(u64, &'a str), String> {
    if start_line.is_none() && end_line.is_none() {
        return Ok((1, text));
    }
    let starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(index, _)| index + 1))
        .filter(|index| *index < text.len())
        .collect();
    let total = starts.len() as u64;
    let start = start_line.unwrap_or(1);
    let end = end_line.unwrap_or(total).min(total);
    if start == 0 {
        return Err("Error: start_line is 1-based; the first line is 1".to_owned());
    }
    if start > total {
        return Err(format!(
            "Error: start_line {start} is past the end of {virtual_path} ({total} lines)"
        ));
    }
    if end < start {
        return Err(format!(
            "Error: end_line {end} is before start_line {start}"
        ));
    }
    let from = starts.get(start as usize - 1).copied().unwrap_or(0);
    let to = starts.get(end as usize).copied().unwrap_or(text.len());
    Ok((start, &text[from..to]))
}

/// `selected` cut at `MAX_CHARS`, telling the model where to continue.
fn cap(selected: &str, first_line: u64) -> String {
    if selected.chars().count() <= MAX_CHARS {
        return selected.to_owned();
    }
    let shown = take_chars(selected, MAX_CHARS);
    // The last line shown may be cut; continue from it.
    let next = first_line + shown.matches('\n').count() as u64;
    format!("{shown}\n\n[... truncated at {MAX_CHARS} characters; read on with start_line={next}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{sha256_hex, workspace_with};

    fn setup(content: &[u8]) -> std::io::Result<(tempfile::TempDir, SandboxPaths)> {
        workspace_with(&[("f.txt", content)])
    }

    fn read(paths: &SandboxPaths, start: Option<u64>, end: Option<u64>) -> ToolReply {
        run(
            paths,
            &ReadFileArgs {
                description: String::new(),
                path: "f.txt".into(),
                start_line: start,
                end_line: end,
            },
        )
    }

    #[test]
    fn reads_whole_files_and_line_ranges() -> std::io::Result<()> {
        let (_dir, paths) = setup(b"one\ntwo\nthree\n")?;
        let whole = read(&paths, None, None);
        assert_eq!(whole.content, "one\ntwo\nthree\n");
        assert_eq!(
            whole.meta.get("sha256"),
            Some(&serde_json::json!(sha256_hex(b"one\ntwo\nthree\n")))
        );
        assert_eq!(read(&paths, Some(2), Some(2)).content, "two\n");
        assert_eq!(read(&paths, Some(2), None).content, "two\nthree\n");
        assert_eq!(read(&paths, None, Some(1)).content, "one\n");
        assert_eq!(read(&paths, Some(3), Some(99)).content, "three\n");
        Ok(())
    }

    #[test]
    fn bad_ranges_are_explained() -> std::io::Result<()> {
        let (_dir, paths) = setup(b"one\ntwo")?;
        assert_eq!(
            read(&paths, Some(3), None).content,
            "Error: start_line 3 is past the end of /mnt/user-data/workspace/f.txt (2 lines)"
        );
        assert!(read(&paths, Some(0), None).is_error);
        assert!(read(&paths, Some(2), Some(1)).is_error);
        assert_eq!(read(&paths, Some(2), None).content, "two");
        Ok(())
    }

    #[test]
    fn long_files_are_capped_with_a_pointer_to_the_rest() -> std::io::Result<()> {
        let line = format!("{}\n", "x".repeat(99));
        let (_dir, paths) = setup(line.repeat(1000).as_bytes())?;
        let reply = read(&paths, None, None);
        assert!(reply.content.starts_with(&line));
        assert!(
            reply
                .content
                .ends_with("[... truncated at 50000 characters; read on with start_line=501]"),
            "{}",
            &reply.content[reply.content.len() - 100..]
        );
        Ok(())
    }

    #[test]
    fn empty_and_binary_files() -> std::io::Result<()> {
        let (_dir, paths) = setup(b"")?;
        assert_eq!(read(&paths, None, None).content, "(empty)");
        let (_dir, paths) = setup(b"\x89PNG\0\0")?;
        let reply = read(&paths, None, None);
        assert!(reply.is_error);
        assert!(reply.content.contains("binary file (6 bytes)"));
        Ok(())
    }
}
