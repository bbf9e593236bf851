//! Who is calling: the bearer token checked by a TokenReview naming the audience `herd.dev`,
//! accepted only as docs/run-api.md says (authenticated, `herd.dev` among the audiences, the user the
//! namespace's `herd-runner` ServiceAccount, the Pod named in the user's extra). Successful
//! reviews are kept at most [`REVIEW_TTL`] under the SHA-256 of the token, never the token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use kube::Client;
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

use super::failure::Failure;
use crate::decide::run_pod::{RUNNER_SERVICE_ACCOUNT, TOKEN_AUDIENCE};

/// How long a successful review is trusted.
pub const REVIEW_TTL: Duration = Duration::from_secs(60);
/// The user's extra naming the token's Pod.
pub const POD_NAME_EXTRA: &str = "authentication.kubernetes.io/pod-name";
/// The user's extra carrying the token's Pod's UID.
pub const POD_UID_EXTRA: &str = "authentication.kubernetes.io/pod-uid";
/// Reviews kept before the expired ones are dropped.
const PRUNE_ABOVE: usize = 4096;

/// The runner a token belongs to: a Pod running as `herd-runner`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runner {
    /// The ServiceAccount's (and so the Pod's) namespace.
    pub namespace: String,
    /// The Pod's name.
    pub pod_name: String,
    /// The Pod's UID.
    pub pod_uid: String,
}

/// The runner a review vouches for, or why it vouches for none.
pub fn runner_of(status: &TokenReviewStatus) -> Result<Runner, String> {
    if status.authenticated != Some(true) {
        return Err(match status.error.as_deref().filter(|e| !e.is_empty()) {
            Some(error) => format!("the token was not accepted: {error}"),
            None => "the token was not accepted".to_owned(),
        });
    }
    let audiences = status.audiences.as_deref().unwrap_or_default();
    if !audiences.iter().any(|a| a == TOKEN_AUDIENCE) {
        return Err(format!(
            "the token is not for the audience {TOKEN_AUDIENCE}"
        ));
    }
    let user = status.user.as_ref();
    let username = user.and_then(|u| u.username.as_deref()).unwrap_or_default();
    let namespace = username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.strip_suffix(&format!(":{RUNNER_SERVICE_ACCOUNT}")))
        .filter(|ns| !ns.is_empty() && !ns.contains(':'))
        .ok_or_else(|| {
            format!("the token is not of a {RUNNER_SERVICE_ACCOUNT} ServiceAccount: {username}")
        })?;
    let extra = |key: &str| {
        user.and_then(|u| u.extra.as_ref())
            .and_then(|extra| extra.get(key))
            .and_then(|values| values.first())
            .filter(|value| !value.is_empty())
            .cloned()
            .ok_or_else(|| format!("the token is not bound to a Pod (no {key})"))
    };
    Ok(Runner {
        namespace: namespace.to_owned(),
        pod_name: extra(POD_NAME_EXTRA)?,
        pod_uid: extra(POD_UID_EXTRA)?,
    })
}

/// The bearer token of a request.
pub fn bearer_token(headers: &HeaderMap) -> Result<&str, Failure> {
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| Failure::unauthorized("no Authorization header"))?;
    let (scheme, token) = value
        .split_once(' ')
        .ok_or_else(|| Failure::unauthorized("the Authorization header is not a bearer token"))?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(Failure::unauthorized(
            "the Authorization header is not a bearer token",
        ));
    }
    Ok(token)
}

/// The key a token's review is kept under.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Successful reviews by token hash, each until its expiry. A map rather than a cache crate
/// (`moka`): the clock is passed in, so expiry is tested without sleeping, and pruning the
/// expired entries past `PRUNE_ABOVE` bounds it.
#[derive(Debug, Default)]
pub struct ReviewCache {
    reviews: Mutex<HashMap<[u8; 32], (Runner, Instant)>>,
}

impl ReviewCache {
    /// The runner a token hash was reviewed as, while the review is fresh.
    pub fn get(&self, hash: &[u8; 32], now: Instant) -> Option<Runner> {
        let reviews = self
            .reviews
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        reviews
            .get(hash)
            .filter(|(_, expires)| now < *expires)
            .map(|(runner, _)| runner.clone())
    }

    /// Keeps a successful review made at `now`.
    pub fn insert(&self, hash: [u8; 32], runner: Runner, now: Instant) {
        let mut reviews = self
            .reviews
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if reviews.len() >= PRUNE_ABOVE {
            reviews.retain(|_, (_, expires)| now < *expires);
        }
        reviews.insert(hash, (runner, now + REVIEW_TTL));
    }
}

