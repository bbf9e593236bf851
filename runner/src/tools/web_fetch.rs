//! `web_fetch`: reads one web page as text. Runs in the `agent` container (docs/operator.md, step 3),
//! never in the sandbox.
//!
//! Caps on time, redirects, body size and output keep one call from stalling the run or
//! flooding the context; the SSRF guard keeps the model away from internal addresses.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use reqwest::{StatusCode, Url};
use schemars::JsonSchema;
use serde::Deserialize;

use super::web::address::{BlockedAddress, GuardError, check_url};
use super::web::allowed_ranges::AllowedRanges;
use super::web::html::html_to_text;
use super::web::http::{BodyError, client_builder, error_chain, find_source, read_capped};
use super::web::resolver::GuardedResolver;
use super::{ToolContext, ToolGroup, ToolOutput, TypedTool};

/// The largest `max_chars` a call may ask for.
pub const MAX_CHARS_LIMIT: usize = 100_000;

/// Limits of `web_fetch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebFetchConfig {
    /// Whole call, redirects and body included.
    pub timeout: Duration,
    pub max_redirects: usize,
    /// Bodies past this are refused; reading stops there.
    pub max_body_bytes: usize,
    /// Characters of text returned when the call does not say.
    pub max_chars: usize,
    /// Loopback, private, link-local and unique-local addresses the tool may reach anyway:
    /// the Agent's egress CIDRs (`AllowedRanges::from_egress`). Empty by default.
    pub allowed: AllowedRanges,
}

impl Default for WebFetchConfig {
    fn default() -> Self {
        WebFetchConfig {
            timeout: Duration::from_secs(20),
            max_redirects: 5,
            max_body_bytes: 2 * 1024 * 1024,
            max_chars: 20_000,
            allowed: AllowedRanges::default(),
        }
    }
}

// Arguments of `web_fetch`. A plain comment: schemars would send a doc comment to the model
// as the schema's description, costing tokens on every request.
#[derive(Deserialize, JsonSchema)]
pub struct WebFetchArgs {
    /// Why you fetch it, in a few words.
    description: String,
    url: String,
    /// Default 20000, at most 100000.
    #[schemars(range(min = 1, max = 100_000))]
    max_chars: Option<usize>,
}

/// Why a fetch failed; the text is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("unsupported URL scheme {0:?}: only http and https can be fetched")]
    Scheme(String),
    /// The HTTP client could not be built (a broken TLS setup).
    #[error("{0}")]
    Client(String),
    #[error("{0}")]
    Blocked(BlockedAddress),
    #[error("{0}")]
    Unresolvable(String),
    #[error("timed out after {}s fetching {url}", .after.as_secs_f64())]
    Timeout { url: String, after: Duration },
    #[error("more than {max} redirects, last to {url}")]
    TooManyRedirects { max: usize, url: String },
    #[error("HTTP {status} from {url}")]
    Status { status: StatusCode, url: String },
    #[error("the response from {url} is larger than {limit} bytes")]
    TooLarge { url: String, limit: usize },
    #[error(
        "{url} returned {content_type}, which is not text; only HTML, plain text, JSON and XML \
         can be read"
    )]
    NotText { url: String, content_type: String },
    #[error("request to {url} failed: {reason}")]
    Transport { url: String, reason: String },
    #[error("{0}")]
    Convert(String),
}

impl From<GuardError> for FetchError {
    fn from(error: GuardError) -> Self {
        match error {
            GuardError::Blocked(blocked) => FetchError::Blocked(blocked),
            unresolvable @ GuardError::Unresolvable { .. } => {
                FetchError::Unresolvable(unresolvable.to_string())
            }
        }
    }
}

/// A fetched page, converted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPage {
    /// Where the redirects ended.
    pub url: Url,
    pub title: Option<String>,
    pub text: String,
}

/// The `web_fetch` tool.
pub struct WebFetch {
    config: WebFetchConfig,
    /// Built on first use: building loads the system's CA certificates, a third of the
    /// runner's cold start, and most runs never fetch a page.
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
}

