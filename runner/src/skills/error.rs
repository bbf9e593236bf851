//! Why a SKILL.md was refused.

use super::frontmatter::ALLOWED_KEYS;

/// A SKILL.md that breaks DeerFlow's frontmatter rules. The message names the field and the
/// rule, so it can go straight into a status condition or a CLI error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    #[error(
        "SKILL.md must begin with YAML frontmatter: a `---` line, the fields, then a closing `---` line"
    )]
    MissingFrontmatter,
    #[error("the frontmatter has no closing `---` line")]
    UnclosedFrontmatter,
    #[error("the frontmatter is not valid YAML: {0}")]
    InvalidYaml(String),
    #[error("the frontmatter must be a YAML mapping of keys to values")]
    NotAMapping,
    #[error("unknown frontmatter key(s): {}; allowed keys: {}", .0.join(", "), ALLOWED_KEYS.join(", "))]
    UnknownKeys(Vec<String>),
    #[error("`{0}` is required")]
    MissingField(&'static str),
    #[error("`{field}` must be {expected}")]
    WrongType {
        field: &'static str,
        expected: &'static str,
    },
    #[error("name `{name}` is invalid: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("description is too long ({0} characters; at most 1024)")]
    DescriptionTooLong(usize),
    #[error("description cannot contain `<` or `>`")]
    DescriptionAngleBrackets,
    #[error("`{field}` item {index} is invalid: {reason}")]
    InvalidItem {
        field: &'static str,
        index: usize,
        reason: &'static str,
    },
}
