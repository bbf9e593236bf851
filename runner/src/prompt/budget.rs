//! Fitting a prompt into a small context window by dropping optional detail.
//!
//! How a window is shared (`ContextBudget`): half for what every request starts with — the
//! system prompt, the tool schemas and the injected memory —, a quarter for the answer
//! (`max_tokens`), the rest for the conversation (summarization keeps it there). Counts use
//! the runner's own tokenizer with its safety factor (`tokenizer::count_tokens`).

use serde::Serialize;

use super::error::PromptError;
use super::tokenizer::count_tokens;

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
    /// One line per rule, no thinking-style guidance: for 4k-token models with every
    /// feature on.
    pub minimal: bool,
}

/// Everything: the first step.
const FULL: Detail = Detail {
    examples: true,
    response_style: true,
    citations: "full",
    skill_description_chars: None,
    compact: false,
    minimal: false,
};
const NO_EXAMPLES: Detail = Detail {
    examples: false,
    ..FULL
};
const SHORT_CITATIONS: Detail = Detail {
    response_style: false,
    citations: "short",
    ..NO_EXAMPLES
};
const SKILLS_CUT_TO_120: Detail = Detail {
    skill_description_chars: Some(120),
    ..SHORT_CITATIONS
};
const COMPACT: Detail = Detail {
    citations: "off",
    compact: true,
    ..SKILLS_CUT_TO_120
};
const SKILLS_CUT_TO_60: Detail = Detail {
    skill_description_chars: Some(60),
    ..COMPACT
};
const SKILL_NAMES_ONLY: Detail = Detail {
    skill_description_chars: Some(0),
    ..SKILLS_CUT_TO_60
};
const MINIMAL: Detail = Detail {
    minimal: true,
    ..SKILL_NAMES_ONLY
};

/// Detail levels from richest to leanest; each step is the one before it with a little more
/// dropped.
pub(crate) const STEPS: [Detail; 8] = [
    FULL,
    NO_EXAMPLES,
    SHORT_CITATIONS,
    SKILLS_CUT_TO_120,
    COMPACT,
    SKILLS_CUT_TO_60,
    SKILL_NAMES_ONLY,
    MINIMAL,
];

/// Tokens a chat template adds around tool schemas (Qwen 2.5's tool preamble and wrappers
/// took 110 of llama.cpp's tokens), counted with the schemas.
pub const CHAT_TEMPLATE_TOKENS: usize = 128;

/// Tokens of the first request's framing that sit in the prompt half too: the date reminder
/// and the markers around the user's input.
pub const FRAMING_TOKENS: usize = 128;

/// How a model's context window is shared between the parts of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextBudget {
    window: usize,
}

impl ContextBudget {
    /// The budget of a `context_window`-token model.
    pub fn new(context_window: u32) -> Self {
        ContextBudget {
            window: usize::try_from(context_window).unwrap_or(usize::MAX),
        }
    }

    /// Tokens for the system prompt, the tool schemas and the injected memory together:
    /// half the window.
    pub fn prompt(&self) -> usize {
        self.window / 2
    }

    /// Tokens the system prompt leaves for injected memory at least: the Agent's
    /// `injectionTokens`, at most a sixty-fourth of the window.
    pub fn memory_floor(&self, injection_tokens: usize) -> usize {
        injection_tokens.min(self.window / 64)
    }

    /// The memory injection budget once the system prompt and tool schemas took
    /// `prompt_tokens`: what is left of the prompt half, never less than `memory_floor`, at
    /// most `injectionTokens`. Four fifths of the room, as the correction reserve may add a
    /// quarter on top (`memory::inject::correction_reserve`).
    pub fn memory(&self, injection_tokens: usize, prompt_tokens: usize) -> usize {
        let room = self.prompt().saturating_sub(prompt_tokens + FRAMING_TOKENS) * 4 / 5;
        injection_tokens.min(room.max(self.memory_floor(injection_tokens)))
    }

    /// The answer's `max_tokens`: the configured value, at most a quarter of the window; a
    /// quarter when none is configured. A larger request would not fit beside the prompt and
    /// a conversation, and servers refuse or cut it.
    pub fn output(&self, configured: Option<u32>) -> u32 {
        let quarter = u32::try_from(self.window / 4).unwrap_or(u32::MAX).max(1);
        configured.map_or(quarter, |wanted| wanted.clamp(1, quarter))
    }
}

/// Renders at the richest detail whose size (by `count_tokens`) fits `limit` tokens. Without
/// a limit the full detail is used; when even the leanest rendering is too big (a very long
/// SOUL, a tiny window), it is returned anyway with a warning: a working agent beats none.
pub(crate) fn render_fitting(
    limit: Option<usize>,
    render: impl Fn(Detail) -> Result<String, PromptError>,
) -> Result<String, PromptError> {
    let Some(limit) = limit else {
        return render(STEPS[0]);
    };
    let mut leanest = (String::new(), 0);
    for detail in STEPS {
        let text = render(detail)?;
        let tokens = count_tokens(&text);
        if tokens <= limit {
            return Ok(text);
        }
        leanest = (text, tokens);
    }
    tracing::warn!(
        limit,
        tokens = leanest.1,
        "the system prompt does not fit its share of the context window even without optional \
         sections"
    );
    Ok(leanest.0)
}

/// The tokens the system prompt may take in a `context_window`: the prompt half minus what
/// the tool schemas and injected memory (`reserved`) take. `None` without a window.
pub(crate) fn system_prompt_limit(context_window: Option<u32>, reserved: usize) -> Option<usize> {
    context_window.map(|window| ContextBudget::new(window).prompt().saturating_sub(reserved))
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
            assert!(a.minimal <= b.minimal);
            assert_ne!(a, b);
        }
    }

    #[test]
    fn picks_the_richest_detail_that_fits() {
        let long = "word ".repeat(100);
        let short = "word ".repeat(10);
        let render = |d: Detail| {
            Ok(if d.response_style {
                long.clone()
            } else {
                short.clone()
            })
        };
        let long_tokens = count_tokens(&long);
        assert_eq!(render_fitting(None, render).unwrap(), long);
        assert_eq!(render_fitting(Some(long_tokens), render).unwrap(), long);
        assert_eq!(
            render_fitting(Some(long_tokens - 1), render).unwrap(),
            short
        );
        assert_eq!(render_fitting(Some(1), render).unwrap(), short);
    }

    #[test]
    fn a_window_is_shared_half_prompt_quarter_answer() {
        let budget = ContextBudget::new(4096);
        assert_eq!(budget.prompt(), 2048);
        assert_eq!(budget.memory_floor(2000), 64);
        assert_eq!(budget.memory_floor(50), 50);
        assert_eq!(budget.memory(2000, 1548), 297);
        assert_eq!(budget.memory(200, 1548), 200);
        assert_eq!(budget.memory(2000, 3000), 64);
        assert_eq!(budget.output(None), 1024);
        assert_eq!(budget.output(Some(4096)), 1024);
        assert_eq!(budget.output(Some(16)), 16);
        assert_eq!(budget.output(Some(0)), 1);
        assert_eq!(ContextBudget::new(0).output(None), 1);
        assert_eq!(system_prompt_limit(Some(4096), 1500), Some(548));
        assert_eq!(system_prompt_limit(Some(4096), 5000), Some(0));
        assert_eq!(system_prompt_limit(None, 1500), None);
    }
}