impl WebFetch {
    /// A fetcher with its own HTTP client, built when the first page is fetched.
    pub fn new(config: WebFetchConfig) -> Self {
        WebFetch {
            config,
            client: std::sync::OnceLock::new(),
        }
    }

    fn client(&self) -> Result<&reqwest::Client, FetchError> {
        self.client
            .get_or_init(|| {
                client_builder()
                    // Redirects are followed by hand so every hop passes the guard.
                    .redirect(reqwest::redirect::Policy::none())
                    // Names are checked when they are resolved for the connection.
                    .dns_resolver(Arc::new(GuardedResolver::from_env(
                        self.config.allowed.clone(),
                    )))
                    .build()
                    .map_err(|error| format!("cannot build the web_fetch HTTP client: {error}"))
            })
            .as_ref()
            .map_err(|error| FetchError::Client(error.clone()))
    }

    /// Fetches `url`, following redirects, within the configured timeout (or less).
    pub async fn fetch(&self, url: &str, timeout: Duration) -> Result<FetchedPage, FetchError> {
        let url = Url::parse(url.trim()).map_err(|error| FetchError::InvalidUrl {
            url: url.to_owned(),
            reason: error.to_string(),
        })?;
        let display = url.to_string();
        tokio::time::timeout(timeout, self.fetch_unbounded(url))
            .await
            .unwrap_or(Err(FetchError::Timeout {
                url: display,
                after: timeout,
            }))
    }

    async fn fetch_unbounded(&self, mut url: Url) -> Result<FetchedPage, FetchError> {
        let mut redirects = 0;
        loop {
            let mut response = self.get(&url).await?;
            let status = response.status();
            if status.is_redirection()
                && let Some(next) = redirect_target(&url, &response)?
            {
                redirects += 1;
                if redirects > self.config.max_redirects {
                    return Err(FetchError::TooManyRedirects {
                        max: self.config.max_redirects,
                        url: next.to_string(),
                    });
                }
                url = next;
                continue;
            }
            if !status.is_success() {
                return Err(FetchError::Status {
                    status,
                    url: url.to_string(),
                });
            }
            return self.read_page(url, &mut response).await;
        }
    }

    /// Sends one GET after checking the URL against the guard.
    async fn get(&self, url: &Url) -> Result<reqwest::Response, FetchError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::Scheme(url.scheme().to_owned()));
        }
        check_url(url, &self.config.allowed).await?;
        self.client()?
            .get(url.clone())
            .header(
                ACCEPT,
                "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.1",
            )
            .send()
            .await
            .map_err(|error| transport_error(url, error))
    }

    async fn read_page(
        &self,
        url: Url,
        response: &mut reqwest::Response,
    ) -> Result<FetchedPage, FetchError> {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.trim().to_ascii_lowercase());
        let declared = content_type.as_deref().map(classify);
        if let (Some(Kind::Other), Some(content_type)) = (declared, &content_type) {
            return Err(FetchError::NotText {
                url: url.to_string(),
                content_type: media_type(content_type).to_owned(),
            });
        }
        let body = read_capped(response, self.config.max_body_bytes)
            .await
            .map_err(|error| match error {
                BodyError::TooLarge => FetchError::TooLarge {
                    url: url.to_string(),
                    limit: self.config.max_body_bytes,
                },
                BodyError::Transport(error) => transport_error(&url, error),
            })?;
        let kind = match declared {
            Some(kind) => kind,
            None => sniff(&body),
        };
        let (title, text) = match kind {
            Kind::Html => {
                // Converting megabytes of HTML is CPU work: keep it off the async workers.
                let base = url.clone();
                let page = tokio::task::spawn_blocking(move || html_to_text(&body, Some(&base)))
                    .await
                    .map_err(|error| {
                        FetchError::Convert(format!("HTML conversion failed: {error}"))
                    })?
                    .map_err(FetchError::Convert)?;
                (page.title, page.text)
            }
            Kind::Text => (None, String::from_utf8_lossy(&body).into_owned()),
            Kind::Other => {
                return Err(FetchError::NotText {
                    url: url.to_string(),
                    content_type: "binary data without a Content-Type".to_owned(),
                });
            }
        };
        Ok(FetchedPage { url, title, text })
    }
}

