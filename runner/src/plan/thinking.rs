//! Whether the lead thinks: the one place this is decided.
//!
//! Asked for by the Run or the command line, thinking on a model that does not declare
//! `supportsThinking` is turned off with a warning; left at the Agent's `runDefaults.thinking`
//! (on by default), it is turned off silently, since nobody asked for it on this model.
//! Subagents never think (`RunPlan::call_options`).

use crate::model::resolve::ConfiguredModel;

/// The decision, and what to tell the user about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Thinking {
    pub on: bool,
    pub warning: Option<String>,
}

/// Thinking for the lead: `chosen` by the Run or the command line, else `default`.
pub(super) fn decide(chosen: Option<bool>, default: bool, model: &ConfiguredModel) -> Thinking {
    let wanted = chosen.unwrap_or(default);
    if !wanted || model.supports_thinking {
        return Thinking {
            on: wanted,
            warning: None,
        };
    }
    let warning = chosen.is_some().then(|| {
        format!(
            "thinking was asked for, but model `{}` does not declare `supportsThinking`: \
             running without thinking",
            model.name
        )
    });
    Thinking { on: false, warning }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::resolve::Provider;

    fn model(supports_thinking: bool) -> ConfiguredModel {
        ConfiguredModel {
            supports_thinking,
            ..ConfiguredModel::new(Provider::Openai, "small")
        }
    }

    #[test]
    fn thinking_is_turned_off_with_a_warning_when_asked_of_a_model_without_it() {
        let decided = decide(Some(true), false, &model(false));
        assert!(!decided.on);
        let warning = decided.warning.unwrap_or_default();
        assert!(warning.contains("supportsThinking"), "{warning}");
        assert!(warning.contains("`small`"), "{warning}");
    }

    #[test]
    fn the_agents_default_is_dropped_silently_on_a_model_without_thinking() {
        assert_eq!(
            decide(None, true, &model(false)),
            Thinking {
                on: false,
                warning: None
            }
        );
    }

    #[test]
    fn a_thinking_model_thinks_when_asked_or_by_default_and_not_when_told_not_to() {
        let thinker = model(true);
        assert!(decide(Some(true), false, &thinker).on);
        assert!(decide(None, true, &thinker).on);
        assert!(!decide(Some(false), true, &thinker).on);
        assert!(!decide(None, false, &thinker).on);
        assert_eq!(decide(Some(true), false, &thinker).warning, None);
    }
}
