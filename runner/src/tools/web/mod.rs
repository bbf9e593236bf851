//! Shared pieces of the agent-side web tools (`web_fetch`, `web_search`): the SSRF guard,
//! HTML conversion, HTTP helpers and the search providers.

pub mod address;
pub mod html;
pub mod http;
pub mod resolver;

#[cfg(test)]
pub(crate) mod test_context;