/// The next URL of a redirect, or `None` when the response names none (then it is final).
fn redirect_target(url: &Url, response: &reqwest::Response) -> Result<Option<Url>, FetchError> {
    let Some(location) = response.headers().get(LOCATION) else {
        return Ok(None);
    };
    let location = String::from_utf8_lossy(location.as_bytes());
    url.join(&location)
        .map(Some)
        .map_err(|error| FetchError::InvalidUrl {
            url: location.into_owned(),
            reason: format!("bad redirect from {url}: {error}"),
        })
}

fn transport_error(url: &Url, error: reqwest::Error) -> FetchError {
    // The guarded resolver refused the address the client was about to connect to.
    if let Some(blocked) = find_source::<BlockedAddress>(&error) {
        return FetchError::Blocked(blocked.clone());
    }
    FetchError::Transport {
        url: url.to_string(),
        reason: error_chain(&error.without_url()),
    }
}

/// How a body is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Other,
}

/// The media type of a Content-Type value, without parameters.
fn media_type(content_type: &str) -> &str {
    content_type
        .split(';')
        .next()
        .unwrap_or(content_type)
        .trim()
}

fn classify(content_type: &str) -> Kind {
    let media = media_type(content_type);
    let (kind, subtype) = media.split_once('/').unwrap_or((media, ""));
    match (kind, subtype) {
        ("text", "html") | ("application", "xhtml+xml") => Kind::Html,
        ("text", _) => Kind::Text,
        ("application", "json" | "xml" | "x-ndjson" | "javascript" | "x-yaml" | "yaml") => {
            Kind::Text
        }
        ("application", subtype) if subtype.ends_with("+json") || subtype.ends_with("+xml") => {
            Kind::Text
        }
        _ => Kind::Other,
    }
}

/// A body without a Content-Type: HTML if it looks like a document, text if it is UTF-8.
fn sniff(body: &[u8]) -> Kind {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let head = head.trim_start();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        Kind::Html
    } else if std::str::from_utf8(body).is_ok() && !body.contains(&0) {
        Kind::Text
    } else {
        Kind::Other
    }
}

/// The tool result: final URL and title first, then the text cut to `max_chars`.
fn render(page: &FetchedPage, max_chars: usize) -> String {
    let mut out = format!("URL: {}\n", page.url);
    if let Some(title) = &page.title {
        out.push_str(&format!("Title: {title}\n"));
    }
    out.push('\n');
    let text = page.text.trim();
    if text.is_empty() {
        out.push_str("(no readable text; the page may need JavaScript)");
        return out;
    }
    match text.char_indices().nth(max_chars) {
        None => out.push_str(text),
        Some((end, _)) => {
            let total = text.chars().count();
            out.push_str(&text[..end]);
            out.push_str(&format!(
                "\n\n[Truncated: first {max_chars} of {total} characters."
            ));
            if max_chars < MAX_CHARS_LIMIT {
                out.push_str(&format!(
                    " Call again with a larger max_chars (≤ {MAX_CHARS_LIMIT}) if you need more."
                ));
            }
            out.push(']');
        }
    }
    out
}

#[async_trait]
impl TypedTool for WebFetch {
    const NAME: &'static str = "web_fetch";
    const GROUP: Option<ToolGroup> = Some(ToolGroup::Web);
    const DESCRIPTION: &'static str = "Fetch an http(s) page as text, links as footnotes.";
    type Args = WebFetchArgs;

