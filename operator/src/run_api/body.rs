//! Request bodies: refused at once when `Content-Length` is over the route's limit (before any
//! TokenReview), read under the limit otherwise, and parsed as the route's wire type. A body
//! that is too large, cut short or not the type's JSON is a clear 413 or 400, never a panic.

use axum::body::Body;
use axum::http::{HeaderMap, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;

use super::failure::Failure;

/// Refuses a body whose declared length is over `limit`.
pub fn check_declared_length(headers: &HeaderMap, limit: usize) -> Result<(), Failure> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(length) if length > limit as u64 => Err(Failure::too_large(limit)),
        _ => Ok(()),
    }
}

/// Reads the whole body, at most `limit` bytes.
pub async fn read_limited(body: Body, limit: usize) -> Result<axum::body::Bytes, Failure> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(Failure::too_large(limit)),
        Err(error) => Err(Failure::bad_request(format!(
            "the body could not be read: {error}"
        ))),
    }
}

/// Parses `bytes` as the JSON of `T` (unknown fields accepted).
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Failure> {
    serde_json::from_slice(bytes).map_err(|error| {
        Failure::bad_request(format!(
            "the body is not a valid {}: {error}",
            short_type_name::<T>()
        ))
    })
}

fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::wire::ProgressReport;
    use proptest::prelude::*;

    #[test]
    fn a_declared_length_over_the_limit_is_refused() {
        let mut headers = HeaderMap::new();
        assert!(check_declared_length(&headers, 10).is_ok(), "undeclared");
        headers.insert(header::CONTENT_LENGTH, "10".parse().unwrap());
        assert!(check_declared_length(&headers, 10).is_ok());
        headers.insert(header::CONTENT_LENGTH, "11".parse().unwrap());
        assert_eq!(
            check_declared_length(&headers, 10)
                .unwrap_err()
                .status
                .as_u16(),
            413
        );
    }

    #[tokio::test]
    async fn a_body_is_read_under_its_limit() {
        let bytes = read_limited(Body::from("0123456789"), 10).await.unwrap();
        assert_eq!(&bytes[..], b"0123456789");
        let over = read_limited(Body::from("0123456789!"), 10)
            .await
            .unwrap_err();
        assert_eq!((over.status.as_u16(), over.reason), (413, "TooLarge"));
    }

    #[test]
    fn parse_errors_name_the_type_and_unknown_fields_pass() {
        let report: ProgressReport =
            parse(br#"{"attempt": 1, "seq": 2, "newField": true}"#).unwrap();
        assert_eq!((report.attempt, report.seq), (1, 2));
        let error = parse::<ProgressReport>(br#"{"attempt": "one"}"#).unwrap_err();
        assert_eq!(error.status.as_u16(), 400);
        assert!(
            error
                .message
                .starts_with("the body is not a valid ProgressReport: "),
            "{}",
            error.message
        );
    }

    proptest! {
        #[test]
        fn no_body_makes_parse_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse::<herd_crds::wire::ResultReport>(&bytes);
            let _ = parse::<ProgressReport>(&bytes);
        }
    }
}