/// The runner a request's token belongs to: from a fresh review, else by a TokenReview.
pub async fn authenticate(
    client: &Client,
    cache: &ReviewCache,
    headers: &HeaderMap,
) -> Result<Runner, Failure> {
    let token = bearer_token(headers)?;
    let hash = token_hash(token);
    if let Some(runner) = cache.get(&hash, Instant::now()) {
        return Ok(runner);
    }
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_owned()),
            audiences: Some(vec![TOKEN_AUDIENCE.to_owned()]),
        },
        ..TokenReview::default()
    };
    let reviewed = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|error| Failure::kube("reviewing the token", &error))?;
    let status = reviewed.status.unwrap_or_default();
    let runner = runner_of(&status).map_err(Failure::unauthorized)?;
    cache.insert(hash, runner.clone(), Instant::now());
    Ok(runner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(value: serde_json::Value) -> TokenReviewStatus {
        serde_json::from_value(value).unwrap()
    }

    fn accepted() -> serde_json::Value {
        json!({
            "authenticated": true,
            "audiences": ["herd.dev"],
            "user": {
                "username": "system:serviceaccount:team-a:herd-runner",
                "uid": "sa-uid",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:team-a"],
                "extra": {
                    "authentication.kubernetes.io/pod-name": ["r-1"],
                    "authentication.kubernetes.io/pod-uid": ["pod-uid-1"],
                    "authentication.kubernetes.io/credential-id": ["JTI=x"]
                }
            }
        })
    }

    fn with(path: &[&str], value: serde_json::Value) -> serde_json::Value {
        let mut review = accepted();
        let mut at = &mut review;
        for key in &path[..path.len() - 1] {
            at = &mut at[*key];
        }
        at[path[path.len() - 1]] = value;
        review
    }

    #[test]
    fn a_runner_token_bound_to_its_pod_is_accepted() {
        assert_eq!(
            runner_of(&status(accepted())),
            Ok(Runner {
                namespace: "team-a".into(),
                pod_name: "r-1".into(),
                pod_uid: "pod-uid-1".into(),
            })
        );
    }

    #[test]
    fn anything_else_is_refused_with_its_reason() {
        let cases = [
            (
                json!({"authenticated": false, "error": "token audiences are invalid"}),
                "the token was not accepted: token audiences are invalid",
            ),
            (json!({}), "the token was not accepted"),
            (
                with(&["audiences"], json!(["https://kubernetes.default.svc"])),
                "the token is not for the audience herd.dev",
            ),
            (
                with(
                    &["user", "username"],
                    json!("system:serviceaccount:team-a:default"),
                ),
                "the token is not of a herd-runner ServiceAccount: system:serviceaccount:team-a:default",
            ),
            (
                with(
                    &["user", "username"],
                    json!("system:serviceaccount::herd-runner"),
                ),
                "the token is not of a herd-runner ServiceAccount: system:serviceaccount::herd-runner",
            ),
            (
                with(&["user", "username"], json!("admin")),
                "the token is not of a herd-runner ServiceAccount: admin",
            ),
            (
                with(&["user", "extra"], json!({})),
                "the token is not bound to a Pod (no authentication.kubernetes.io/pod-name)",
            ),
            (
                with(
                    &["user", "extra", "authentication.kubernetes.io/pod-uid"],
                    json!([]),
                ),
                "the token is not bound to a Pod (no authentication.kubernetes.io/pod-uid)",
            ),
        ];
        for (review, why) in cases {
            assert_eq!(
                runner_of(&status(review.clone())),
                Err(why.to_owned()),
                "{review}"
            );
        }
    }

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer_token(&headers).unwrap_err().status.as_u16(), 401);
        for refused in ["Basic abc", "Bearer ", "Bearer", "token"] {
            headers.insert(header::AUTHORIZATION, refused.parse().unwrap());
            assert!(bearer_token(&headers).is_err(), "{refused}");
        }
        headers.insert(header::AUTHORIZATION, "bearer  abc.def ".parse().unwrap());
        assert_eq!(bearer_token(&headers).unwrap(), "abc.def");
    }

    #[test]
    fn reviews_are_kept_a_minute_under_the_tokens_hash() {
        let cache = ReviewCache::default();
        let runner = runner_of(&status(accepted())).unwrap();
        let now = Instant::now();
        let hash = token_hash("the-token");
        assert_ne!(&hash[..], b"the-token".as_slice());
        assert_eq!(cache.get(&hash, now), None);
        cache.insert(hash, runner.clone(), now);
        assert_eq!(
            cache.get(&hash, now + Duration::from_secs(59)),
            Some(runner)
        );
        assert_eq!(cache.get(&hash, now + REVIEW_TTL), None, "expired");
        assert_eq!(cache.get(&token_hash("another"), now), None);
    }

    #[test]
    fn expired_reviews_are_dropped_past_the_prune_size() {
        let cache = ReviewCache::default();
        let runner = runner_of(&status(accepted())).unwrap();
        let now = Instant::now();
        for i in 0..PRUNE_ABOVE {
            cache.insert(token_hash(&i.to_string()), runner.clone(), now);
        }
        cache.insert(token_hash("late"), runner, now + REVIEW_TTL);
        assert_eq!(cache.reviews.lock().unwrap().len(), 1);
    }
}
