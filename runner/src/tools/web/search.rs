//! The `SearchProvider` seam of `web_search`, its results and errors.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::StatusCode;

use super::html::html_to_text;
use super::http::{BodyError, error_chain, read_capped};

/// Longest provider message shown to the model.
const MAX_MESSAGE_CHARS: usize = 300;

/// Largest error body read for its message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// One search hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchResult {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// A web search backend (SearXNG, Tavily...).
#[async_trait]
pub trait SearchProvider: Send + Sync {
    /// The provider's name, so tests can tell which backend the settings built.
    #[cfg(test)]
    fn name(&self) -> &'static str;
    /// At most `max_results` results for `query`, best first.
    async fn search(
        &self,
        query: &str,
        max_results: usize,
    ) -> Result<Vec<SearchResult>, SearchError>;
}

/// Why a search failed; the text is what the model reads, so it never holds a credential.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    #[error("{provider} search timed out after {}s", .after.as_secs_f64())]
    Timeout {
        provider: &'static str,
        after: Duration,
    },
    #[error("{provider} returned HTTP {status}: {message}")]
    Status {
        provider: &'static str,
        status: StatusCode,
        message: String,
    },
    #[error("{provider} request failed: {reason}")]
    Transport {
        provider: &'static str,
        reason: String,
    },
    #[error("{provider} returned a response that could not be read: {reason}")]
    InvalidResponse {
        provider: &'static str,
        reason: String,
    },
}

impl SearchError {
    /// A reqwest failure, as a timeout or a transport error.
    pub fn from_reqwest(provider: &'static str, timeout: Duration, error: reqwest::Error) -> Self {
        if error.is_timeout() {
            SearchError::Timeout {
                provider,
                after: timeout,
            }
        } else if error.is_decode() {
            SearchError::InvalidResponse {
                provider,
                reason: error_chain(&error.without_url()),
            }
        } else {
            // Without the URL: a base URL may carry credentials (`https://user:pw@host`).
            SearchError::Transport {
                provider,
                reason: error_chain(&error.without_url()),
            }
        }
    }

    /// The error with every occurrence of `secret` masked: providers echo keys back in
    /// messages ("invalid API key tvly-..."), and the model must never see one.
    pub fn redact(self, secret: Option<&str>) -> Self {
        let Some(secret) = secret.filter(|secret| !secret.is_empty()) else {
            return self;
        };
        let mask = |text: String| text.replace(secret, "[REDACTED]");
        match self {
            SearchError::Status {
                provider,
                status,
                message,
            } => SearchError::Status {
                provider,
                status,
                message: mask(message),
            },
            SearchError::Transport { provider, reason } => SearchError::Transport {
                provider,
                reason: mask(reason),
            },
            SearchError::InvalidResponse { provider, reason } => SearchError::InvalidResponse {
                provider,
                reason: mask(reason),
            },
            timeout @ SearchError::Timeout { .. } => timeout,
        }
    }
}

/// Turns a non-2xx response into a `Status` error carrying the provider's own message.
pub async fn status_error(
    provider: &'static str,
    timeout: Duration,
    mut response: reqwest::Response,
) -> SearchError {
    let status = response.status();
    let message = match read_capped(&mut response, MAX_ERROR_BODY).await {
        Ok(body) => provider_message(&body),
        Err(BodyError::TooLarge) => String::new(),
        Err(BodyError::Transport(error)) => {
            return SearchError::from_reqwest(provider, timeout, error);
        }
    };
    let message = if message.is_empty() {
        status.canonical_reason().unwrap_or("no message").to_owned()
    } else {
        message
    };
    SearchError::Status {
        provider,
        status,
        message,
    }
}

/// The human part of an error body: a JSON API's message field, or the text of the body.
fn provider_message(body: &[u8]) -> String {
    let text = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(json) => json_message(&json).unwrap_or_else(|| json.to_string()),
        Err(_) if body.trim_ascii_start().starts_with(b"<") => html_to_text(body, None)
            .map(|page| page.title.unwrap_or(page.text))
            .unwrap_or_default(),
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    compact(&text, MAX_MESSAGE_CHARS)
}

/// `{"detail": {"error": m}}` (Tavily), `{"detail": m}`, `{"error": m | {"message": m}}`,
/// `{"message": m}`.
fn json_message(json: &serde_json::Value) -> Option<String> {
    let text = |value: &serde_json::Value| value.as_str().map(str::to_owned);
    json.get("detail")
        .and_then(|detail| text(detail).or_else(|| detail.get("error").and_then(text)))
        .or_else(|| {
            json.get("error")
                .and_then(|error| text(error).or_else(|| error.get("message").and_then(text)))
        })
        .or_else(|| json.get("message").and_then(text))
}

/// Whitespace collapsed and cut to `max` characters, with an ellipsis when cut.
pub fn compact(text: &str, max: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match collapsed.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", collapsed[..end].trim_end()),
        None => collapsed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_provider_messages() {
        let cases: [(&[u8], &str); 6] = [
            (
                br#"{"detail":{"error":"Unauthorized: missing or invalid API key."}}"#,
                "Unauthorized: missing or invalid API key.",
            ),
            (br#"{"detail":"Rate limit"}"#, "Rate limit"),
            (br#"{"error":{"message":"bad query"}}"#, "bad query"),
            (br#"{"message":"nope"}"#, "nope"),
            (
                b"<html><head><title>403 Forbidden</title></head><body>x</body></html>",
                "403 Forbidden",
            ),
            (b"  plain\n  text  ", "plain text"),
        ];
        for (body, expected) in cases {
            assert_eq!(provider_message(body), expected);
        }
    }

    #[test]
    fn redact_masks_the_secret_everywhere() {
        let error = SearchError::Status {
            provider: "tavily",
            status: StatusCode::UNAUTHORIZED,
            message: "key tvly-123 is invalid (tvly-123)".to_owned(),
        };
        assert_eq!(
            error.redact(Some("tvly-123")).to_string(),
            "tavily returned HTTP 401 Unauthorized: key [REDACTED] is invalid ([REDACTED])"
        );
    }

    #[test]
    fn compact_collapses_and_cuts() {
        assert_eq!(compact(" a \n b ", 10), "a b");
        assert_eq!(compact("abcdef", 3), "abc…");
    }
}
