//! Choosing the search provider from the Agent's `tools.webSearch`.

use std::sync::Arc;
use std::time::Duration;

use herd_crds::agent::WebSearchProvider;

use super::search::SearchProvider;
use super::searxng::Searxng;
use super::tavily::Tavily;

/// How long one search may take.
pub const SEARCH_TIMEOUT: Duration = Duration::from_secs(20);

/// The Agent's `tools.webSearch`, with the key already read from its Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct WebSearchSettings {
    pub provider: WebSearchProvider,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
}

impl std::fmt::Debug for WebSearchSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSearchSettings")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .finish()
    }
}

/// The provider the settings name, or a message saying what is wrong with them.
pub fn build_search_provider(
    settings: &WebSearchSettings,
) -> Result<Arc<dyn SearchProvider>, String> {
    let base_url = settings
        .base_url
        .as_deref()
        .map(str::trim)
        .filter(|url| !url.is_empty());
    let api_key = settings
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|key| !key.is_empty())
        .map(str::to_owned);
    match settings.provider {
        WebSearchProvider::Searxng => {
            let base_url = base_url.ok_or(
                "tools.webSearch: provider searxng needs baseURL (the instance's URL, e.g. \
                 http://searxng:8080)",
            )?;
            Ok(Arc::new(Searxng::new(base_url, api_key, SEARCH_TIMEOUT)?))
        }
        WebSearchProvider::Tavily => {
            let api_key = api_key
                .ok_or("tools.webSearch: provider tavily needs an API key (apiKeySecretRef)")?;
            Ok(Arc::new(Tavily::new(base_url, api_key, SEARCH_TIMEOUT)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(
        provider: WebSearchProvider,
        base_url: Option<&str>,
        api_key: Option<&str>,
    ) -> WebSearchSettings {
        WebSearchSettings {
            provider,
            base_url: base_url.map(str::to_owned),
            api_key: api_key.map(str::to_owned),
        }
    }

    fn error(settings: &WebSearchSettings) -> String {
        match build_search_provider(settings) {
            Ok(provider) => panic!("expected an error, got {}", provider.name()),
            Err(error) => error,
        }
    }

    #[test]
    fn builds_the_named_provider() {
        let searxng = build_search_provider(&settings(
            WebSearchProvider::Searxng,
            Some("http://sx:8080"),
            None,
        ));
        assert_eq!(searxng.map(|p| p.name()), Ok("searxng"));
        let tavily =
            build_search_provider(&settings(WebSearchProvider::Tavily, None, Some("tvly-key")));
        assert_eq!(tavily.map(|p| p.name()), Ok("tavily"));
    }

    #[test]
    fn explains_bad_settings() {
        use WebSearchProvider::{Searxng, Tavily};
        assert!(error(&settings(Searxng, None, None)).contains("needs baseURL"));
        assert!(error(&settings(Searxng, Some("  "), None)).contains("needs baseURL"));
        assert!(error(&settings(Tavily, None, Some(""))).contains("needs an API key"));
        assert!(error(&settings(Searxng, Some("not a url"), None)).contains("invalid SearXNG"));
    }

    #[test]
    fn debug_hides_the_key() {
        let text = format!(
            "{:?}",
            settings(WebSearchProvider::Tavily, None, Some("tvly-secret"))
        );
        assert!(!text.contains("tvly-secret"), "{text}");
    }
}
