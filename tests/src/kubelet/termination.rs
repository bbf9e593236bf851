//! A container's termination message, as the kubelet reads it back: the file at
//! `terminationMessagePath` (at most 4096 bytes), or with `FallbackToLogsOnError` and a
//! failed exit and an empty file, the end of what the container printed (at most 80 lines
//! and 2048 bytes).

/// The most of the file that is kept.
pub const MAX_MESSAGE: usize = 4096;
/// The most of the log that a fallback keeps.
const MAX_LOG_BYTES: usize = 2048;
const MAX_LOG_LINES: usize = 80;

/// The message, if any: `file` is the termination-message file, `log` what this run of the
/// container printed.
pub fn termination_message(
    file: &[u8],
    fallback_to_logs: bool,
    exit_code: i32,
    log: &[u8],
) -> Option<String> {
    if !file.is_empty() {
        let kept = &file[..file.len().min(MAX_MESSAGE)];
        return Some(String::from_utf8_lossy(kept).into_owned());
    }
    if !fallback_to_logs || exit_code == 0 || log.is_empty() {
        return None;
    }
    let text = String::from_utf8_lossy(log);
    let lines: Vec<&str> = text.lines().collect();
    let mut tail = lines[lines.len().saturating_sub(MAX_LOG_LINES)..].join("\n");
    if text.ends_with('\n') {
        tail.push('\n');
    }
    if tail.len() > MAX_LOG_BYTES {
        let mut cut = tail.len() - MAX_LOG_BYTES;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail = tail[cut..].to_owned();
    }
    Some(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_wins_and_is_cut_at_4096_bytes() {
        assert_eq!(
            termination_message(b"{\"stopReason\":\"x\"}", true, 75, b"log").as_deref(),
            Some("{\"stopReason\":\"x\"}")
        );
        let long = vec![b'a'; 5000];
        assert_eq!(
            termination_message(&long, false, 0, b"").map(|m| m.len()),
            Some(MAX_MESSAGE)
        );
    }

    #[test]
    fn the_log_is_the_fallback_only_on_error() {
        assert_eq!(termination_message(b"", true, 0, b"fine\n"), None);
        assert_eq!(termination_message(b"", false, 1, b"boom\n"), None);
        assert_eq!(
            termination_message(b"", true, 1, b"a\nboom\n").as_deref(),
            Some("a\nboom\n")
        );
        let many: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let tail = termination_message(b"", true, 2, many.as_bytes()).unwrap();
        assert!(tail.starts_with("line 20\n"), "{tail}");
        assert_eq!(tail.lines().count(), 80);
        let wide = "é".repeat(3000);
        let tail = termination_message(b"", true, 2, wide.as_bytes()).unwrap();
        assert!(tail.len() <= MAX_LOG_BYTES && tail.chars().all(|c| c == 'é'));
    }
}
