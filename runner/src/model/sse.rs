//! Reading a server-sent-event stream: a line-based parser whose cost is linear in the bytes
//! received, a cap on the size of one event, and a limit on the silence between chunks.
//!
//! Only what model servers use of the format is kept: `data:` lines (joined with `\n`), blank
//! lines ending an event, comments; `event:`, `id:` and `retry:` are read and ignored (both
//! providers repeat the event type inside the data). Lines end with `\n`, `\r\n` or `\r`, even
//! when a chunk boundary splits them. An event cut off by the end of the stream is dropped, as
//! the format says; the provider clients then see an answer without its end.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::error::{ModelError, ModelErrorKind};
use super::http::error_chain;

/// The largest event accepted, in bytes of `data`. Model servers stream answers as many small
/// events; one this large is a broken or hostile server, and holding more of it would only
/// cost memory.
pub const MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

/// Why a stream could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SseError {
    #[error("stream event larger than {} MiB", MAX_EVENT_BYTES / (1024 * 1024))]
    TooLarge,
    #[error("stream event that is not UTF-8")]
    NotUtf8,
}

/// An incremental SSE parser: bytes in, the `data` of each complete event out.
///
/// Each byte is looked at a bounded number of times (searched for a line end once, copied into
/// the event once), so parsing is linear in the stream's size whatever the chunking.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Received bytes not yet consumed: at most one unfinished line.
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no line end.
    searched: usize,
    /// The previous chunk ended with `\r`: a `\n` starting this one belongs to it.
    after_cr: bool,
    /// The data of the event being read.
    data: Vec<u8>,
    /// Whether the event being read has a `data` field (possibly empty).
    has_data: bool,
}

