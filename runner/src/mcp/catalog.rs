//! The deferred tools of an agent and how they are found: `tool_search`'s queries
//! (DeerFlow's forms: `select:A,B` exact and uncapped, keywords, `+required` terms; at most
//! [`MAX_RESULTS`] ranked results) and McpRouting's keyword match of the user's text.

use std::collections::BTreeSet;

use crate::model::ToolSchema;

/// Most tools a keyword search returns (DeerFlow's `MAX_RESULTS`).
pub const MAX_RESULTS: usize = 5;
/// Most tools routing promotes for one user message (DeerFlow's `auto_promote_top_k`).
pub const ROUTED: usize = 3;
/// The least routing score that promotes: a word of the tool's own name, or two of its
/// description.
const ROUTING_MIN_SCORE: u32 = 2;

/// Words too common to route by.
const STOPWORDS: [&str; 40] = [
    "the", "and", "for", "with", "what", "which", "this", "that", "from", "into", "your", "you",
    "are", "was", "were", "use", "using", "please", "can", "could", "would", "should", "how",
    "why", "when", "where", "who", "all", "any", "some", "its", "it's", "our", "out", "not", "but",
    "have", "has", "will", "then",
];

/// The schemas of an agent's deferred tools.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeferredCatalog {
    schemas: Vec<ToolSchema>,
}

/// What a query found.
#[derive(Clone, Debug, PartialEq)]
pub struct Found<'a> {
    pub schemas: Vec<&'a ToolSchema>,
    /// `select:` names that are not deferred tools.
    pub unknown: Vec<String>,
}

impl DeferredCatalog {
    pub fn new(schemas: Vec<ToolSchema>) -> Self {
        DeferredCatalog { schemas }
    }

    /// The deferred tools' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.schemas.iter().map(|schema| schema.name.as_str())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.schemas.iter().any(|schema| schema.name == name)
    }

    /// The tools `query` finds.
    pub fn search(&self, query: &str) -> Found<'_> {
        let query = query.trim();
        if let Some(list) = query.strip_prefix("select:") {
            let mut schemas = Vec::new();
            let mut unknown = Vec::new();
            for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                match self.schemas.iter().find(|schema| schema.name == name) {
                    Some(schema) if !schemas.contains(&schema) => schemas.push(schema),
                    Some(_) => {}
                    None => unknown.push(name.to_owned()),
                }
            }
            return Found { schemas, unknown };
        }
        let mut required = Vec::new();
        let mut terms = Vec::new();
        for word in query.split_whitespace() {
            match word.strip_prefix('+') {
                Some(term) if !term.is_empty() => required.push(term.to_lowercase()),
                _ => terms.push(word.to_lowercase()),
            }
        }
        let mut scored: Vec<(u32, &ToolSchema)> = self
            .schemas
            .iter()
            .filter(|schema| required.iter().all(|term| mentions(schema, term)))
            .map(|schema| {
                let score = required
                    .iter()
                    .chain(&terms)
                    .map(|term| term_score(schema, term))
                    .sum();
                (score, schema)
            })
            .filter(|(score, _)| *score > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
        Found {
            schemas: scored
                .into_iter()
                .take(MAX_RESULTS)
                .map(|(_, schema)| schema)
                .collect(),
            unknown: Vec::new(),
        }
    }

    /// The tools the user's `text` names (McpRouting): at most [`ROUTED`], best first.
    pub fn route(&self, text: &str) -> Vec<String> {
        let asked: BTreeSet<String> = words(text)
            .filter(|word| word.len() >= 3 && !STOPWORDS.contains(&word.as_str()))
            .collect();
        let mut scored: Vec<(u32, &str)> = self
            .schemas
            .iter()
            .map(|schema| {
                let name = name_words(&schema.name);
                let description: BTreeSet<String> = words(&schema.description).collect();
                let score = asked
                    .iter()
                    .map(|word| {
                        if name.contains(word) {
                            2
                        } else {
                            u32::from(description.contains(word))
                        }
                    })
                    .sum();
                (score, schema.name.as_str())
            })
            .filter(|(score, _)| *score >= ROUTING_MIN_SCORE)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored
            .into_iter()
            .take(ROUTED)
            .map(|(_, name)| name.to_owned())
            .collect()
    }
}

