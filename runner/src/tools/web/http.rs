//! HTTP plumbing shared by the web tools: capped body reads and readable error chains.

use std::error::Error;

/// The User-Agent the web tools send.
pub const USER_AGENT: &str = concat!("herd-runner/", env!("CARGO_PKG_VERSION"));

/// A client builder with the web tools' User-Agent.
///
/// reqwest is compiled without a TLS crypto provider; the process normally installs ring at
/// start, but a client built before that (tests, embedders) would panic inside reqwest, so
/// ring is installed here when nothing is.
pub fn client_builder() -> reqwest::ClientBuilder {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race against another installer is fine: a provider is then in place.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder().user_agent(USER_AGENT)
}

/// Why a body could not be read whole.
#[derive(Debug)]
pub enum BodyError {
    /// The body is longer than the cap; reading stopped there.
    TooLarge,
    Transport(reqwest::Error),
}

/// Reads a response body, stopping as soon as it passes `cap` bytes.
pub async fn read_capped(
    response: &mut reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, BodyError> {
    let declared = response.content_length().unwrap_or(0);
    if declared > u64::try_from(cap).unwrap_or(u64::MAX) {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if body.len() + chunk.len() > cap {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error and its causes on one line (`reqwest`'s own message is only "error sending
/// request"; the reason, such as "connection refused", is in the sources).
pub fn error_chain(error: &(dyn Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = Some(error);
    while let Some(error) = current {
        let text = error.to_string();
        // Layers often repeat their source's message; once is enough.
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        current = error.source();
    }
    parts.join(": ")
}

/// The first error of type `T` in an error's source chain.
pub fn find_source<'a, T: Error + 'static>(error: &'a (dyn Error + 'static)) -> Option<&'a T> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        current = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused")]
    struct Inner;

    /// Serves one chunked response of `chunks` 1 KiB chunks and counts how many were sent
    /// before the client hung up.
    async fn chunked_server(chunks: usize) -> (String, tokio::task::JoinHandle<usize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let handle = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = socket.read(&mut request).await.unwrap();
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\
                        transfer-encoding: chunked\r\n\r\n";
            socket.write_all(head.as_bytes()).await.unwrap();
            let chunk = format!("400\r\n{}\r\n", "x".repeat(1024));
            let mut sent = 0;
            for _ in 0..chunks {
                if socket.write_all(chunk.as_bytes()).await.is_err() {
                    break;
                }
                sent += 1;
                // Let the client read (and hang up) between chunks.
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            let _ = socket.write_all(b"0\r\n\r\n").await;
            sent
        });
        (url, handle)
    }

    #[tokio::test]
    async fn stops_reading_a_streamed_body_past_the_cap() {
        let (url, server) = chunked_server(2000).await;
        let client = client_builder().build().unwrap();
        let mut response = client.get(&url).send().await.unwrap();
        assert_eq!(response.content_length(), None);
        let result = read_capped(&mut response, 8 * 1024).await;
        assert!(matches!(result, Err(BodyError::TooLarge)));
        drop(response);
        let sent = server.await.unwrap();
        assert!(sent < 2000, "the whole body was sent: {sent} chunks");
    }

    #[tokio::test]
    async fn reads_a_streamed_body_under_the_cap() {
        let (url, server) = chunked_server(4).await;
        let client = client_builder().build().unwrap();
        let mut response = client.get(&url).send().await.unwrap();
        let body = read_capped(&mut response, 8 * 1024).await.unwrap();
        assert_eq!(body.len(), 4 * 1024);
        assert_eq!(server.await.unwrap(), 4);
    }

    #[test]
    fn chain_joins_sources_and_finds_types() {
        let error = Outer(Inner);
        assert_eq!(error_chain(&error), "outer: connection refused");
        assert!(find_source::<Inner>(&error).is_some());
        assert!(find_source::<std::io::Error>(&error).is_none());
    }
}
