//! Errors of the pure-Rust `validate()` methods, which mirror the CRDs' create-time rules for
//! manifests that never pass through an API server (`herd-runner run -f`).

use std::fmt;
use std::time::Duration;

use crate::duration::{DurationError, parse_duration_within};

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

/// The `validate()` methods of a resource and of its spec, with their doc comments: the
/// resource's checks `metadata.name` by `name_ok` (else `name_message`), then the spec's rules;
/// the spec's checks its rules alone. The spec's own `check(&self, &mut Checker)` records them.
macro_rules! validate_methods {
    (
        $(#[$object_doc:meta])*
        $object:ty, name by $name_ok:expr, $name_message:expr;
        $(#[$spec_doc:meta])*
        $spec:ty
    ) => {
        impl $object {
            $(#[$object_doc])*
            pub fn validate(&self) -> Result<(), $crate::validation::FieldErrors> {
                let mut checker = $crate::validation::Checker::default();
                checker.check(
                    $name_ok(self.metadata.name.as_deref().unwrap_or_default()),
                    "metadata.name",
                    $name_message,
                );
                self.spec.check(&mut checker);
                checker.finish()
            }
        }

        impl $spec {
            $(#[$spec_doc])*
            pub fn validate(&self) -> Result<(), $crate::validation::FieldErrors> {
                let mut checker = $crate::validation::Checker::default();
                self.check(&mut checker);
                checker.finish()
            }
        }
    };
}
pub(crate) use validate_methods;

/// The Agent and Run name rule: at most 63 characters (names go into label values).
pub(crate) fn fits_a_label(name: &str) -> bool {
    name.chars().count() <= 63
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

    /// The duration rules on an optional duration field: the format, then 1s to `max`.
    pub(crate) fn duration(&mut self, path: &str, value: Option<&str>, max: Duration) {
        let Some(value) = value else { return };
        match parse_duration_within(value, max) {
            Ok(_) => {}
            Err(DurationError::Format(_)) => {
                self.check(false, path, crate::rules::DURATION_MESSAGE)
            }
            Err(error) => self.check(false, path, &error.to_string()),
        }
    }

    /// A rule whose message quotes the offending value: `"<value>"<suffix>`.
    pub(crate) fn quoted(&mut self, ok: bool, path: &str, value: &str, suffix: &str) {
        if !ok {
            self.check(false, path, &crate::rules::quoted(value, suffix));
        }
    }

    /// A `x-kubernetes-list-type: set`: each item once, as the API server words it.
    pub(crate) fn unique(&mut self, path: &str, items: &[String]) {
        for (i, item) in items.iter().enumerate() {
            if items[..i].contains(item) {
                self.errors.push(FieldError {
                    path: format!("{path}[{i}]"),
                    message: format!("Duplicate value: {item:?}"),
                });
            }
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

    /// A schema `maxProperties` (the API server words it as for lists).
    pub(crate) fn max_properties(&mut self, path: &str, len: usize, max: usize) {
        self.max_items(path, len, max);
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
        checker.duration("spec.timeout", Some("soon"), crate::duration::MAX_TIMEOUT);
        checker.duration("spec.inputTimeout", None, crate::duration::MAX_TIMEOUT);
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
    fn durations_quoted_values_and_duplicates() {
        let mut checker = Checker::default();
        checker.duration("a", Some("169h"), crate::duration::MAX_TIMEOUT);
        checker.duration("b", Some("30m"), crate::duration::MAX_TIMEOUT);
        checker.quoted(false, "c", "x y", " is bad");
        checker.quoted(true, "d", "fine", " is bad");
        checker.unique("e", &["a".into(), "b".into(), "a".into()]);
        assert_eq!(
            checker.finish().unwrap_err().to_string(),
            "a: \"169h\" must be between 1s and 168h; c: \"x y\" is bad; e[2]: Duplicate value: \"a\""
        );
    }

    #[test]
    fn no_errors_is_ok() {
        assert_eq!(Checker::default().finish(), Ok(()));
    }
}
