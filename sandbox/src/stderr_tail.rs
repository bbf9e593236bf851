//! The last lines a stdio program (an MCP server) wrote to its standard error, kept by the
//! sandbox so that a server which fails at start can be explained with its own words: the
//! agent side asks for them by the handle `SpawnStdio` answered with.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

/// Most lines kept of one program.
pub(crate) const TAIL_LINES: usize = 20;
/// Most bytes kept of one program, all lines together.
pub(crate) const TAIL_BYTES: usize = 2048;
/// Longest line kept, in bytes; a longer one is cut and marked with `…`.
pub(crate) const LINE_BYTES: usize = 400;
/// Programs whose tails are kept: the oldest is forgotten first.
const KEPT_PROGRAMS: usize = 64;

/// The last lines of one stream, within [`TAIL_LINES`] and [`TAIL_BYTES`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl Tail {
    /// Adds a line, forgetting the oldest ones beyond the limits.
    pub(crate) fn push(&mut self, line: &str) {
        let line = cut(line.trim_end(), LINE_BYTES);
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > TAIL_LINES || self.bytes > TAIL_BYTES {
            let Some(oldest) = self.lines.pop_front() else {
                break;
            };
            self.bytes -= oldest.len();
        }
    }

    /// The lines kept, oldest first.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.iter().cloned().collect()
    }
}

/// `line` within `max` bytes, cut at a character boundary.
fn cut(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// One program's tail and whether its stream has ended.
#[derive(Debug)]
struct Entry {
    tail: Mutex<Tail>,
    ended: watch::Sender<bool>,
}

/// The tails of the programs this sandbox started. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct StderrTails {
    inner: Arc<Mutex<Registry>>,
}

#[derive(Debug, Default)]
struct Registry {
    next: u64,
    entries: VecDeque<(u64, Arc<Entry>)>,
}

/// Feeds one program's tail; the stream counts as ended when this is dropped.
#[derive(Debug)]
pub(crate) struct TailWriter {
    entry: Arc<Entry>,
}

impl TailWriter {
    /// Adds a line the program wrote.
    pub(crate) fn push(&self, line: &str) {
        self.entry
            .tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }
}

impl Drop for TailWriter {
    fn drop(&mut self) {
        self.entry.ended.send_replace(true);
    }
}

impl StderrTails {
    /// A new tail: its handle, and the writer that fills it.
    pub(crate) fn register(&self) -> (u64, TailWriter) {
        let (ended, _) = watch::channel(false);
        let entry = Arc::new(Entry {
            tail: Mutex::new(Tail::default()),
            ended,
        });
        let mut registry = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        registry.next += 1;
        let handle = registry.next;
        registry.entries.push_back((handle, entry.clone()));
        while registry.entries.len() > KEPT_PROGRAMS {
            registry.entries.pop_front();
        }
        (handle, TailWriter { entry })
    }

    /// The tail of `handle`, once its stream ended or `wait` passed (a program that exits
    /// may still have lines in its pipe); nothing for a handle unknown or forgotten.
    pub(crate) async fn lines(&self, handle: u64, wait: Duration) -> Vec<String> {
        let entry = {
            let registry = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            registry
                .entries
                .iter()
                .find(|(h, _)| *h == handle)
                .map(|(_, entry)| entry.clone())
        };
        let Some(entry) = entry else {
            return Vec::new();
        };
        let mut ended = entry.ended.subscribe();
        let _ = tokio::time::timeout(wait, ended.wait_for(|ended| *ended)).await;
        entry
            .tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lines()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_last_lines_within_its_limits() {
        let mut tail = Tail::default();
        for i in 0..TAIL_LINES + 5 {
            tail.push(&format!("line {i}\n"));
        }
        let lines = tail.lines();
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines[0], "line 5");
        assert_eq!(lines[TAIL_LINES - 1], format!("line {}", TAIL_LINES + 4));

        let mut long = Tail::default();
        for _ in 0..10 {
            long.push(&"é".repeat(LINE_BYTES));
        }
        let lines = long.lines();
        assert!(
            lines
                .iter()
                .all(|l| l.len() <= LINE_BYTES && l.ends_with('…'))
        );
        assert!(lines.iter().map(String::len).sum::<usize>() <= TAIL_BYTES);
        assert!(lines.len() < 10);
    }

    #[tokio::test]
    async fn lines_wait_for_the_end_of_the_stream_but_not_forever() {
        let tails = StderrTails::default();
        let (handle, writer) = tails.register();
        writer.push("starting");
        let reader = tails.clone();
        let read = tokio::spawn(async move { reader.lines(handle, Duration::from_secs(30)).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.push("Error: no such timezone");
        drop(writer);
        assert_eq!(
            read.await.ok(),
            Some(vec![
                "starting".to_owned(),
                "Error: no such timezone".to_owned()
            ])
        );

        let (open, still_writing) = tails.register();
        still_writing.push("busy");
        let lines = tails.lines(open, Duration::from_millis(20)).await;
        assert_eq!(lines, vec!["busy".to_owned()]);
        assert!(tails.lines(999, Duration::from_secs(30)).await.is_empty());
    }

    #[test]
    fn only_the_latest_programs_are_kept() {
        let tails = StderrTails::default();
        let first = tails.register().0;
        for _ in 0..KEPT_PROGRAMS {
            tails.register();
        }
        let registry = tails.inner.lock().unwrap();
        assert_eq!(registry.entries.len(), KEPT_PROGRAMS);
        assert!(registry.entries.iter().all(|(h, _)| *h != first));
    }
}