/// Lowercase words of letters and digits.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

/// The words of a tool's own name (the part after `<server>__`, split at `_` and `-`).
fn name_words(name: &str) -> BTreeSet<String> {
    let own = name
        .split_once(super::names::SEPARATOR)
        .map_or(name, |(_, tool)| tool);
    words(own).collect()
}

fn mentions(schema: &ToolSchema, term: &str) -> bool {
    schema.name.to_lowercase().contains(term) || schema.description.to_lowercase().contains(term)
}

/// A term's weight for a tool: a word of its name 3, part of its name 2, in its description 1.
fn term_score(schema: &ToolSchema, term: &str) -> u32 {
    if name_words(&schema.name).contains(term) {
        3
    } else if schema.name.to_lowercase().contains(term) {
        2
    } else {
        u32::from(schema.description.to_lowercase().contains(term))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(name: &str, description: &str) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object"}),
        }
    }

    fn catalog() -> DeferredCatalog {
        DeferredCatalog::new(vec![
            schema(
                "time__get_current_time",
                "Get the current time in a timezone.",
            ),
            schema("time__convert_time", "Convert a time between timezones."),
            schema("docs__search_docs", "Search the documentation by keywords."),
            schema("docs__read_page", "Read one documentation page by its URL."),
            schema(
                "github__search_issues",
                "Search GitHub issues and pull requests.",
            ),
            schema("github__create_issue", "Open a new issue in a repository."),
        ])
    }

    fn names(found: &Found<'_>) -> Vec<String> {
        found.schemas.iter().map(|s| s.name.clone()).collect()
    }

    #[test]
    fn select_is_exact_ordered_and_names_the_unknown() {
        let catalog = catalog();
        let found =
            catalog.search("select: docs__read_page, time__convert_time,nope,docs__read_page");
        assert_eq!(names(&found), ["docs__read_page", "time__convert_time"]);
        assert_eq!(found.unknown, ["nope"]);
    }

    #[test]
    fn keywords_rank_name_words_over_descriptions_and_required_terms_filter() {
        let catalog = catalog();
        assert_eq!(
            names(&catalog.search("search issue")),
            [
                "github__search_issues",
                "docs__search_docs",
                "github__create_issue"
            ]
        );
        assert_eq!(
            names(&catalog.search("search +github")),
            ["github__search_issues", "github__create_issue"],
            "+github keeps only the tools that mention it, best first"
        );
        assert!(catalog.search("weather").schemas.is_empty());
        let many = DeferredCatalog::new(
            (0..9)
                .map(|i| schema(&format!("s__find_{i}"), "find"))
                .collect(),
        );
        assert_eq!(many.search("find").schemas.len(), MAX_RESULTS);
        assert_eq!(
            many.search("select:s__find_0,s__find_1,s__find_2,s__find_3,s__find_4,s__find_5")
                .schemas
                .len(),
            6,
            "select is uncapped"
        );
    }

    #[test]
    fn routing_promotes_at_most_three_tools_the_user_names() {
        let catalog = catalog();
        assert_eq!(
            catalog.route("What time is it in Tokyo? Convert it to Berlin time."),
            ["time__convert_time", "time__get_current_time"]
        );
        assert!(catalog.route("Write a poem about the sea").is_empty());
        let routed =
            catalog.route("search the docs and github issues, read the page, create an issue");
        assert_eq!(routed.len(), ROUTED);
        assert!(
            routed.contains(&"github__search_issues".to_owned()),
            "{routed:?}"
        );
    }
}