    async fn run(&self, args: WebFetchArgs, ctx: &ToolContext) -> ToolOutput {
        tracing::debug!(description = %args.description, url = %args.url, "web_fetch");
        let max_chars = args
            .max_chars
            .unwrap_or(self.config.max_chars)
            .clamp(1, MAX_CHARS_LIMIT);
        // A fetch never outlives the run that asked for it.
        let timeout = match ctx.budget.deadline {
            Some(deadline) => self
                .config
                .timeout
                .min(deadline.saturating_duration_since(tokio::time::Instant::now())),
            None => self.config.timeout,
        };
        match self.fetch(&args.url, timeout).await {
            Ok(page) => ToolOutput::ok(render(&page, max_chars)),
            Err(error) => ToolOutput::error(format!("Error: {error}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::thread::ToolStatus;
    use crate::tools::Tool;
    use crate::tools::web::test_context::context;

    /// The ranges the local test servers listen in.
    fn loopback() -> AllowedRanges {
        AllowedRanges::parse(&["127.0.0.0/8", "::1"]).unwrap()
    }

    fn local(config: WebFetchConfig) -> WebFetch {
        WebFetch::new(WebFetchConfig {
            allowed: loopback(),
            ..config
        })
    }

    async fn call(tool: &WebFetch, url: String) -> ToolOutput {
        tool.call(json!({"description": "test", "url": url}), &context())
            .await
    }

    /// Answers GET `route` with `response`.
    fn get(route: &str, response: ResponseTemplate) -> Mock {
        Mock::given(method("GET"))
            .and(path(route))
            .respond_with(response)
    }

    /// A local server with `mock` mounted.
    async fn serving(mock: Mock) -> MockServer {
        let server = MockServer::start().await;
        mock.mount(&server).await;
        server
    }

    /// What a tool on loopback with the default settings answers for `route` of `server`.
    async fn fetch_from(server: &MockServer, route: &str) -> ToolOutput {
        let tool = local(WebFetchConfig::default());
        call(&tool, format!("{}{route}", server.uri())).await
    }

    /// What a tool on loopback with `config` answers for `route` of a server answering it
    /// with `response`.
    async fn fetch(route: &str, response: ResponseTemplate, config: WebFetchConfig) -> ToolOutput {
        let server = serving(get(route, response)).await;
        call(&local(config), format!("{}{route}", server.uri())).await
    }

    /// Checks that the call for `case` failed, saying `expected`.
    fn assert_refused(case: &str, out: &ToolOutput, expected: &str) {
        assert_eq!(out.status, ToolStatus::Error, "{case}: {}", out.content);
        assert!(out.content.contains(expected), "{case}: {}", out.content);
    }

    fn html(body: &str) -> ResponseTemplate {
        ResponseTemplate::new(200)
            .set_body_raw(body.as_bytes().to_vec(), "text/html; charset=utf-8")
    }

    #[tokio::test]
    async fn html_page_becomes_text_with_url_and_title_first() {
        let page = html(
            "<html><head><title>Release notes</title><script>track()</script></head>\
             <body><h1>v1.2</h1><p>Faster <a href='/dl'>downloads</a>.</p></body></html>",
        );
        let server = serving(get("/page", page)).await;
        let out = fetch_from(&server, "/page").await;
        assert_eq!(out.status, ToolStatus::Success, "{}", out.content);
        let expected = format!(
            "URL: {uri}/page\nTitle: Release notes\n\n# v1.2\n\nFaster [downloads][1].\n\n\
             [1]: {uri}/dl",
            uri = server.uri()
        );
        assert_eq!(out.content, expected);
    }

    #[tokio::test]
    async fn follows_redirects_and_reports_the_final_url() {
        let moved = ResponseTemplate::new(301).insert_header("location", "/new");
        let server = serving(get("/old", moved)).await;
        get(
            "/new",
            ResponseTemplate::new(200).set_body_string("moved here"),
        )
        .mount(&server)
        .await;
        let out = fetch_from(&server, "/old").await;
        assert_eq!(out.status, ToolStatus::Success, "{}", out.content);
        assert_eq!(
            out.content,
            format!("URL: {}/new\n\nmoved here", server.uri())
        );
    }

    #[tokio::test]
    async fn stops_after_the_redirect_limit() {
        let looping = ResponseTemplate::new(302).insert_header("location", "/loop");
        let server = serving(get("/loop", looping).expect(3)).await;
        let tool = local(WebFetchConfig {
            max_redirects: 2,
            ..WebFetchConfig::default()
        });
        let out = call(&tool, format!("{}/loop", server.uri())).await;
        assert_refused("/loop", &out, "more than 2 redirects");
    }

    #[tokio::test]
    async fn refuses_bodies_over_the_cap() {
        let config = WebFetchConfig {
            max_body_bytes: 1024,
            ..WebFetchConfig::default()
        };
        let big = ResponseTemplate::new(200).set_body_string("x".repeat(4096));
        let out = fetch("/big", big, config).await;
        assert_refused("/big", &out, "larger than 1024 bytes");
    }

    #[tokio::test]
    async fn times_out_on_slow_servers() {
        let config = WebFetchConfig {
            timeout: Duration::from_millis(200),
            ..WebFetchConfig::default()
        };
        let slow = ResponseTemplate::new(200)
            .set_body_string("late")
            .set_delay(Duration::from_secs(30));
        let out = fetch("/slow", slow, config).await;
        assert_refused("/slow", &out, "timed out after 0.2s");
    }

    #[tokio::test]
    async fn never_outlives_the_run_deadline() {
        let slow = ResponseTemplate::new(200).set_delay(Duration::from_secs(30));
        let server = serving(get("/slow", slow)).await;
        let mut ctx = context();
        ctx.budget.deadline = Some(tokio::time::Instant::now());
        let out = local(WebFetchConfig::default())
            .call(
                json!({"description": "d", "url": format!("{}/slow", server.uri())}),
                &ctx,
            )
            .await;
        assert_refused("/slow", &out, "timed out after 0s");
    }

    #[tokio::test]
    async fn refuses_non_text_naming_the_type() {
        let png =
            ResponseTemplate::new(200).set_body_raw(vec![0x89, b'P', b'N', b'G'], "image/png");
        let out = fetch("/logo", png, WebFetchConfig::default()).await;
        assert_refused("/logo", &out, "image/png");
    }

    #[tokio::test]
    async fn reports_http_errors() {
        let out = fetch(
            "/gone",
            ResponseTemplate::new(404),
            WebFetchConfig::default(),
        )
        .await;
        assert_refused("/gone", &out, "HTTP 404 Not Found");
    }

    #[tokio::test]
    async fn refuses_private_addresses_unless_allowed() {
        let internal = ResponseTemplate::new(200).set_body_string("internal");
        let server = serving(get("/", internal).expect(0)).await;
        let tool = WebFetch::new(WebFetchConfig::default());
        let port = server.address().port();
        for url in [
            format!("http://127.0.0.1:{port}/"),
            format!("http://localhost:{port}/"),
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "http://[::1]/".to_owned(),
        ] {
            let out = call(&tool, url.clone()).await;
            assert_refused(&url, &out, "refusing to fetch");
        }
    }

    #[tokio::test]
    async fn egress_cidrs_open_exactly_their_ranges() {
        let internal = ResponseTemplate::new(200).set_body_string("internal service");
        let server = serving(get("/internal", internal).expect(2)).await;
        let port = server.address().port();
        let url = format!("http://127.0.0.1:{port}/internal");
        let only = |cidrs: &[&str]| {
            WebFetch::new(WebFetchConfig {
                allowed: AllowedRanges::parse(cidrs).unwrap(),
                ..WebFetchConfig::default()
            })
        };
        let out = call(&only(&["127.0.0.1/32"]), url.clone()).await;
        assert_eq!(out.status, ToolStatus::Success, "{}", out.content);
        assert!(out.content.ends_with("internal service"));
        // By name, after resolution.
        let out = call(
            &local(WebFetchConfig::default()),
            format!("http://localhost:{port}/internal"),
        )
        .await;
        assert_eq!(out.status, ToolStatus::Success, "{}", out.content);
        for cidrs in [&["10.0.0.0/8"][..], &["127.0.0.2/32"], &[]] {
            let out = call(&only(cidrs), url.clone()).await;
            assert_eq!(out.status, ToolStatus::Error, "{cidrs:?}");
            assert!(
                out.content
                    .contains("refusing to fetch 127.0.0.1: it is a loopback address"),
                "{cidrs:?}: {}",
                out.content
            );
        }
    }

    #[tokio::test]
    async fn every_redirect_hop_passes_the_guard() {
        let server = MockServer::start().await;
        let port = server.address().port();
        for (from, to) in [
            (
                "/to-other-loopback",
                format!("http://127.0.0.2:{port}/secret"),
            ),
            (
                "/to-metadata",
                "http://169.254.169.254/latest/meta-data/".to_owned(),
            ),
            ("/to-ipv6-loopback", format!("http://[::1]:{port}/secret")),
        ] {
            Mock::given(path(from))
                .respond_with(ResponseTemplate::new(302).insert_header("location", to.as_str()))
                .mount(&server)
                .await;
        }
        Mock::given(path("/secret"))
            .respond_with(ResponseTemplate::new(200).set_body_string("secret"))
            .expect(0)
            .mount(&server)
            .await;
        // Only the first hop's address is allowed.
        let tool = WebFetch::new(WebFetchConfig {
            allowed: AllowedRanges::parse(&["127.0.0.1/32"]).unwrap(),
            ..WebFetchConfig::default()
        });
        for from in ["/to-other-loopback", "/to-metadata", "/to-ipv6-loopback"] {
            let out = call(&tool, format!("http://127.0.0.1:{port}{from}")).await;
            assert_refused(from, &out, "refusing to fetch");
        }
    }

    #[tokio::test]
    async fn refuses_other_schemes_and_bad_urls() {
        let tool = local(WebFetchConfig::default());
        for (arguments, expected) in [
            (
                json!({"description": "test", "url": "file:///etc/passwd"}),
                "unsupported URL scheme \"file\"",
            ),
            (
                json!({"description": "test", "url": "not a url"}),
                "invalid URL",
            ),
            (json!({"url": 5}), "invalid arguments for web_fetch"),
        ] {
            let out = tool.call(arguments, &context()).await;
            assert!(out.content.contains(expected), "{}", out.content);
        }
    }

    #[tokio::test]
    async fn passes_json_and_plain_text_through_and_truncates() {
        let data = ResponseTemplate::new(200).set_body_json(json!({"ok": true}));
        let server = serving(get("/data", data)).await;
        get(
            "/notes",
            ResponseTemplate::new(200).set_body_string("é".repeat(50)),
        )
        .mount(&server)
        .await;
        let tool = local(WebFetchConfig::default());
        let out = call(&tool, format!("{}/data", server.uri())).await;
        assert_eq!(
            out.content,
            format!("URL: {}/data\n\n{{\"ok\":true}}", server.uri())
        );

        let out = tool
            .call(
                json!({"description": "d", "url": format!("{}/notes", server.uri()), "max_chars": 10}),
                &context(),
            )
            .await;
        let expected = format!(
            "URL: {}/notes\n\n{}\n\n[Truncated: first 10 of 50 characters. Call again with a \
             larger max_chars (≤ 100000) if you need more.]",
            server.uri(),
            "é".repeat(10)
        );
        assert_eq!(out.content, expected);
    }

    #[test]
    fn classifies_content_types() {
        for (content_type, kind) in [
            ("text/html; charset=utf-8", Kind::Html),
            ("application/xhtml+xml", Kind::Html),
            ("text/markdown", Kind::Text),
            ("application/ld+json", Kind::Text),
            ("application/rss+xml", Kind::Text),
            ("application/pdf", Kind::Other),
        ] {
            assert_eq!(classify(content_type), kind, "{content_type}");
        }
        for (body, kind) in [
            (&b"  <!DOCTYPE html><p>x"[..], Kind::Html),
            (b"plain words", Kind::Text),
            (&[0xff, 0x00, 0x10], Kind::Other),
        ] {
            assert_eq!(sniff(body), kind, "{body:?}");
        }
    }

    #[test]
    fn schema_is_compact() {
        let schema = WebFetch::new(WebFetchConfig::default()).schema();
        let text = serde_json::to_string(&schema).unwrap();
        assert!(text.len() < 350, "{} chars: {text}", text.len());
        assert_eq!(schema.parameters["required"], json!(["description", "url"]));
        // The bound is enforced when the call is parsed; the model reads it in one line.
        assert_eq!(
            schema.parameters["properties"]["max_chars"],
            json!({"type": "integer", "description": "Default 20000, at most 100000."})
        );
        assert!(schema.parameters.get("description").is_none());
    }
}
