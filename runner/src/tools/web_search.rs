//! `web_search`: searches the web through the Agent's `tools.webSearch` provider. Runs in the
//! `agent` container (docs/operator.md, step 3), so the provider's key never reaches the sandbox.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::web::search::compact;
use super::web::{SearchProvider, SearchResult};
use super::{ToolContext, ToolGroup, ToolOutput, TypedTool};

/// Results returned when the call does not say.
pub const DEFAULT_RESULTS: usize = 5;

/// Most results one call may ask for.
pub const MAX_RESULTS: usize = 10;

/// Snippets are a preview; the model fetches a page to read it.
const MAX_SNIPPET_CHARS: usize = 300;

/// Longest query sent; longer ones are keyword soup no engine handles well.
const MAX_QUERY_CHARS: usize = 400;

// Arguments of `web_search`. A plain comment: schemars would send a doc comment to the model
// as the schema's description, costing tokens on every request.
#[derive(Deserialize, JsonSchema)]
pub struct WebSearchArgs {
    /// Why you search, in a few words.
    description: String,
    query: String,
    /// Default 5, at most 10.
    #[schemars(range(min = 1, max = 10))]
    max_results: Option<usize>,
}

/// The `web_search` tool.
pub struct WebSearch {
    provider: Arc<dyn SearchProvider>,
}

impl WebSearch {
    /// The tool over `provider` (see `build_search_provider`).
    pub fn new(provider: Arc<dyn SearchProvider>) -> Self {
        WebSearch { provider }
    }
}

/// `1. [Title](URL)\n   snippet`, one entry per result.
fn render(query: &str, results: &[SearchResult]) -> String {
    if results.is_empty() {
        return format!("No results for {query:?}. Try other keywords.");
    }
    let mut out = String::new();
    for (index, result) in results.iter().enumerate() {
        let title = compact(&result.title, MAX_SNIPPET_CHARS);
        let title = if title.is_empty() {
            result.url.as_str()
        } else {
            title.as_str()
        };
        out.push_str(&format!(
            "{}. [{title}]({})\n",
            index + 1,
            result.url.trim()
        ));
        let snippet = compact(&result.snippet, MAX_SNIPPET_CHARS);
        if !snippet.is_empty() {
            out.push_str(&format!("   {snippet}\n"));
        }
    }
    out.truncate(out.trim_end().len());
    out
}

#[async_trait]
impl TypedTool for WebSearch {
    const NAME: &'static str = "web_search";
    const GROUP: Option<ToolGroup> = Some(ToolGroup::Web);
    const DESCRIPTION: &'static str = "Search the web: titles, URLs and snippets.";
    type Args = WebSearchArgs;

