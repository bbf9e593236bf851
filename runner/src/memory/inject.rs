//! Formats a memory document for the model (DeerFlow's `format_memory_for_injection`): user
//! context, history, then facts, most confident first, under a token budget.
//!
//! Corrections ("do not do X", "my name is spelled Y") are what users notice when forgotten,
//! so they draw on a reserve of their own and are never crowded out by other facts.

use herd_crds::wire::{Fact, FactCategory, MemoryDocument};

use crate::tag_escaping::escape_tags;

/// Tokens set aside for `correction` facts on top of the injection budget (DeerFlow's
/// guaranteed-category allowance), at most a quarter of that budget.
pub const CORRECTION_RESERVE_TOKENS: usize = 500;

/// Counts a line's tokens.
pub type TokenCounter = fn(&str) -> usize;

/// The correction reserve that goes with an injection budget of `max_tokens`: DeerFlow's 500
/// for the default budget, less for the small budgets of small context windows.
pub fn correction_reserve(max_tokens: usize) -> usize {
    CORRECTION_RESERVE_TOKENS.min(max_tokens / 4)
}

/// The most tokens `format_memory_counted` injects for a budget of `max_tokens`, reserve included.
pub fn max_injected_tokens(max_tokens: usize) -> usize {
    max_tokens + correction_reserve(max_tokens)
}

/// The memory text to inject, or `None` when there is nothing to say or the budget is 0.
/// Every value is tag-escaped: memory holds what models wrote about users' words. Each line
/// is counted with `count` (the runner's tokenizer when the memory has to fit a small
/// context window, else a quarter of its characters).
pub fn format_memory_counted(
    document: &MemoryDocument,
    max_tokens: usize,
    count: TokenCounter,
) -> Option<String> {
    if max_tokens == 0 {
        return None;
    }
    let mut budget = max_tokens;
    let mut sections = Vec::new();

    let context = &document.context;
    let context_lines = [
        ("Work", &context.work),
        ("Personal", &context.personal),
        ("Current Focus", &context.top_of_mind),
    ];
    let lines = take_lines(
        context_lines
            .iter()
            .filter_map(|(label, text)| Some(format!("- {label}: {}", clean(text.as_deref()?)?))),
        &mut budget,
        count,
    );
    if !lines.is_empty() {
        sections.push(format!("User Context:\n{}", lines.join("\n")));
    }
    let history = context
        .history
        .as_deref()
        .and_then(clean)
        .map(|text| format!("- {text}"));
    let lines = take_lines(history.into_iter(), &mut budget, count);
    if !lines.is_empty() {
        sections.push(format!("History:\n{}", lines.join("\n")));
    }

    let facts = select_facts(
        &document.facts,
        budget,
        correction_reserve(max_tokens),
        count,
    );
    if !facts.is_empty() {
        let lines: Vec<String> = facts.iter().map(|fact| fact_line(fact)).collect();
        sections.push(format!("Facts:\n{}", lines.join("\n")));
    }
    (!sections.is_empty()).then(|| sections.join("\n\n"))
}

/// Corrections first into their reserve; then every fact left, most confident first, into
/// what the context and history left of the budget. Shown most confident first.
fn select_facts(
    facts: &[Fact],
    mut budget: usize,
    mut reserve: usize,
    count: TokenCounter,
) -> Vec<&Fact> {
    let mut ranked: Vec<&Fact> = facts
        .iter()
        .filter(|fact| !fact.content.trim().is_empty())
        .collect();
    ranked.sort_by(|a, b| {
        b.confidence
            .total_cmp(&a.confidence)
            .then_with(|| b.updated_at.cmp(&a.updated_at))
    });
    let mut chosen = vec![false; ranked.len()];
    for (index, fact) in ranked.iter().enumerate() {
        if fact.category == FactCategory::Correction {
            chosen[index] = spend(&mut reserve, &fact_line(fact), count);
        }
    }
    for (index, fact) in ranked.iter().enumerate() {
        if !chosen[index] {
            chosen[index] = spend(&mut budget, &fact_line(fact), count);
        }
    }
    ranked
        .into_iter()
        .zip(chosen)
        .filter_map(|(fact, chosen)| chosen.then_some(fact))
        .collect()
}

fn take_lines(
    lines: impl Iterator<Item = String>,
    budget: &mut usize,
    count: TokenCounter,
) -> Vec<String> {
    lines.filter(|line| spend(budget, line, count)).collect()
}

/// Takes the line's tokens (and its newline) from `budget` if they fit.
fn spend(budget: &mut usize, line: &str, count: TokenCounter) -> bool {
    let cost = count(line) + 1;
    if cost > *budget {
        return false;
    }
    *budget -= cost;
    true
}

fn fact_line(fact: &Fact) -> String {
    format!(
        "- [{} | {:.2}] {}",
        category_name(fact.category),
        fact.confidence,
        clean(&fact.content).unwrap_or_default()
    )
}

