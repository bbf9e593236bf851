//! Fitting a prompt into a small context window by dropping optional detail.

use serde::Serialize;

use super::error::PromptError;

/// A rough token count: one token per four characters. Good enough to choose how much
/// optional detail fits; the exact count depends on the model's tokenizer.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// How much optional detail the templates render. Everything a step removes is guidance
/// the model can do without; the rules themselves (roles, limits, paths) always stay.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Detail {
    /// Worked examples in the clarification and subagent sections.
    pub examples: bool,
    /// The `<response_style>` section.
    pub response_style: bool,
    /// `full`, `short` or `off`.
    pub citations: &'static str,
    /// Skill descriptions cut to this many characters; `Some(0)` lists names only.
    pub skill_description_chars: Option<usize>,
    /// Terse wording of the clarification, subagent, skill and reminder rules.
    pub compact: bool,
}

/// Detail levels from richest to leanest; each step drops a little more.
pub(crate) const STEPS: [Detail; 7] = [
    Detail {
        examples: true,
        response_style: true,
        citations: "full",
        skill_description_chars: None,
        compact: false,
    },
    Detail {
        examples: false,
        response_style: true,
        citations: "full",
        skill_description_chars: None,
        compact: false,
    },
    Detail {
        examples: false,
        response_style: false,
        citations: "short",
        skill_description_chars: None,
        compact: false,
    },
    Detail {
        examples: false,
        response_style: false,
        citations: "short",
        skill_description_chars: Some(120),
        compact: false,
    },
    Detail {
        examples: false,
        response_style: false,
        citations: "off",
        skill_description_chars: Some(120),
        compact: true,
    },
    Detail {
        examples: false,
        response_style: false,
        citations: "off",
        skill_description_chars: Some(60),
        compact: true,
    },
    Detail {
        examples: false,
        response_style: false,
        citations: "off",
        skill_description_chars: Some(0),
        compact: true,
    },
];

/// The share of the context window the system prompt may take: the tool schemas, the
/// conversation and the answer need the rest.
const WINDOW_SHARE: usize = 4;

/// Renders at the richest detail that fits `context_window / 4` tokens. Without a window
/// the full detail is used; when even the leanest rendering is too big (a very long SOUL),
/// it is returned anyway with a warning: a working agent beats none.
pub(crate) fn render_fitting(
    context_window: Option<u32>,
    render: impl Fn(Detail) -> Result<String, PromptError>,
) -> Result<String, PromptError> {
    let Some(window) = context_window else {
        return render(STEPS[0]);
    };
    let budget = usize::try_from(window).unwrap_or(usize::MAX) / WINDOW_SHARE;
    let mut leanest = String::new();
    for detail in STEPS {
        let text = render(detail)?;
        if estimate_tokens(&text) <= budget {
            return Ok(text);
        }
        leanest = text;
    }
    tracing::warn!(
        context_window = window,
        estimated_tokens = estimate_tokens(&leanest),
        "the system prompt does not fit a quarter of the context window even without optional sections"
    );
    Ok(leanest)
}

/// Cuts `text` to at most `max` characters at a word boundary, marking the cut.
pub(crate) fn truncate_words(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let keep = max.saturating_sub(3);
    let head: String = text.chars().take(keep).collect();
    let at_word_end = text.chars().nth(keep).is_some_and(char::is_whitespace);
    let head = match head.rfind(' ') {
        Some(space) if space > 0 && !at_word_end => &head[..space],
        _ => head.as_str(),
    };
    format!(
        "{}...",
        head.trim_end_matches([',', ';', ':', '.', '-', ' '])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_is_chars_over_four_rounded_up() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("éééé"), 1);
    }

    #[test]
    fn steps_only_ever_drop_detail() {
        for pair in STEPS.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert!(a.examples >= b.examples && a.response_style >= b.response_style);
            let rank = |c| ["off", "short", "full"].iter().position(|x| *x == c);
            assert!(rank(a.citations) >= rank(b.citations));
            let chars = |d: Detail| d.skill_description_chars.unwrap_or(usize::MAX);
            assert!(chars(a) >= chars(b));
            assert!(a.compact <= b.compact);
            assert_ne!(a, b);
        }
    }

    #[test]
    fn picks_the_richest_detail_that_fits() {
        let render = |d: Detail| {
            Ok(if d.response_style {
                "x".repeat(400)
            } else {
                "x".repeat(40)
            })
        };
        assert_eq!(render_fitting(None, render).unwrap().len(), 400);
        assert_eq!(render_fitting(Some(400), render).unwrap().len(), 400);
        assert_eq!(render_fitting(Some(399), render).unwrap().len(), 40);
        assert_eq!(render_fitting(Some(4), render).unwrap().len(), 40);
    }

    #[test]
    fn truncates_at_word_boundaries() {
        assert_eq!(truncate_words("short", 10), "short");
        assert_eq!(
            truncate_words("Analyze CSV data, then chart it", 20),
            "Analyze CSV data..."
        );
        assert!(truncate_words(&"ü".repeat(50), 10).chars().count() <= 10);
    }
}
