//! Turning a provider's error answer (status, headers, body) into a typed [`ModelError`].
//!
//! Both HTTP clients share this: the retry policy decides on the kind, so the mapping from
//! status codes and error bodies to kinds must be the same for every provider.

use std::time::Duration;

use herd_sandbox::truncation::truncate_chars;
use reqwest::header::HeaderMap;

use super::error::{ModelError, ModelErrorKind};

/// The longest excerpt of an unparsed error body quoted in a message.
const BODY_EXCERPT_CHARS: usize = 500;

/// The parts of an error body that matter, whatever shape the server used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ErrorDetail {
    /// Human-readable message (or the raw body when it was not JSON).
    pub message: String,
    /// `error.code`, as text (servers send strings or numbers).
    pub code: Option<String>,
    /// `error.type`.
    pub kind: Option<String>,
}

impl ErrorDetail {
    /// Reads `{"error": {"message", "code", "type"}}` (OpenAI, llama.cpp, Anthropic),
    /// `{"error": "text"}` (Ollama), `{"message": ..}` / `{"detail": ..}` (vLLM, proxies),
    /// and falls back to the raw text.
    pub fn parse(body: &str) -> ErrorDetail {
        match serde_json::from_str::<serde_json::Value>(body) {
            Ok(value) => ErrorDetail::from_value(&value).unwrap_or_else(|| ErrorDetail::raw(body)),
            Err(_) => ErrorDetail::raw(body),
        }
    }

    /// Reads the error object of an already parsed body; `None` when it carries no message.
    pub fn from_value(value: &serde_json::Value) -> Option<ErrorDetail> {
        let error = value.get("error").unwrap_or(value);
        if let Some(text) = error.as_str() {
            return Some(ErrorDetail {
                message: text.to_owned(),
                ..ErrorDetail::default()
            });
        }
        let message = ["message", "detail"]
            .iter()
            .find_map(|key| error.get(*key).and_then(|m| m.as_str()))?;
        Some(ErrorDetail {
            message: message.to_owned(),
            code: error.get("code").and_then(scalar_text),
            kind: error.get("type").and_then(scalar_text),
        })
    }

    fn raw(body: &str) -> ErrorDetail {
        let trimmed = body.trim();
        ErrorDetail {
            message: truncate_chars(trimmed, BODY_EXCERPT_CHARS),
            ..ErrorDetail::default()
        }
    }

    /// Whether the server says the prompt does not fit the context window. Servers word this
    /// differently; these are the phrasings of OpenAI, vLLM, DeepSeek, llama.cpp and Anthropic.
    pub fn is_context_overflow(&self) -> bool {
        const CODES: [&str; 2] = ["context_length_exceeded", "exceed_context_size_error"];
        const PHRASES: [&str; 7] = [
            "maximum context length",
            "exceeds the context",
            "exceeds the available context",
            "context size",
            "context window",
            "context length",
            "prompt is too long",
        ];
        let tagged = [&self.code, &self.kind]
            .into_iter()
            .flatten()
            .any(|tag| CODES.iter().any(|code| tag.eq_ignore_ascii_case(code)));
        let message = self.message.to_ascii_lowercase();
        tagged || PHRASES.iter().any(|phrase| message.contains(phrase))
    }

    /// Whether the account is out of credit (OpenAI sends this with a 429).
    pub fn is_quota(&self) -> bool {
        [&self.code, &self.kind].into_iter().flatten().any(|tag| {
            tag.eq_ignore_ascii_case("insufficient_quota")
                || tag.eq_ignore_ascii_case("billing_error")
        })
    }
}

