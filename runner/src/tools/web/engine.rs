//! What the search engines share: the `/search` URL under a base URL, a client bounded by the
//! search timeout, and reading an answer's hits (`{results: [{title, url, content}]}`).

use std::time::Duration;

use reqwest::{RequestBuilder, Url};
use serde::Deserialize;

use super::http::client_builder;
use super::search::{SearchError, SearchResult, status_error};

/// One search engine's HTTP side.
pub(crate) struct Engine {
    /// `searxng` or `tavily`, in errors.
    pub name: &'static str,
    /// `<baseURL>/search`.
    pub endpoint: Url,
    pub timeout: Duration,
    pub client: reqwest::Client,
}

impl Engine {
    /// The engine `name` at `base_url`; `label` names it in configuration errors (`SearXNG`).
    pub fn new(
        name: &'static str,
        label: &str,
        base_url: &str,
        timeout: Duration,
    ) -> Result<Self, String> {
        let endpoint = Url::parse(&format!("{}/search", base_url.trim_end_matches('/')))
            .map_err(|error| format!("invalid {label} baseURL {base_url:?}: {error}"))?;
        if !matches!(endpoint.scheme(), "http" | "https") {
            return Err(format!(
                "invalid {label} baseURL {base_url:?}: it must be an http(s) URL"
            ));
        }
        let client = client_builder()
            .timeout(timeout)
            .build()
            .map_err(|error| format!("cannot build the {label} HTTP client: {error}"))?;
        Ok(Engine {
            name,
            endpoint,
            timeout,
            client,
        })
    }

    /// Sends `request`; the first `max` hits of a 2xx answer, any other status as an error
    /// carrying the engine's message.
    pub async fn hits(
        &self,
        request: RequestBuilder,
        max: usize,
    ) -> Result<Vec<SearchResult>, SearchError> {
        let response = request
            .send()
            .await
            .map_err(|error| SearchError::from_reqwest(self.name, self.timeout, error))?;
        if !response.status().is_success() {
            return Err(status_error(self.name, self.timeout, response).await);
        }
        let answer = response
            .json::<Answer>()
            .await
            .map_err(|error| SearchError::from_reqwest(self.name, self.timeout, error))?;
        Ok(answer
            .results
            .into_iter()
            .take(max)
            .map(|hit| SearchResult {
                title: hit.title,
                url: hit.url,
                snippet: hit.content.unwrap_or_default(),
            })
            .collect())
    }
}

/// The parts of an engine's JSON answer used here.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<Hit>,
}

#[derive(Deserialize)]
struct Hit {
    #[serde(default)]
    title: String,
    url: String,
    #[serde(default)]
    content: Option<String>,
}