impl SseParser {
    /// Parses `chunk` and appends the data of every event it completes to `events`.
    pub fn feed(
        &mut self,
        mut chunk: &[u8],
        events: &mut VecDeque<String>,
    ) -> Result<(), SseError> {
        // An empty chunk says nothing about what follows a `\r`.
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        self.pending.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', &self.pending[self.searched..]) {
            let end = self.searched + offset;
            let mut next = end + 1;
            if self.pending[end] == b'\r' {
                match self.pending.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let line = std::mem::take(&mut self.pending);
            let result = self.line(&line[start..end], events);
            self.pending = line;
            result?;
            start = next;
            self.searched = next;
        }
        self.pending.drain(..start);
        self.searched = self.pending.len();
        // The unfinished line still holds its `data: ` prefix.
        if self.data.len() + self.pending.len() > MAX_EVENT_BYTES + "data: ".len() {
            return Err(SseError::TooLarge);
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8], events: &mut VecDeque<String>) -> Result<(), SseError> {
        if line.is_empty() {
            if self.has_data {
                self.has_data = false;
                let data = std::mem::take(&mut self.data);
                events.push_back(String::from_utf8(data).map_err(|_| SseError::NotUtf8)?);
            }
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        // Comments have an empty field name; other fields are of no use here.
        if field != b"data" {
            return Ok(());
        }
        let separator = usize::from(self.has_data);
        if self.data.len() + separator + value.len() > MAX_EVENT_BYTES {
            return Err(SseError::TooLarge);
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
        Ok(())
    }
}

type Chunks = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// The events of one streaming response.
pub(crate) struct EventReader {
    chunks: Chunks,
    parser: SseParser,
    ready: VecDeque<String>,
    chunk_timeout: Duration,
    server: String,
}

impl EventReader {
    /// Reads `response`'s body as SSE; `server` names the server in errors.
    pub fn new(response: reqwest::Response, chunk_timeout: Duration, server: &str) -> Self {
        EventReader {
            chunks: Box::pin(response.bytes_stream()),
            parser: SseParser::default(),
            ready: VecDeque::new(),
            chunk_timeout,
            server: server.to_owned(),
        }
    }

    /// The data of the next event, `None` at the end of the stream.
    pub async fn next(&mut self) -> Result<Option<String>, ModelError> {
        loop {
            if let Some(data) = self.ready.pop_front() {
                return Ok(Some(data));
            }
            let next = tokio::time::timeout(self.chunk_timeout, self.chunks.next())
                .await
                .map_err(|_| {
                    ModelError::new(
                        ModelErrorKind::Timeout,
                        format!(
                            "{} sent nothing for {} in the middle of its answer",
                            self.server,
                            humantime::format_duration(self.chunk_timeout)
                        ),
                    )
                })?;
            match next {
                None => return Ok(None),
                Some(Ok(chunk)) => self.parser.feed(&chunk, &mut self.ready).map_err(|e| {
                    ModelError::new(
                        ModelErrorKind::InvalidResponse,
                        format!("{} sent a {e}", self.server),
                    )
                })?,
                Some(Err(e)) => {
                    return Err(ModelError::new(
                        ModelErrorKind::Connection,
                        format!("the stream from {} broke: {}", self.server, error_chain(&e)),
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> Result<Vec<String>, SseError> {
        let mut parser = SseParser::default();
        let mut events = VecDeque::new();
        for chunk in chunks {
            parser.feed(chunk, &mut events)?;
        }
        Ok(events.into())
    }

    fn parse(text: &str) -> Vec<String> {
        parse_chunks(&[text.as_bytes()]).unwrap()
    }

    #[test]
    fn events_are_the_data_lines_up_to_a_blank_line() {
        assert_eq!(
            parse("data: {\"a\":1}\n\ndata: [DONE]\n\n"),
            vec!["{\"a\":1}", "[DONE]"]
        );
        assert_eq!(parse("data: one\ndata: two\n\n"), vec!["one\ntwo"]);
        assert_eq!(parse("data:no-space\n\n"), vec!["no-space"]);
        assert_eq!(parse("data:  two spaces\n\n"), vec![" two spaces"]);
        assert_eq!(parse("data\n\n"), vec![""]);
    }

    #[test]
    fn other_fields_and_comments_are_ignored() {
        let text = ": keep-alive\nevent: message_start\nid: 7\nretry: 100\ndata: x\n\n\
                    event: ping\n\n";
        assert_eq!(parse(text), vec!["x"]);
    }

    #[test]
    fn all_line_endings_work_even_split_across_chunks() {
        assert_eq!(
            parse("data: a\r\n\r\ndata: b\r\rdata: c\n\n"),
            vec!["a", "b", "c"]
        );
        let chunks: [&[u8]; 4] = [b"data: a\r", b"\n\r", b"\ndata: b\r", b"\r"];
        assert_eq!(parse_chunks(&chunks).unwrap(), vec!["a", "b"]);
        // An empty chunk between the `\r` and the `\n` of one line end (proptest found it).
        let chunks: [&[u8]; 3] = [b"data: a\r", b"", b"\ndata: b\n\n"];
        assert_eq!(parse_chunks(&chunks).unwrap(), vec!["a\nb"]);
    }

    #[test]
    fn an_event_cut_off_by_the_end_is_dropped() {
        assert_eq!(parse("data: a\n\ndata: half"), vec!["a"]);
        assert_eq!(parse("data: a\n\ndata: whole line\n"), vec!["a"]);
    }

    #[test]
    fn an_event_over_the_cap_is_refused_however_it_arrives() {
        let big = vec![b'x'; MAX_EVENT_BYTES + 1];
        // One line, in one chunk or with no line end yet.
        assert_eq!(
            parse_chunks(&[b"data: ", &big, b"\n\n"]),
            Err(SseError::TooLarge)
        );
        assert_eq!(parse_chunks(&[b"data: ", &big]), Err(SseError::TooLarge));
        // Many lines of one event.
        let half = vec![b'y'; MAX_EVENT_BYTES / 2];
        let chunks: [&[u8]; 6] = [b"data: ", &half, b"\ndata: ", &half, b"\n", b"\n"];
        assert_eq!(parse_chunks(&chunks), Err(SseError::TooLarge));
        // Exactly the cap is fine, in one chunk or byte by byte at the end.
        let full = vec![b'z'; MAX_EVENT_BYTES];
        let events = parse_chunks(&[b"data: ", &full, b"\n", b"\n"]).unwrap();
        assert_eq!(events[0].len(), MAX_EVENT_BYTES);
        assert_eq!(
            SseError::TooLarge.to_string(),
            "stream event larger than 8 MiB"
        );
    }

    #[test]
    fn data_that_is_not_utf8_is_an_error() {
        assert_eq!(
            parse_chunks(&[b"data: \xff\xfe\n\n"]),
            Err(SseError::NotUtf8)
        );
    }

    /// One event as a server could write it: data lines and noise, each line with an ending.
    fn arb_event() -> impl Strategy<Value = (Vec<String>, String)> {
        let line = "[^\r\n]{0,12}";
        let ending = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        let noise = prop_oneof![
            Just(String::new()),
            Just(": comment".to_owned()),
            Just("event: x".to_owned()),
            Just("id: 1".to_owned()),
        ];
        (
            proptest::collection::vec((line, ending.clone()), 1..4),
            noise,
            ending,
        )
            .prop_map(|(lines, noise, noise_end)| {
                // The blank line ends like the last line: `\r` then `\n` would be one `\r\n`.
                let blank = lines.last().map_or("\n", |(_, end)| *end);
                let mut text = String::new();
                if !noise.is_empty() {
                    text.push_str(&noise);
                    text.push_str(noise_end);
                }
                let mut data = Vec::new();
                for (line, end) in lines {
                    text.push_str("data: ");
                    text.push_str(&line);
                    text.push_str(end);
                    data.push(line);
                }
                text.push_str(blank);
                (data, text)
            })
    }

    proptest! {
        /// Any split of a stream into chunks yields the same events as the whole stream.
        #[test]
        fn chunking_never_changes_the_events(
            events in proptest::collection::vec(arb_event(), 0..6),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let text: String = events.iter().map(|(_, text)| text.as_str()).collect();
            let expected: Vec<String> = events.iter().map(|(data, _)| data.join("\n")).collect();
            let bytes = text.as_bytes();
            let mut positions: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            positions.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for to in positions {
                chunks.push(&bytes[from..to]);
                from = to;
            }
            chunks.push(&bytes[from..]);
            prop_assert_eq!(parse_chunks(&chunks).unwrap(), expected);
        }

        /// Arbitrary bytes never panic, and no event exceeds the cap.
        #[test]
        fn arbitrary_bytes_are_safe(chunks in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..64), 0..8)
        ) {
            let mut parser = SseParser::default();
            let mut events = VecDeque::new();
            for chunk in &chunks {
                if parser.feed(chunk, &mut events).is_err() {
                    break;
                }
            }
            prop_assert!(events.iter().all(|e| e.len() <= MAX_EVENT_BYTES));
        }
    }
}