fn scalar_text(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The error for a non-2xx answer from `server` (e.g. "the model server at http://...").
pub(crate) fn error_from_status(
    server: &str,
    status: u16,
    headers: &HeaderMap,
    body: &str,
) -> ModelError {
    let detail = ErrorDetail::parse(body);
    let kind = kind_for_status(status, &detail);
    let mut error = ModelError::new(kind, describe(server, Some(status), kind, &detail.message));
    error.status = Some(status);
    error.retry_after = retry_after(headers, jiff::Timestamp::now());
    error
}

/// The error for an error object received inside a stream (after a 200).
pub(crate) fn error_from_stream(
    server: &str,
    detail: &ErrorDetail,
    kind_hint: Option<ModelErrorKind>,
) -> ModelError {
    let status = detail
        .code
        .as_deref()
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|code| (400..600).contains(code));
    let kind = if detail.is_context_overflow() {
        ModelErrorKind::ContextOverflow
    } else if let Some(kind) = kind_hint {
        kind
    } else if let Some(status) = status {
        kind_for_status(status, detail)
    } else {
        ModelErrorKind::Server
    };
    let mut error = ModelError::new(kind, describe(server, status, kind, &detail.message));
    error.status = status;
    error
}

fn kind_for_status(status: u16, detail: &ErrorDetail) -> ModelErrorKind {
    match status {
        401 | 403 => ModelErrorKind::Auth,
        402 => ModelErrorKind::Quota,
        _ if detail.is_quota() => ModelErrorKind::Quota,
        429 => ModelErrorKind::RateLimited,
        // Overflow is checked before the 5xx rule: some servers answer it with a 500, and
        // retrying a prompt that cannot fit only burns time.
        _ if detail.is_context_overflow() => ModelErrorKind::ContextOverflow,
        408 | 409 | 425 | 500..=599 => ModelErrorKind::Server,
        400..=499 => ModelErrorKind::BadRequest,
        _ => ModelErrorKind::InvalidResponse,
    }
}

fn describe(server: &str, status: Option<u16>, kind: ModelErrorKind, message: &str) -> String {
    let status = status.map(|s| format!(" ({s})")).unwrap_or_default();
    match kind {
        ModelErrorKind::ContextOverflow => format!(
            "the conversation does not fit the model's context window: {server} said{status}: \
             {message}. Give the model a larger context (e.g. llama.cpp `--ctx-size`, Ollama \
             `num_ctx`) and raise the Agent's `model.contextWindow` to match, or enable \
             `summarization` so older messages are compacted"
        ),
        ModelErrorKind::Auth => format!(
            "{server} refused the credentials{status}: {message}. Check the API key \
             (`model.apiKeySecretRef`, or `--api-key-env` locally)"
        ),
        ModelErrorKind::Quota => {
            format!("{server} reports the account is out of credit or quota{status}: {message}")
        }
        ModelErrorKind::RateLimited => format!("{server} is rate limiting{status}: {message}"),
        _ => format!("{server} answered with an error{status}: {message}"),
    }
}

/// Reads `retry-after-ms` (OpenAI) or `retry-after` (seconds or an HTTP date).
pub(crate) fn retry_after(headers: &HeaderMap, now: jiff::Timestamp) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return duration_from_secs(ms / 1000.0);
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return duration_from_secs(secs);
    }
    static PARSER: jiff::fmt::rfc2822::DateTimeParser = jiff::fmt::rfc2822::DateTimeParser::new();
    let at = PARSER.parse_timestamp(value).ok()?;
    let wait = now.duration_until(at);
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