/// One line of escaped text, or `None` when blank.
fn clean(text: &str) -> Option<String> {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!line.is_empty()).then(|| escape_tags(&line))
}

/// The category as stored (`snake_case`), for the model to echo back.
pub fn category_name(category: FactCategory) -> &'static str {
    match category {
        FactCategory::Preference => "preference",
        FactCategory::Correction => "correction",
        FactCategory::Context => "context",
        FactCategory::Goal => "goal",
        FactCategory::Behavior => "behavior",
        FactCategory::Identity => "identity",
        FactCategory::Constraint => "constraint",
        FactCategory::Decision => "decision",
        FactCategory::Other => "other",
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::wire::MemoryContext;

    use super::*;
    use crate::prompt::estimate_tokens;

    fn fact(id: &str, category: FactCategory, confidence: f64, content: &str) -> Fact {
        Fact {
            id: id.into(),
            content: content.into(),
            category,
            confidence,
            source: "run-1".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            confirmation_count: 0,
        }
    }

    #[test]
    fn an_empty_document_injects_nothing() {
        assert_eq!(
            format_memory_counted(&MemoryDocument::default(), 2000, estimate_tokens),
            None
        );
    }

    #[test]
    fn sections_in_deerflow_order_most_confident_first() {
        let document = MemoryDocument {
            revision: 3,
            context: MemoryContext {
                work: Some("Builds a Kubernetes operator".into()),
                personal: None,
                top_of_mind: Some("Shipping   the\nrunner".into()),
                history: Some("Started in March".into()),
            },
            facts: vec![
                fact("fact-1", FactCategory::Preference, 0.8, "Prefers Rust"),
                fact("fact-2", FactCategory::Identity, 0.95, "Named <Ada>"),
            ],
        };
        let text = format_memory_counted(&document, 2000, estimate_tokens).unwrap();
        assert_eq!(
            text,
            "User Context:\n- Work: Builds a Kubernetes operator\n- Current Focus: Shipping the \
             runner\n\nHistory:\n- Started in March\n\nFacts:\n- [identity | 0.95] Named \
             &lt;Ada&gt;\n- [preference | 0.80] Prefers Rust"
        );
    }

    #[test]
    fn the_budget_keeps_the_most_confident_facts() {
        let facts = (0..100)
            .map(|i| {
                let confidence = 0.7 + f64::from(i) / 1000.0;
                fact(
                    &format!("fact-{i}"),
                    FactCategory::Context,
                    confidence,
                    &"x".repeat(40),
                )
            })
            .collect();
        let document = MemoryDocument {
            facts,
            ..MemoryDocument::default()
        };
        let text = format_memory_counted(&document, 100, estimate_tokens).unwrap();
        assert!(estimate_tokens(&text) <= 100, "{}", estimate_tokens(&text));
        assert!(
            text.contains("[context | 0.80]"),
            "the most confident fact is kept"
        );
        assert!(
            !text.contains("[context | 0.70]"),
            "the least confident is not"
        );
    }

    #[test]
    fn corrections_survive_a_full_budget() {
        let mut facts: Vec<Fact> = (0..50)
            .map(|i| {
                fact(
                    &format!("f{i}"),
                    FactCategory::Goal,
                    0.99,
                    &"goal ".repeat(20),
                )
            })
            .collect();
        facts.push(fact("c", FactCategory::Correction, 0.71, "Never use tabs"));
        let document = MemoryDocument {
            facts,
            ..MemoryDocument::default()
        };
        let text = format_memory_counted(&document, 60, estimate_tokens).unwrap();
        assert!(
            text.contains("[correction | 0.71] Never use tabs"),
            "{text}"
        );
        assert!(text.contains("[goal | 0.99]"));
    }

    #[test]
    fn injected_memory_stays_within_its_budget_and_reserve() {
        let facts = (0..40)
            .map(|i| {
                let category = if i % 5 == 0 {
                    FactCategory::Correction
                } else {
                    FactCategory::Preference
                };
                let text = format!("Fact number {i} about the user's stack and habits");
                fact(&format!("f{i}"), category, 0.9, &text)
            })
            .collect();
        let document = MemoryDocument {
            facts,
            ..MemoryDocument::default()
        };
        let count = crate::prompt::tokenizer::count_tokens;
        for budget in [40, 128, 512, 2000] {
            let text = format_memory_counted(&document, budget, count).unwrap();
            // The one section header is the only text not counted line by line.
            let header = count("Facts:\n");
            assert!(
                count(&text) <= max_injected_tokens(budget) + header,
                "{budget}: {} tokens",
                count(&text)
            );
        }
        assert_eq!(correction_reserve(2000), CORRECTION_RESERVE_TOKENS);
        assert_eq!(correction_reserve(512), 128);
    }

    #[test]
    fn a_zero_budget_turns_injection_off() {
        let document = MemoryDocument {
            facts: vec![fact("c", FactCategory::Correction, 0.9, "x")],
            ..MemoryDocument::default()
        };
        assert_eq!(format_memory_counted(&document, 0, estimate_tokens), None);
    }
}
