//! Typed model errors: the retry policy decides on `kind`, never on message text alone.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What went wrong, as far as retrying is concerned.
///
/// Serialized in camelCase (`rateLimited`, `contextOverflow`...), as scripts and reports
/// name it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub enum ModelErrorKind {
    /// 429 and "busy" answers: retry after a pause (honouring `Retry-After`).
    RateLimited,
    /// 408/409/425/5xx: retry.
    Server,
    /// Could not connect, connection reset, DNS: retry.
    Connection,
    /// The request or a stream chunk took too long: retry.
    Timeout,
    /// 401/403: never retried.
    Auth,
    /// Out of credit / quota exceeded: never retried.
    Quota,
    /// The prompt does not fit the model's context window: never retried.
    ContextOverflow,
    /// Any other 4xx: never retried.
    BadRequest,
    /// The server answered something we could not understand.
    InvalidResponse,
    /// The scripted model has no rule for this request.
    NoScriptMatch,
}

impl ModelErrorKind {
    /// Whether trying the same request again may help.
    pub fn is_retriable(self) -> bool {
        matches!(
            self,
            ModelErrorKind::RateLimited
                | ModelErrorKind::Server
                | ModelErrorKind::Connection
                | ModelErrorKind::Timeout
        )
    }
}

/// A failed model call.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    pub kind: ModelErrorKind,
    /// HTTP status, when the server answered.
    pub status: Option<u16>,
    /// The server's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
    /// A message fit for the user: what failed and, where known, what to do.
    pub message: String,
}

impl ModelError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        ModelError {
            kind,
            status: None,
            retry_after: None,
            message: message.into(),
        }
    }

    /// Whether trying the same request again may help.
    pub fn is_retriable(&self) -> bool {
        self.kind.is_retriable()
    }
}
