//! Shared pieces of the agent-side web tools (`web_fetch`, `web_search`): the SSRF guard,
//! HTML conversion, HTTP helpers and the search providers.

pub(crate) mod address;
pub(crate) mod allowed_ranges;
pub(crate) mod engine;
pub(crate) mod html;
pub(crate) mod http;
pub(crate) mod resolver;
pub(crate) mod search;
pub(crate) mod search_settings;
pub(crate) mod searxng;
pub(crate) mod tavily;

pub use search::{SearchProvider, SearchResult};
pub use search_settings::{WebSearchSettings, build_search_provider};

#[cfg(test)]
pub(crate) mod test_context;
