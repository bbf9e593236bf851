//! Why a prompt could not be rendered.

/// A prompt rendering failure. Templates are compiled into the binary and tested, so these
/// point at a bug, not at user input; they are still errors, never panics.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    #[error("prompt template `{template}` failed: {message}")]
    Template { template: String, message: String },
    #[error("unknown subagent type `{0}` (expected general-purpose or bash)")]
    UnknownSubagentKind(String),
}

impl PromptError {
    pub(crate) fn template(template: &str, error: &minijinja::Error) -> Self {
        Self::Template {
            template: template.to_owned(),
            message: error.to_string(),
        }
    }
}
