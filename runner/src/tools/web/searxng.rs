//! SearXNG: a self-hosted metasearch engine (`GET {baseURL}/search?q=..&format=json`).

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::AUTHORIZATION;

use super::engine::Engine;
use super::search::{SearchError, SearchProvider, SearchResult};

/// A SearXNG instance.
pub struct Searxng {
    engine: Engine,
    /// Sent as a bearer token, for instances behind an authenticating proxy.
    api_key: Option<String>,
}

impl std::fmt::Debug for Searxng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Searxng")
            .field("endpoint", &self.engine.endpoint.as_str())
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .finish_non_exhaustive()
    }
}

impl Searxng {
    /// A client of the instance at `base_url` (e.g. `http://searxng:8080`).
    pub fn new(base_url: &str, api_key: Option<String>, timeout: Duration) -> Result<Self, String> {
        Ok(Searxng {
            engine: Engine::new("searxng", "SearXNG", base_url, timeout)?,
            api_key,
        })
    }
}

/// SearXNG answers 403 to `format=json` unless the instance enables it.
fn explain_forbidden(error: SearchError) -> SearchError {
    match error {
        SearchError::Status {
            provider,
            status,
            message,
        } if status == reqwest::StatusCode::FORBIDDEN => SearchError::Status {
            provider,
            status,
            message: format!(
                "{message} (is `json` listed in the instance's search.formats setting?)"
            ),
        },
        other => other,
    }
}

#[async_trait]
impl SearchProvider for Searxng {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        self.engine.name
    }

    async fn search(
        &self,
        query: &str,
        max_results: usize,
    ) -> Result<Vec<SearchResult>, SearchError> {
        let mut url = self.engine.endpoint.clone();
        url.query_pairs_mut()
            .append_pair("q", query)
            .append_pair("format", "json");
        let mut request = self.engine.client.get(url);
        if let Some(key) = &self.api_key {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        // SearXNG has no result-count parameter; it returns a page of ~10-30 hits.
        self.engine
            .hits(request, max_results)
            .await
            .map_err(|error| explain_forbidden(error).redact(self.api_key.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wiremock::matchers::{header, method, path, query_param};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn provider(server: &MockServer, key: Option<&str>) -> Searxng {
        Searxng::new(
            &format!("{}/", server.uri()),
            key.map(str::to_owned),
            Duration::from_secs(5),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn parses_results_and_limits_their_number() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/search"))
            .and(query_param("q", "rust & k8s"))
            .and(query_param("format", "json"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "query": "rust & k8s",
                "number_of_results": 0,
                "results": [
                    {"title": "kube-rs", "url": "https://kube.rs/", "content": "Rust client", "engine": "ddg"},
                    {"title": "No snippet", "url": "https://example.com/"},
                    {"title": "Third", "url": "https://example.org/", "content": "cut"}
                ],
                "answers": [], "suggestions": []
            })))
            .mount(&server)
            .await;
        let results = provider(&server, None)
            .search("rust & k8s", 2)
            .await
            .unwrap();
        assert_eq!(
            results,
            vec![
                SearchResult {
                    title: "kube-rs".into(),
                    url: "https://kube.rs/".into(),
                    snippet: "Rust client".into()
                },
                SearchResult {
                    title: "No snippet".into(),
                    url: "https://example.com/".into(),
                    snippet: String::new()
                },
            ]
        );
    }

    #[tokio::test]
    async fn explains_a_forbidden_json_format() {
        let server = MockServer::start().await;
        Mock::given(path("/search"))
            .respond_with(ResponseTemplate::new(403).set_body_string("Forbidden"))
            .mount(&server)
            .await;
        let error = provider(&server, None).search("q", 5).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "searxng returned HTTP 403 Forbidden: Forbidden (is `json` listed in the \
             instance's search.formats setting?)"
        );
    }

    #[tokio::test]
    async fn sends_and_hides_an_optional_key() {
        let server = MockServer::start().await;
        Mock::given(path("/search"))
            .and(header("authorization", "Bearer sx-secret"))
            .respond_with(ResponseTemplate::new(502).set_body_string("upstream saw sx-secret"))
            .expect(1)
            .mount(&server)
            .await;
        let provider = provider(&server, Some("sx-secret"));
        let error = provider.search("q", 5).await.unwrap_err();
        assert!(!error.to_string().contains("sx-secret"), "{error}");
        assert!(!format!("{provider:?}").contains("sx-secret"));
    }

    #[test]
    fn refuses_bad_base_urls() {
        assert!(Searxng::new("searxng:8080", None, Duration::from_secs(1)).is_err());
        assert!(Searxng::new("ftp://searxng", None, Duration::from_secs(1)).is_err());
    }
}
