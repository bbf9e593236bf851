//! HTTP plumbing shared by the web tools: capped body reads and readable error chains.

use std::error::Error;

/// The User-Agent the web tools send.
pub const USER_AGENT: &str = concat!("herd-runner/", env!("CARGO_PKG_VERSION"));

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

    #[test]
    fn chain_joins_sources_and_finds_types() {
        let error = Outer(Inner);
        assert_eq!(error_chain(&error), "outer: connection refused");
        assert!(find_source::<Inner>(&error).is_some());
        assert!(find_source::<std::io::Error>(&error).is_none());
    }
}
