//! Tavily: a hosted search API for agents (`POST {baseURL}/search`, bearer key).

use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use serde::Deserialize;

use super::http::client_builder;
use super::search::{SearchError, SearchProvider, SearchResult, status_error};

const NAME: &str = "tavily";

/// Tavily's public endpoint, used when no baseURL is given.
pub const DEFAULT_BASE_URL: &str = "https://api.tavily.com";

/// A Tavily client. Its key never appears in its errors or its `Debug` output.
pub struct Tavily {
    endpoint: Url,
    api_key: String,
    timeout: Duration,
    client: reqwest::Client,
}

impl std::fmt::Debug for Tavily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tavily")
            .field("endpoint", &self.endpoint.as_str())
            .field("api_key", &"[REDACTED]")
            .finish_non_exhaustive()
    }
}

impl Tavily {
    /// A client of `base_url` (default [`DEFAULT_BASE_URL`]) with `api_key`.
    pub fn new(base_url: Option<&str>, api_key: String, timeout: Duration) -> Result<Self, String> {
        let base_url = base_url.unwrap_or(DEFAULT_BASE_URL);
        let endpoint = Url::parse(&format!("{}/search", base_url.trim_end_matches('/')))
            .map_err(|error| format!("invalid Tavily baseURL {base_url:?}: {error}"))?;
        if !matches!(endpoint.scheme(), "http" | "https") {
            return Err(format!(
                "invalid Tavily baseURL {base_url:?}: it must be an http(s) URL"
            ));
        }
        if api_key.trim().is_empty() {
            return Err("tavily needs an API key (tools.webSearch.apiKeySecretRef)".to_owned());
        }
        let client = client_builder()
            .timeout(timeout)
            .build()
            .map_err(|error| format!("cannot build the Tavily HTTP client: {error}"))?;
        Ok(Tavily {
            endpoint,
            api_key,
            timeout,
            client,
        })
    }

    async fn request(&self, query: &str, max_results: usize) -> Result<Response, SearchError> {
        let response = self
            .client
            .post(self.endpoint.clone())
            .bearer_auth(&self.api_key)
            .json(&serde_json::json!({"query": query, "max_results": max_results}))
            .send()
            .await
            .map_err(|error| SearchError::from_reqwest(NAME, self.timeout, error))?;
        if !response.status().is_success() {
            return Err(status_error(NAME, self.timeout, response).await);
        }
        response
            .json::<Response>()
            .await
            .map_err(|error| SearchError::from_reqwest(NAME, self.timeout, error))
    }
}

/// The parts of Tavily's JSON answer used here.
#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    results: Vec<Hit>,
}

#[derive(Deserialize)]
struct Hit {
    #[serde(default)]
    title: String,
    url: String,
    #[serde(default)]
    content: String,
}

#[async_trait]
impl SearchProvider for Tavily {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        NAME
    }

    async fn search(
        &self,
        query: &str,
        max_results: usize,
    ) -> Result<Vec<SearchResult>, SearchError> {
        let response = self
            .request(query, max_results)
            .await
            .map_err(|error| error.redact(Some(&self.api_key)))?;
        Ok(response
            .results
            .into_iter()
            .take(max_results)
            .map(|hit| SearchResult {
                title: hit.title,
                url: hit.url,
                snippet: hit.content,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    const KEY: &str = "tvly-dev-0123456789secret";

    fn provider(server: &MockServer, timeout: Duration) -> Tavily {
        Tavily::new(Some(&server.uri()), KEY.to_owned(), timeout).unwrap()
    }

    #[tokio::test]
    async fn posts_the_query_with_the_key_and_parses_results() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/search"))
            .and(header("authorization", format!("Bearer {KEY}").as_str()))
            .and(body_json(json!({"query": "herd operator", "max_results": 3})))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "query": "herd operator",
                "answer": null,
                "results": [
                    {"title": "Herd", "url": "https://herd.dev/", "content": "Agents on Kubernetes", "score": 0.9},
                    {"title": "Operators", "url": "https://kubernetes.io/docs/concepts/extend-kubernetes/operator/", "content": "Pattern", "score": 0.5}
                ],
                "response_time": 1.2
            })))
            .expect(1)
            .mount(&server)
            .await;
        let results = provider(&server, Duration::from_secs(5))
            .search("herd operator", 3)
            .await
            .unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(
            results[0],
            SearchResult {
                title: "Herd".into(),
                url: "https://herd.dev/".into(),
                snippet: "Agents on Kubernetes".into()
            }
        );
    }

    #[tokio::test]
    async fn http_errors_carry_the_message_without_the_key() {
        let server = MockServer::start().await;
        Mock::given(path("/search"))
            .respond_with(ResponseTemplate::new(401).set_body_json(json!({
                "detail": {"error": format!("Unauthorized: invalid API key {KEY}.")}
            })))
            .mount(&server)
            .await;
        let provider = provider(&server, Duration::from_secs(5));
        let error = provider.search("q", 5).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "tavily returned HTTP 401 Unauthorized: Unauthorized: invalid API key [REDACTED]."
        );
        assert!(!format!("{provider:?}").contains(KEY));
    }

    #[tokio::test]
    async fn times_out() {
        let server = MockServer::start().await;
        Mock::given(path("/search"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"results": []}))
                    .set_delay(Duration::from_secs(30)),
            )
            .mount(&server)
            .await;
        let error = provider(&server, Duration::from_millis(200))
            .search("q", 5)
            .await
            .unwrap_err();
        assert_eq!(error.to_string(), "tavily search timed out after 0.2s");
    }

    #[tokio::test]
    async fn unreadable_bodies_are_invalid_responses() {
        let server = MockServer::start().await;
        Mock::given(path("/search"))
            .respond_with(ResponseTemplate::new(200).set_body_string("<html>maintenance</html>"))
            .mount(&server)
            .await;
        let error = provider(&server, Duration::from_secs(5))
            .search("q", 5)
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                SearchError::InvalidResponse {
                    provider: "tavily",
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn requires_a_key() {
        let error = Tavily::new(None, " ".to_owned(), Duration::from_secs(1)).unwrap_err();
        assert!(error.contains("needs an API key"), "{error}");
    }
}