fn duration_from_secs(secs: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(secs.max(0.0)).ok()
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn kind(status: u16, body: &str) -> ModelErrorKind {
        error_from_status("server", status, &HeaderMap::new(), body).kind
    }

    #[test]
    fn statuses_map_to_kinds() {
        assert_eq!(kind(401, "{}"), ModelErrorKind::Auth);
        assert_eq!(kind(403, "{}"), ModelErrorKind::Auth);
        assert_eq!(kind(402, "{}"), ModelErrorKind::Quota);
        assert_eq!(kind(429, "{}"), ModelErrorKind::RateLimited);
        assert_eq!(kind(408, "{}"), ModelErrorKind::Server);
        assert_eq!(kind(409, "{}"), ModelErrorKind::Server);
        assert_eq!(kind(425, "{}"), ModelErrorKind::Server);
        assert_eq!(kind(500, "{}"), ModelErrorKind::Server);
        assert_eq!(kind(529, "{}"), ModelErrorKind::Server);
        assert_eq!(kind(404, "{}"), ModelErrorKind::BadRequest);
        assert_eq!(kind(302, "{}"), ModelErrorKind::InvalidResponse);
    }

    #[test]
    fn insufficient_quota_wins_over_429() {
        let body = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        assert_eq!(kind(429, body), ModelErrorKind::Quota);
    }

    #[test]
    fn context_overflow_is_recognised_in_every_wording() {
        let bodies = [
            r#"{"error":{"message":"This model's maximum context length is 4096 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#,
            r#"{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 3000 tokens","type":"BadRequestError","code":400}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
            r#"{"error":"input exceeds the context window"}"#,
        ];
        for body in bodies {
            let error = error_from_status("server", 400, &HeaderMap::new(), body);
            assert_eq!(error.kind, ModelErrorKind::ContextOverflow, "{body}");
            assert!(error.message.contains("contextWindow"), "{}", error.message);
            assert!(error.message.contains("summarization"), "{}", error.message);
        }
        assert_eq!(
            kind(500, r#"{"error":{"message":"context size exceeded"}}"#),
            ModelErrorKind::ContextOverflow
        );
        assert_eq!(
            kind(400, r#"{"error":{"message":"bad temperature"}}"#),
            ModelErrorKind::BadRequest
        );
    }

    #[test]
    fn error_bodies_of_every_shape_surface_their_message() {
        let cases = [
            (
                r#"{"error":{"code":"x","message":"from openai","type":"t"}}"#,
                "from openai",
            ),
            (r#"{"error":"from ollama"}"#, "from ollama"),
            (r#"{"detail":"from a proxy"}"#, "from a proxy"),
            ("plain text failure", "plain text failure"),
        ];
        for (body, expected) in cases {
            let error = error_from_status("the server", 500, &HeaderMap::new(), body);
            assert!(error.message.contains(expected), "{}", error.message);
            assert!(error.message.contains("the server"), "{}", error.message);
            assert_eq!(error.status, Some(500));
        }
        let detail = ErrorDetail::parse(r#"{"error":{"code":429,"message":"m","type":"t"}}"#);
        assert_eq!(detail.code.as_deref(), Some("429"));
        assert_eq!(detail.kind.as_deref(), Some("t"));
    }

    #[test]
    fn long_raw_bodies_are_cut() {
        let body = "x".repeat(5000);
        let detail = ErrorDetail::parse(&body);
        assert_eq!(detail.message.chars().count(), BODY_EXCERPT_CHARS + 1);
    }

    #[test]
    fn retry_after_reads_seconds_dates_and_milliseconds() {
        let now: jiff::Timestamp = "2015-10-21T07:28:00Z".parse().unwrap();
        assert_eq!(
            retry_after(&headers(&[("retry-after", "7")]), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1.5")]), now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")]),
                now
            ),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT")]),
                now
            ),
            Some(Duration::ZERO)
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "250"), ("retry-after", "9")]),
                now
            ),
            Some(Duration::from_millis(250))
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn stream_errors_use_numeric_codes_and_hints() {
        let detail = ErrorDetail::parse(r#"{"error":{"code":429,"message":"slow down"}}"#);
        let error = error_from_stream("s", &detail, None);
        assert_eq!(error.kind, ModelErrorKind::RateLimited);
        assert_eq!(error.status, Some(429));
        let detail = ErrorDetail::parse(r#"{"error":{"message":"boom"}}"#);
        assert_eq!(
            error_from_stream("s", &detail, None).kind,
            ModelErrorKind::Server
        );
        assert_eq!(
            error_from_stream("s", &detail, Some(ModelErrorKind::Auth)).kind,
            ModelErrorKind::Auth
        );
    }
}
