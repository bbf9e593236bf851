//! Errors of the pure-Rust `validate()` methods, which mirror the CRDs' create-time rules for
//! manifests that never pass through an API server (`herd-runner run -f`).

use std::fmt;

/// One rule a field breaks: `spec.subagents.maxConcurrent: must be between 1 and 4`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field from the object's root, e.g. `spec.subagents.maxConcurrent`.
    pub path: String,
    /// The rule's message, the same text as the CRD's CEL rule.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every rule a manifest breaks (never empty when returned as an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FieldErrors(pub Vec<FieldError>);

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// Collects field errors while a `validate()` walks a spec.
#[derive(Debug, Default)]
pub(crate) struct Checker {
    errors: Vec<FieldError>,
}

impl Checker {
    /// Records an error at `path` unless `ok`.
    pub(crate) fn check(&mut self, ok: bool, path: impl Into<String>, message: &str) {
        if !ok {
            self.errors.push(FieldError {
                path: path.into(),
                message: message.to_owned(),
            });
        }
    }

    /// The duration rule on an optional duration field.
    pub(crate) fn duration(&mut self, path: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.check(
                crate::duration::is_duration(value),
                path,
                crate::rules::DURATION_MESSAGE,
            );
        }
    }

    /// A schema `maxLength` (in characters, as the API server counts).
    pub(crate) fn max_length(&mut self, path: &str, value: &str, max: usize) {
        if value.chars().count() > max {
            self.errors.push(FieldError {
                path: path.to_owned(),
                message: format!("Too long: may not be more than {max} characters"),
            });
        }
    }

    /// A schema `maxItems`.
    pub(crate) fn max_items(&mut self, path: &str, len: usize, max: usize) {
        if len > max {
            self.errors.push(FieldError {
                path: path.to_owned(),
                message: format!("Too many: {len}: must have at most {max} items"),
            });
        }
    }

    /// `Ok` when no rule was broken.
    pub(crate) fn finish(self) -> Result<(), FieldErrors> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(FieldErrors(self.errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_every_error_and_joins_them() {
        let mut checker = Checker::default();
        checker.check(true, "spec.a", "never shown");
        checker.check(false, "spec.b", "must be b");
        checker.duration("spec.timeout", Some("soon"));
        checker.duration("spec.inputTimeout", None);
        checker.max_length("spec.task", "héllo", 4);
        checker.max_length("spec.task", "héllo", 5);
        checker.max_items("spec.inputs", 3, 2);
        let errors = checker.finish().unwrap_err();
        assert_eq!(errors.0.len(), 4);
        assert_eq!(
            errors.to_string(),
            format!(
                "spec.b: must be b; spec.timeout: {}; spec.task: Too long: may not be more than 4 characters; spec.inputs: Too many: 3: must have at most 2 items",
                crate::rules::DURATION_MESSAGE
            )
        );
    }

    #[test]
    fn no_errors_is_ok() {
        assert_eq!(Checker::default().finish(), Ok(()));
    }
}
