//! Shared pieces of the agent-side web tools (`web_fetch`, `web_search`): the SSRF guard,
//! HTML conversion, HTTP helpers and the search providers.

pub mod address;
pub mod allowed_ranges;
pub mod html;
pub mod http;
pub mod resolver;
pub mod search;
pub mod search_settings;
pub mod searxng;
pub mod tavily;

pub use search::{SearchError, SearchProvider, SearchResult};
pub use search_settings::{WebSearchSettings, build_search_provider};

#[cfg(test)]
pub(crate) mod test_context;
