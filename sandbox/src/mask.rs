//! Rewriting path prefixes inside free text: host paths in tool output become virtual ones
//! (so the model never learns where the work directory is), and virtual paths in a local
//! `bash` command become host ones (so `cat /mnt/user-data/workspace/x` works on a laptop).

use regex::{Captures, Regex};

/// Replaces whole path prefixes in text, longest first.
#[derive(Clone, Debug)]
pub(crate) struct PrefixRewriter {
    /// `None` when there is nothing to rewrite.
    pattern: Option<Regex>,
    /// (from, to) pairs, looked up by the matched text.
    pairs: Vec<(String, String)>,
}

impl PrefixRewriter {
    /// A rewriter for `(from, to)` pairs; pairs with `from == to` or an empty `from` are
    /// dropped.
    pub(crate) fn new(
        pairs: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, regex::Error> {
        let mut pairs: Vec<(String, String)> = pairs
            .into_iter()
            .filter(|(from, to)| !from.is_empty() && from != to)
            .collect();
        // Longest first, so `/w/skills/custom` wins over `/w/skills` where both apply: the
        // regex alternation takes the first alternative that matches.
        pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        pairs.dedup_by(|a, b| a.0 == b.0);
        let pattern = if pairs.is_empty() {
            None
        } else {
            let alternatives: Vec<String> =
                pairs.iter().map(|(from, _)| regex::escape(from)).collect();
            Some(Regex::new(&alternatives.join("|"))?)
        };
        Ok(PrefixRewriter { pattern, pairs })
    }

    /// `text` with every prefix that stands as a whole path replaced.
    pub(crate) fn rewrite(&self, text: &str) -> String {
        let Some(pattern) = &self.pattern else {
            return text.to_owned();
        };
        pattern
            .replace_all(text, |captures: &Captures<'_>| {
                let Some(found) = captures.get(0) else {
                    return String::new();
                };
                // `/work/user-data2` or `x/work/user-data` are other paths that merely
                // contain the prefix; leave them alone.
                let before = text[..found.start()].chars().next_back();
                let after = text[found.end()..].chars().next();
                if before.is_some_and(is_name_char) || after.is_some_and(is_name_char) {
                    return found.as_str().to_owned();
                }
                self.pairs
                    .iter()
                    .find(|(from, _)| from == found.as_str())
                    .map_or_else(|| found.as_str().to_owned(), |(_, to)| to.clone())
            })
            .into_owned()
    }
}

/// Characters that continue a file name (so a match followed by one is a different path).
fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '-' | '_' | '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewriter() -> Result<PrefixRewriter, regex::Error> {
        PrefixRewriter::new([
            ("/w/skills".to_owned(), "/mnt/skills/x".to_owned()),
            (
                "/w/skills/custom".to_owned(),
                "/mnt/skills/custom".to_owned(),
            ),
            ("/w/user-data".to_owned(), "/mnt/user-data".to_owned()),
            ("/same".to_owned(), "/same".to_owned()),
        ])
    }

    #[test]
    fn rewrites_longest_prefix_first() -> Result<(), regex::Error> {
        let r = rewriter()?;
        assert_eq!(
            r.rewrite("cat /w/skills/custom/a/SKILL.md /w/skills/b"),
            "cat /mnt/skills/custom/a/SKILL.md /mnt/skills/x/b"
        );
        assert_eq!(
            r.rewrite("/w/user-data: No such file"),
            "/mnt/user-data: No such file"
        );
        Ok(())
    }

    #[test]
    fn leaves_other_paths_that_contain_a_prefix() -> Result<(), regex::Error> {
        let r = rewriter()?;
        assert_eq!(r.rewrite("/w/user-data2/x"), "/w/user-data2/x");
        assert_eq!(r.rewrite("/x/w/user-data/a"), "/x/w/user-data/a");
        assert_eq!(r.rewrite("'/w/user-data'"), "'/mnt/user-data'");
        Ok(())
    }

    #[test]
    fn nothing_to_rewrite_is_a_no_op() -> Result<(), regex::Error> {
        let r = PrefixRewriter::new([("/a".to_owned(), "/a".to_owned())])?;
        assert_eq!(r.rewrite("/a/b"), "/a/b");
        Ok(())
    }
}
