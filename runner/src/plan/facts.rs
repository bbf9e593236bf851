//! The environment a run starts in, read once by its shell and handed to the plan as data.

use std::collections::BTreeMap;

/// Environment variables, as the process had them at start.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EnvFacts {
    vars: BTreeMap<String, String>,
}

impl EnvFacts {
    /// This process's environment. Variables whose name or value is not UTF-8 are left out
    /// (`std::env::vars` would panic on them).
    pub fn from_process() -> Self {
        std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .collect()
    }

    /// The value of `name`, unless it is unset or empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|value| !value.is_empty())
    }
}

/// Facts holding just `vars`, for tests.
#[cfg(test)]
pub(crate) fn facts(vars: &[(&str, &str)]) -> EnvFacts {
    vars.iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

impl FromIterator<(String, String)> for EnvFacts {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(vars: I) -> Self {
        EnvFacts {
            vars: vars.into_iter().collect(),
        }
    }
}

/// Names only: values are often keys.
impl std::fmt::Debug for EnvFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_count_as_unset_and_debug_shows_names_only() {
        let facts = facts(&[("OPENAI_API_KEY", "sk-secret"), ("EMPTY", "")]);
        assert_eq!(facts.var("OPENAI_API_KEY"), Some("sk-secret"));
        assert_eq!(facts.var("EMPTY"), None);
        assert_eq!(facts.var("MISSING"), None);
        let printed = format!("{facts:?}");
        assert!(printed.contains("OPENAI_API_KEY"), "{printed}");
        assert!(!printed.contains("sk-secret"), "{printed}");
    }

    #[test]
    fn the_process_environment_is_read() {
        // PATH is set wherever cargo runs tests.
        assert!(EnvFacts::from_process().var("PATH").is_some());
    }
}
