//! `-o jsonpath=TEMPLATE` as kubectl reads it: text with `{.path}` expressions (and `{"\n"}`
//! literals), each expression a JSONPath relative to the object, evaluated by `jsonpath-rust`.
//! Several matches print space-separated, strings without quotes, other values as JSON.
//! `{range}`/`{end}` are not supported: the error says to use `-o json` with `jq` instead.

use jsonpath_rust::JsonPath;
use serde_json::Value;

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    /// Printed as it is.
    Text(String),
    /// A JSONPath (`$…`) whose matches are printed.
    Path(String),
}

/// A parsed `-o jsonpath=` template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

impl Template {
    /// Parses `template`, checking every expression; or why it cannot be used.
    pub fn parse(template: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 1..];
            let close = after
                .find('}')
                .ok_or_else(|| format!("the jsonpath template {template:?} has an unclosed {{"))?;
            pieces.push(expression(&after[..close], template)?);
            rest = &after[close + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        if pieces.is_empty() {
            return Err(
                "the jsonpath template is empty (e.g. -o jsonpath='{.metadata.name}')".into(),
            );
        }
        Ok(Template { pieces })
    }

    /// Parses a `--sort-by` path: `{.status.startTime}` or `.status.startTime`.
    pub fn sort_path(text: &str) -> Result<Template, String> {
        let template = if text.contains('{') {
            Template::parse(text)?
        } else {
            Template::parse(&format!("{{{text}}}"))?
        };
        if template.pieces.iter().any(|p| matches!(p, Piece::Path(_))) {
            Ok(template)
        } else {
            Err(format!(
                "--sort-by {text:?} has no path (e.g. --sort-by=.status.startTime)"
            ))
        }
    }

    /// The first value the template's first path finds in `value`.
    pub fn first(&self, value: &Value) -> Option<Value> {
        self.pieces.iter().find_map(|piece| match piece {
            Piece::Path(path) => value.query(path).ok()?.into_iter().next().cloned(),
            Piece::Text(_) => None,
        })
    }

    /// The template filled in from `value`.
    pub fn render(&self, value: &Value) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Path(path) => {
                    let found = value.query(path).unwrap_or_default();
                    let shown: Vec<String> = found.into_iter().map(shown).collect();
                    out.push_str(&shown.join(" "));
                }
            }
        }
        out
    }
}

/// One `{…}`: a quoted literal or a path.
fn expression(inner: &str, template: &str) -> Result<Piece, String> {
    let inner = inner.trim();
    if let Some(literal) = inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        let text = literal
            .replace("\\n", "\n")
            .replace("\\t", "\t")
            .replace("\\\"", "\"");
        return Ok(Piece::Text(text));
    }
    let word = inner.split_whitespace().next().unwrap_or_default();
    if matches!(word, "range" | "end") {
        return Err(format!(
            "the jsonpath template {template:?} uses {{{word}}}, which kubectl herd does not \
             support: use -o json and jq, or a path with [*]"
        ));
    }
    let path = match inner.strip_prefix('$') {
        Some(_) => inner.to_owned(),
        None if inner.starts_with('.') || inner.starts_with('[') => format!("${inner}"),
        None => format!("$.{inner}"),
    };
    Value::Null
        .query(&path)
        .map_err(|e| format!("the jsonpath {{{inner}}} in {template:?} is not valid: {e}"))?;
    Ok(Piece::Path(path))
}

/// A match as kubectl prints it: a string as it is, anything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run() -> Value {
        json!({"metadata": {"name": "notes"}, "status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "Succeeded", "status": "True"}],
            "report": {"usage": {"inputTokens": 12}}}})
    }

    #[test]
    fn paths_literals_and_text() {
        let template = Template::parse("name={.metadata.name}{\"\\n\"}").unwrap();
        assert_eq!(template.render(&run()), "name=notes\n");
        let tokens = Template::parse("{.status.report.usage.inputTokens}").unwrap();
        assert_eq!(tokens.render(&run()), "12");
    }

    #[test]
    fn filters_and_wildcards_as_kubectl_writes_them() {
        let filter =
            Template::parse("{.status.conditions[?(@.type==\"Succeeded\")].status}").unwrap();
        assert_eq!(filter.render(&run()), "True");
        let all = Template::parse("{.status.conditions[*].type}").unwrap();
        assert_eq!(all.render(&run()), "Ready Succeeded");
        let missing = Template::parse("{.spec.nothing}").unwrap();
        assert_eq!(missing.render(&run()), "");
    }

    #[test]
    fn bad_templates_say_why() {
        assert!(
            Template::parse("{.metadata")
                .unwrap_err()
                .contains("unclosed")
        );
        assert!(
            Template::parse("{range .items[*]}")
                .unwrap_err()
                .contains("jq")
        );
        assert!(Template::parse("").unwrap_err().contains("empty"));
        assert!(Template::parse("{.a[}").unwrap_err().contains("not valid"));
    }
}
