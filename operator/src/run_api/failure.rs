//! Why the run API refuses a request: an HTTP status with a reason of [`api_error`], answered as
//! an `ApiError` JSON body (and `Retry-After` for 429), never a panic or a plain-text page.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use herd_crds::wire::{ApiError, api_error};

/// A refused request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The HTTP status.
    pub status: StatusCode,
    /// One of [`api_error`]'s reasons.
    pub reason: &'static str,
    /// What went wrong, for the runner's log (never a token or a Secret value).
    pub message: String,
    /// Whole seconds to wait, for 429.
    pub retry_after: Option<u64>,
}

impl Failure {
    fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Failure {
            status,
            reason,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400: a body that does not parse or breaks a limit.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, api_error::BAD_REQUEST, message)
    }

    /// 401: no token, or one not accepted.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, api_error::UNAUTHORIZED, message)
    }

    /// 403: the token's Pod is not the Run's in the path.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, api_error::FORBIDDEN, message)
    }

    /// 404: no such Run, or no such route.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, api_error::NOT_FOUND, message)
    }

    /// 409: a Pod of an older attempt.
    pub fn stale_attempt(pod: u32, current: u32) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            api_error::STALE_ATTEMPT,
            format!("this Pod serves attempt {pod}, but the Run is at attempt {current}"),
        )
    }

    /// 409: the Run has ended, so its attempt is over too: the runner stops as for a later
    /// attempt.
    pub fn ended(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, api_error::STALE_ATTEMPT, message)
    }

    /// 413: the body is over `limit` bytes.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            api_error::TOO_LARGE,
            format!("the body is over this route's limit of {limit} bytes"),
        )
    }

    /// 429: over the Run's request rate; retry after `seconds`.
    pub fn rate_limited(seconds: u64) -> Self {
        Failure {
            retry_after: Some(seconds),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                api_error::RATE_LIMITED,
                format!("over the Run's request rate; retry in {seconds}s"),
            )
        }
    }

    /// 500: the request cannot succeed as things stand.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            api_error::INTERNAL,
            message,
        )
    }

    /// 503: the API server is not available now; the runner retries.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            api_error::UNAVAILABLE,
            message,
        )
    }

    /// A failed Kubernetes API call while doing `what`: worth a retry (503) when the server was
    /// unreachable, throttled or failing, else 500.
    pub fn kube(what: &str, error: &kube::Error) -> Self {
        let message = format!("{what}: {error}");
        match error {
            kube::Error::Api(status) if status.code == 429 || status.code >= 500 => {
                Self::unavailable(message)
            }
            kube::Error::Api(_) => Self::internal(message),
            _ => Self::unavailable(message),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = ApiError {
            reason: self.reason.to_owned(),
            message: self.message,
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn answer(failure: Failure) -> (StatusCode, Option<String>, ApiError) {
        let response = failure.into_response();
        let status = response.status();
        let retry = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, retry, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn every_failure_is_an_api_error_body() {
        let cases = [
            (Failure::bad_request("b"), 400, "BadRequest"),
            (Failure::unauthorized("u"), 401, "Unauthorized"),
            (Failure::forbidden("f"), 403, "Forbidden"),
            (Failure::not_found("n"), 404, "NotFound"),
            (Failure::stale_attempt(1, 2), 409, "StaleAttempt"),
            (Failure::ended("e"), 409, "StaleAttempt"),
            (Failure::too_large(10), 413, "TooLarge"),
            (Failure::internal("i"), 500, "Internal"),
            (Failure::unavailable("a"), 503, "Unavailable"),
        ];
        for (failure, status, reason) in cases {
            let (got, retry, body) = answer(failure).await;
            assert_eq!((got.as_u16(), body.reason.as_str()), (status, reason));
            assert!(!body.message.is_empty());
            assert_eq!(retry, None);
        }
        let (status, retry, body) = answer(Failure::rate_limited(2)).await;
        assert_eq!(
            (status.as_u16(), retry.as_deref(), body.reason.as_str()),
            (429, Some("2"), "RateLimited")
        );
        let (_, _, stale) = answer(Failure::stale_attempt(1, 2)).await;
        assert_eq!(
            stale.message,
            "this Pod serves attempt 1, but the Run is at attempt 2"
        );
    }

    #[test]
    fn kubernetes_errors_are_retried_only_when_transient() {
        let api = |code: u16| {
            kube::Error::Api(
                kube::core::Status::failure("m", "R")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert_eq!(Failure::kube("x", &api(429)).status.as_u16(), 503);
        assert_eq!(Failure::kube("x", &api(503)).status.as_u16(), 503);
        assert_eq!(Failure::kube("x", &api(403)).status.as_u16(), 500);
        assert_eq!(Failure::kube("x", &api(422)).status.as_u16(), 500);
        assert!(
            Failure::kube("reading the Run", &api(422))
                .message
                .starts_with("reading the Run: ")
        );
    }
}