    async fn run(&self, args: WebSearchArgs, _ctx: &ToolContext) -> ToolOutput {
        tracing::debug!(description = %args.description, query = %args.query, "web_search");
        let query = compact(&args.query, MAX_QUERY_CHARS);
        if query.is_empty() {
            return ToolOutput::error("Error: the query is empty; give search keywords.");
        }
        let max_results = args
            .max_results
            .unwrap_or(DEFAULT_RESULTS)
            .clamp(1, MAX_RESULTS);
        match self.provider.search(&query, max_results).await {
            Ok(mut results) => {
                results.truncate(max_results);
                ToolOutput::ok(render(&query, &results))
            }
            Err(error) => ToolOutput::error(format!("Error: {error}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use wiremock::matchers::{path, query_param};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::thread::ToolStatus;
    use crate::tools::Tool;
    use crate::tools::web::searxng::Searxng;
    use crate::tools::web::tavily::Tavily;
    use crate::tools::web::test_context::context;
    use crate::tools::web::{WebSearchSettings, build_search_provider};

    fn hit(title: &str, url: &str, content: &str) -> serde_json::Value {
        json!({"title": title, "url": url, "content": content})
    }

    async fn searxng(server: &MockServer) -> WebSearch {
        let provider = Searxng::new(&server.uri(), None, Duration::from_secs(5)).unwrap();
        WebSearch::new(Arc::new(provider))
    }

    #[tokio::test]
    async fn renders_a_compact_numbered_list() {
        let server = MockServer::start().await;
        let long = "word ".repeat(100);
        Mock::given(path("/search"))
            .and(query_param("q", "kubernetes operators"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": [
                hit("Operator  pattern\n", "https://kubernetes.io/op", "Operators are\n clients"),
                hit("", "https://example.com/untitled", ""),
                hit("Long", "https://example.org/long", &long),
            ]})))
            .mount(&server)
            .await;
        let out = searxng(&server)
            .await
            .call(
                json!({"description": "d", "query": "  kubernetes\noperators "}),
                &context(),
            )
            .await;
        assert_eq!(out.status, ToolStatus::Success, "{}", out.content);
        let expected = format!(
            "1. [Operator pattern](https://kubernetes.io/op)\n   Operators are clients\n\
             2. [https://example.com/untitled](https://example.com/untitled)\n\
             3. [Long](https://example.org/long)\n   {}…",
            "word ".repeat(60).trim_end()
        );
        assert_eq!(out.content, expected);
    }

    #[tokio::test]
    async fn clamps_max_results() {
        let server = MockServer::start().await;
        let hits: Vec<_> = (0..20)
            .map(|i| hit(&format!("r{i}"), &format!("https://e.com/{i}"), "s"))
            .collect();
        Mock::given(path("/search"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": hits})))
            .mount(&server)
            .await;
        let tool = searxng(&server).await;
        let count = |out: ToolOutput| out.content.lines().filter(|l| l.contains("](")).count();
        let out = tool
            .call(json!({"description": "d", "query": "q"}), &context())
            .await;
        assert_eq!(count(out), DEFAULT_RESULTS);
        let out = tool
            .call(
                json!({"description": "d", "query": "q", "max_results": 50}),
                &context(),
            )
            .await;
        assert_eq!(count(out), MAX_RESULTS);
        let out = tool
            .call(
                json!({"description": "d", "query": "q", "max_results": 0}),
                &context(),
            )
            .await;
        assert_eq!(count(out), 1);
    }

    #[tokio::test]
    async fn reports_empty_results_and_empty_queries() {
        let server = MockServer::start().await;
        Mock::given(path("/search"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
            .mount(&server)
            .await;
        let tool = searxng(&server).await;
        let out = tool
            .call(json!({"description": "d", "query": "zzz"}), &context())
            .await;
        assert_eq!(out.status, ToolStatus::Success);
        assert_eq!(out.content, "No results for \"zzz\". Try other keywords.");
        let out = tool
            .call(json!({"description": "d", "query": " "}), &context())
            .await;
        assert_eq!(out.status, ToolStatus::Error);
        let out = tool
            .call(json!({"query": "no description"}), &context())
            .await;
        assert!(
            out.content.contains("invalid arguments for web_search"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn provider_errors_become_error_results_without_the_key() {
        let key = "tvly-prod-9f8e7d6c5b4a";
        let server = MockServer::start().await;
        Mock::given(path("/search"))
            .respond_with(ResponseTemplate::new(432).set_body_json(json!({
                "detail": {"error": format!("Plan limit exceeded for key {key}")}
            })))
            .mount(&server)
            .await;
        let settings = WebSearchSettings {
            provider: herd_crds::agent::WebSearchProvider::Tavily,
            base_url: Some(server.uri()),
            api_key: Some(key.into()),
        };
        let tool = WebSearch::new(build_search_provider(&settings).unwrap());
        let out = tool
            .call(json!({"description": "d", "query": "q"}), &context())
            .await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(
            out.content.starts_with("Error: tavily returned HTTP 432"),
            "{}",
            out.content
        );
        assert!(
            out.content.contains("Plan limit exceeded"),
            "{}",
            out.content
        );
        assert!(!out.content.contains(key), "{}", out.content);
    }

    #[tokio::test]
    async fn connection_failures_never_show_the_key() {
        // A port nothing listens on: the error comes from the transport, not the server.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let key = "tvly-transport-secret";
        let provider = Tavily::new(Some(&base), key.into(), Duration::from_secs(5)).unwrap();
        let out = WebSearch::new(Arc::new(provider))
            .call(json!({"description": "d", "query": "q"}), &context())
            .await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(
            out.content.contains("tavily request failed"),
            "{}",
            out.content
        );
        assert!(!out.content.contains(key), "{}", out.content);
    }

    #[test]
    fn schema_is_compact() {
        let provider = Searxng::new("http://sx", None, Duration::from_secs(1)).unwrap();
        let schema = WebSearch::new(Arc::new(provider)).schema();
        let text = serde_json::to_string(&schema).unwrap();
        assert!(text.len() < 600, "{} chars: {text}", text.len());
        assert_eq!(
            schema.parameters["required"],
            json!(["description", "query"])
        );
    }
}
