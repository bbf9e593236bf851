//! Reading a server-sent-event stream with a limit on the silence between chunks.

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

use super::error::{ModelError, ModelErrorKind};
use super::http::error_chain;

type Events = Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<reqwest::Error>>> + Send>>;

/// The events of one streaming response.
pub(crate) struct EventReader {
    events: Events,
    chunk_timeout: Duration,
    server: String,
}

impl EventReader {
    /// Reads `response`'s body as SSE; `server` names the server in errors.
    pub fn new(response: reqwest::Response, chunk_timeout: Duration, server: &str) -> Self {
        EventReader {
            events: Box::pin(response.bytes_stream().eventsource()),
            chunk_timeout,
            server: server.to_owned(),
        }
    }

    /// The next event, `None` at the end of the stream.
    pub async fn next(&mut self) -> Result<Option<Event>, ModelError> {
        let next = tokio::time::timeout(self.chunk_timeout, self.events.next())
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
            None => Ok(None),
            Some(Ok(event)) => Ok(Some(event)),
            Some(Err(EventStreamError::Transport(e))) => Err(ModelError::new(
                ModelErrorKind::Connection,
                format!("the stream from {} broke: {}", self.server, error_chain(&e)),
            )),
            Some(Err(e)) => Err(ModelError::new(
                ModelErrorKind::InvalidResponse,
                format!("{} sent a malformed event stream: {e}", self.server),
            )),
        }
    }
}
