//! Tavily: a hosted search API for agents (`POST {baseURL}/search`, bearer key).

use std::time::Duration;

use async_trait::async_trait;

use super::engine::Engine;
use super::search::{SearchError, SearchProvider, SearchResult};

/// Tavily's public endpoint, used when no baseURL is given.
pub const DEFAULT_BASE_URL: &str = "https://api.tavily.com";

/// A Tavily client. Its key never appears in its errors or its `Debug` output.
pub struct Tavily {
    engine: Engine,
    api_key: String,
}

impl std::fmt::Debug for Tavily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tavily")
            .field("endpoint", &self.engine.endpoint.as_str())
            .field("api_key", &"[REDACTED]")
            .finish_non_exhaustive()
    }
}

impl Tavily {
    /// A client of `base_url` (default [`DEFAULT_BASE_URL`]) with `api_key`.
    pub fn new(base_url: Option<&str>, api_key: String, timeout: Duration) -> Result<Self, String> {
        let engine = Engine::new(
            "tavily",
            "Tavily",
            base_url.unwrap_or(DEFAULT_BASE_URL),
            timeout,
        )?;
        if api_key.trim().is_empty() {
            return Err("tavily needs an API key (tools.webSearch.apiKeySecretRef)".to_owned());
        }
        Ok(Tavily { engine, api_key })
    }
}

#[async_trait]
impl SearchProvider for Tavily {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        self.engine.name
    }

    async fn search(
        &self,
        query: &str,
        max_results: usize,
    ) -> Result<Vec<SearchResult>, SearchError> {
        let request = self
            .engine
            .client
            .post(self.engine.endpoint.clone())
            .bearer_auth(&self.api_key)
            .json(&serde_json::json!({"query": query, "max_results": max_results}));
        self.engine
            .hits(request, max_results)
            .await
            .map_err(|error| error.redact(Some(&self.api_key)))
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
