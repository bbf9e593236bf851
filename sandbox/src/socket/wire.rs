//! The socket's framing: one JSON object per line, each request carrying an id its response
//! repeats, so many requests can be in flight on one connection. Lines are read with a size
//! limit, so a runaway peer cannot make the other side buffer without bound.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::protocol::{SandboxRequest, SandboxResponse};

/// Largest request line the server accepts (a `write_file` is at most 80 KB; appends and
/// framework writes can be larger).
pub(crate) const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;
/// Largest response line the client accepts (`ReadFile` answers carry base64 images).
pub(crate) const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Bytes of an oversized line kept to recover its id.
const ID_PREFIX_BYTES: usize = 64;

/// A request on the wire. `id` is serialized first so an oversized line's id can still be
/// read from its first bytes.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub(crate) struct RequestEnvelope {
    pub id: u64,
    pub request: SandboxRequest,
}

/// A response on the wire; `id` is absent only when the request's id could not be read.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub(crate) struct ResponseEnvelope {
    pub id: Option<u64>,
    pub response: SandboxResponse,
}

/// One line read from a peer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A whole line, without its newline.
    Complete(Vec<u8>),
    /// A line over the limit, consumed and dropped; `prefix` holds its first bytes.
    TooLong { prefix: Vec<u8> },
    /// The peer closed the connection (a partial last line is dropped: it was never sent
    /// whole).
    Eof,
}

/// Reads one newline-terminated line of at most `limit` bytes.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> std::io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(Line::Eof);
        }
        let (chunk, used, done) = match buffer.iter().position(|byte| *byte == b'\n') {
            Some(end) => (&buffer[..end], end + 1, true),
            None => (buffer, buffer.len(), false),
        };
        if !too_long && line.len() + chunk.len() > limit {
            too_long = true;
            line.truncate(ID_PREFIX_BYTES);
            let room = ID_PREFIX_BYTES.saturating_sub(line.len());
            line.extend_from_slice(&chunk[..room.min(chunk.len())]);
        } else if !too_long {
            line.extend_from_slice(chunk);
        }
        reader.consume(used);
        if done {
            return Ok(if too_long {
                Line::TooLong { prefix: line }
            } else {
                Line::Complete(line)
            });
        }
    }
}

/// The id at the start of a request line (`{"id":42,...`), if it can be read.
pub(crate) fn leading_id(prefix: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(prefix);
    let rest = text.trim_start().strip_prefix('{')?.trim_start();
    let rest = rest
        .strip_prefix("\"id\"")?
        .trim_start()
        .strip_prefix(':')?;
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `value` as one JSON line.
pub(crate) fn to_line<T: Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    Ok(line)
}

#[cfg(test)]
mod tests {
    use tokio::io::BufReader;

    use super::*;

    #[tokio::test]
    async fn reads_lines_and_drops_oversized_ones_whole() -> std::io::Result<()> {
        let input = format!(
            "short\n{{\"id\":7,\"x\":\"{}\"}}\nnext\npartial",
            "y".repeat(100)
        );
        // A tiny buffer makes lines span many reads.
        let mut reader = BufReader::with_capacity(8, input.as_bytes());
        assert_eq!(
            read_line(&mut reader, 20).await?,
            Line::Complete(b"short".to_vec())
        );
        let Line::TooLong { prefix } = read_line(&mut reader, 20).await? else {
            panic!("expected an oversized line");
        };
        assert_eq!(leading_id(&prefix), Some(7));
        assert_eq!(
            read_line(&mut reader, 20).await?,
            Line::Complete(b"next".to_vec())
        );
        assert_eq!(read_line(&mut reader, 20).await?, Line::Eof);
        Ok(())
    }

    #[test]
    fn ids_are_read_from_line_prefixes() -> serde_json::Result<()> {
        let line = to_line(&RequestEnvelope {
            id: 12345,
            request: SandboxRequest::ListSkills,
        })?;
        assert_eq!(leading_id(&line[..12]), Some(12345));
        assert_eq!(leading_id(b" { \"id\" : 9 }"), Some(9));
        assert_eq!(leading_id(b"{\"request\":1,\"id\":3}"), None);
        assert_eq!(leading_id(b"garbage"), None);
        Ok(())
    }
}
