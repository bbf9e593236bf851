//! The runner's own token count, so budgets never need the model server.
//!
//! Tokenizers differ by model. Measured with llama.cpp on SmolLM2-135M (a 49k vocabulary,
//! a third of cl100k's): our system prompt took 1.22 times cl100k's count, the tool schemas as
//! a chat template renders them 1.44 times. The runner counts with cl100k, the only tokenizer
//! it ships, and multiplies by `SAFETY_FACTOR_PERCENT` so that its count stays at or above
//! what such a model counts; the slack on prose covers the chat template's own tokens.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

/// How much larger than cl100k's a model's count may be, as a ratio over 100.
pub const SAFETY_FACTOR_PERCENT: usize = 145;

static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();

/// The cl100k tokenizer, loaded on first use (tens of milliseconds, more in debug builds):
/// only runs that budget tokens pay for it.
pub fn cl100k() -> Option<&'static CoreBPE> {
    CL100K
        .get_or_init(|| match tiktoken_rs::cl100k_base() {
            Ok(tokenizer) => Some(tokenizer),
            Err(error) => {
                tracing::warn!(%error, "the cl100k tokenizer did not load; estimating tokens");
                None
            }
        })
        .as_ref()
}

/// Tokens `text` may take for any model: cl100k's count times `SAFETY_FACTOR_PERCENT`,
/// rounded up. Without the tokenizer, one token per three characters (a conservative
/// estimate for English and JSON).
pub fn count_tokens(text: &str) -> usize {
    match cl100k() {
        Some(tokenizer) => {
            (tokenizer.encode_ordinary(text).len() * SAFETY_FACTOR_PERCENT).div_ceil(100)
        }
        None => text.chars().count().div_ceil(3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_cl100k_times_the_safety_factor() {
        assert_eq!(count_tokens(""), 0);
        let text = "Fetch a web page and return its text.";
        let cl100k = cl100k().unwrap().encode_ordinary(text).len();
        assert_eq!(count_tokens(text), (cl100k * 145).div_ceil(100));
        assert!(count_tokens(text) > cl100k);
    }
}
