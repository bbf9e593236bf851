//! Applies memory operations to a memory document: the one place the memory rules live
//! (confidence threshold, duplicates, reinforcement, the fact cap), shared by the runner's
//! local memory file and the operator's memory ConfigMaps so both keep the same memory.

use crate::wire::{ContextField, Fact, MemoryDocument, MemoryOperation};

/// Facts below this confidence are not stored (DeerFlow's `fact_confidence_threshold`).
pub const MIN_CONFIDENCE: f64 = 0.7;
/// Confidence gained each time a fact is confirmed again.
pub const REINFORCE_STEP: f64 = 0.05;

/// Where operations come from and how many facts to keep.
#[derive(Clone, Debug, PartialEq)]
pub struct ApplyContext {
    /// RFC 3339 time stamped on new and updated facts.
    pub now: String,
    /// The Run (or local thread) the operations came from.
    pub source: String,
    /// Most facts kept; the least confident (then the oldest) go first.
    pub max_facts: usize,
}

/// What an `add` operation would store: its content trimmed, or `None` when that is empty or
/// the model is not sure enough of it (its confidence below [`MIN_CONFIDENCE`], or no number).
pub fn content_to_add(content: &str, confidence: f64) -> Option<&str> {
    let content = content.trim();
    let sure = confidence.is_finite() && confidence >= MIN_CONFIDENCE;
    (sure && !content.is_empty()).then_some(content)
}

/// Applies `operations` in order and bumps the revision.
pub fn apply_operations(
    document: &mut MemoryDocument,
    operations: &[MemoryOperation],
    ctx: &ApplyContext,
) {
    for operation in operations {
        match operation {
            MemoryOperation::Add {
                content,
                category,
                confidence,
            } => {
                let Some(content) = content_to_add(content, *confidence) else {
                    continue;
                };
                if let Some(existing) = document
                    .facts
                    .iter_mut()
                    .find(|fact| fact.content.eq_ignore_ascii_case(content))
                {
                    reinforce(existing, &ctx.now);
                    continue;
                }
                let id = next_fact_id(document);
                document.facts.push(Fact {
                    id,
                    content: content.to_owned(),
                    category: *category,
                    confidence: confidence.min(1.0),
                    source: ctx.source.clone(),
                    created_at: ctx.now.clone(),
                    updated_at: ctx.now.clone(),
                    confirmation_count: 0,
                });
            }
            MemoryOperation::Reinforce { id } => {
                if let Some(fact) = document.facts.iter_mut().find(|fact| &fact.id == id) {
                    reinforce(fact, &ctx.now);
                }
            }
            MemoryOperation::Remove { id } => document.facts.retain(|fact| &fact.id != id),
            MemoryOperation::SetContext { field, text } => {
                let text = Some(text.trim().to_owned()).filter(|t| !t.is_empty());
                let slot = match field {
                    ContextField::Work => &mut document.context.work,
                    ContextField::Personal => &mut document.context.personal,
                    ContextField::TopOfMind => &mut document.context.top_of_mind,
                    ContextField::History => &mut document.context.history,
                };
                *slot = text;
            }
        }
    }
    evict(document, ctx.max_facts);
    document.revision = document.revision.saturating_add(1);
}

fn reinforce(fact: &mut Fact, now: &str) {
    fact.confirmation_count = fact.confirmation_count.saturating_add(1);
    fact.confidence = (fact.confidence + REINFORCE_STEP).min(1.0);
    fact.updated_at = now.to_owned();
}

/// Ids stay unique even after removals: one past the highest numeric id in use.
fn next_fact_id(document: &MemoryDocument) -> String {
    let highest = document
        .facts
        .iter()
        .filter_map(|fact| fact.id.strip_prefix("fact-")?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    format!("fact-{}", highest + 1)
}

fn evict(document: &mut MemoryDocument, max_facts: usize) {
    if document.facts.len() <= max_facts {
        return;
    }
    // Most valuable first: higher confidence, then more recently updated.
    document.facts.sort_by(|a, b| {
        b.confidence
            .total_cmp(&a.confidence)
            .then_with(|| b.updated_at.cmp(&a.updated_at))
    });
    document.facts.truncate(max_facts);
}

#[cfg(test)]
mod tests {
    use crate::wire::FactCategory;

    use super::*;

    fn ctx(max_facts: usize) -> ApplyContext {
        ApplyContext {
            now: "2026-11-29T00:00:00Z".into(),
            source: "run-1".into(),
            max_facts,
        }
    }

    fn add(content: &str, confidence: f64) -> MemoryOperation {
        MemoryOperation::Add {
            content: content.into(),
            category: FactCategory::Preference,
            confidence,
        }
    }

    #[test]
    fn low_confidence_facts_are_dropped() {
        let mut doc = MemoryDocument::default();
        apply_operations(
            &mut doc,
            &[add("likes tea", 0.69), add("likes Rust", 0.9)],
            &ctx(10),
        );
        assert_eq!(doc.facts.len(), 1);
        assert_eq!(doc.facts[0].content, "likes Rust");
        assert_eq!(doc.revision, 1);
    }

    #[test]
    fn duplicates_reinforce_instead_of_adding() {
        let mut doc = MemoryDocument::default();
        apply_operations(&mut doc, &[add("Likes Rust", 0.8)], &ctx(10));
        apply_operations(&mut doc, &[add("likes rust", 0.9)], &ctx(10));
        assert_eq!(doc.facts.len(), 1);
        assert_eq!(doc.facts[0].confirmation_count, 1);
        assert!((doc.facts[0].confidence - 0.85).abs() < 1e-9);
    }

    #[test]
    fn reinforce_and_remove_by_id() {
        let mut doc = MemoryDocument::default();
        apply_operations(&mut doc, &[add("a", 0.8), add("b", 0.8)], &ctx(10));
        let ops = [
            MemoryOperation::Reinforce {
                id: "fact-1".into(),
            },
            MemoryOperation::Remove {
                id: "fact-2".into(),
            },
            MemoryOperation::Remove {
                id: "missing".into(),
            },
        ];
        apply_operations(&mut doc, &ops, &ctx(10));
        assert_eq!(doc.facts.len(), 1);
        assert_eq!(doc.facts[0].confirmation_count, 1);
        apply_operations(&mut doc, &[add("c", 0.8)], &ctx(10));
        assert_eq!(
            doc.facts[1].id, "fact-2",
            "ids continue from the highest in use"
        );
    }

    #[test]
    fn the_least_confident_facts_are_evicted_past_the_cap() {
        let mut doc = MemoryDocument::default();
        apply_operations(
            &mut doc,
            &[add("a", 0.75), add("b", 0.95), add("c", 0.85)],
            &ctx(2),
        );
        let kept: Vec<_> = doc.facts.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(kept, vec!["b", "c"]);
    }

    #[test]
    fn context_fields_are_set_and_cleared() {
        let mut doc = MemoryDocument::default();
        let set = MemoryOperation::SetContext {
            field: ContextField::Work,
            text: "Builds operators".into(),
        };
        apply_operations(&mut doc, &[set], &ctx(10));
        assert_eq!(doc.context.work.as_deref(), Some("Builds operators"));
        let clear = MemoryOperation::SetContext {
            field: ContextField::Work,
            text: " ".into(),
        };
        apply_operations(&mut doc, &[clear], &ctx(10));
        assert_eq!(doc.context.work, None);
    }
}
