//! SKILL.md parsing with DeerFlow's frontmatter rules.
//!
//! Pure: no I/O, so the operator validates Skill resources with exactly the rules the runner
//! applies when it loads them.

use serde_json::{Map, Value};

/// The only keys a SKILL.md frontmatter may hold.
pub const ALLOWED_KEYS: [&str; 10] = [
    "name",
    "description",
    "license",
    "allowed-tools",
    "required-secrets",
    "secrets-autonomous",
    "metadata",
    "compatibility",
    "version",
    "author",
];

/// Longest skill name, in characters.
pub const MAX_NAME_LEN: usize = 64;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_LEN: usize = 1024;

/// A parsed, valid SKILL.md.
#[derive(Clone, Debug, PartialEq)]
pub struct SkillMd {
    /// Hyphen-case name, equal to the skill's folder (and Skill resource) name.
    pub name: String,
    /// What the skill is for: the only text the model sees before it loads the skill.
    pub description: String,
    pub license: Option<String>,
    /// Tools the skill may use; `None` = no restriction, `Some([])` = no tools.
    pub allowed_tools: Option<Vec<String>>,
    /// Secrets injected as environment variables when the skill is active.
    pub required_secrets: Vec<RequiredSecret>,
    /// Whether the agent may use the secrets without asking (DeerFlow's default: true).
    pub secrets_autonomous: bool,
    /// Free-form metadata, kept as written.
    pub metadata: Option<Map<String, Value>>,
    pub compatibility: Option<String>,
    pub version: Option<String>,
    pub author: Option<String>,
    /// Everything after the closing `---` line.
    pub body: String,
}

/// One entry of `required-secrets`: a bare name, or `{name, optional}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequiredSecret {
    /// An environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
    pub name: String,
    /// The skill still works without it.
    pub optional: bool,
}

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

/// Parses a SKILL.md and checks its frontmatter.
pub fn parse_skill_md(text: &str) -> Result<SkillMd, SkillError> {
    let (yaml, body) = split_frontmatter(text)?;
    let fields = parse_mapping(yaml)?;

    let mut unknown: Vec<String> = fields
        .keys()
        .filter(|k| !ALLOWED_KEYS.contains(&k.as_str()))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        unknown.sort();
        return Err(SkillError::UnknownKeys(unknown));
    }

    let name = required_string(&fields, "name")?;
    validate_skill_name(&name)?;
    let description = required_string(&fields, "description")?;
    validate_description(&description)?;

    Ok(SkillMd {
        name,
        description,
        license: optional_text(&fields, "license")?,
        allowed_tools: allowed_tools(fields.get("allowed-tools"))?,
        required_secrets: required_secrets(fields.get("required-secrets"))?,
        secrets_autonomous: match fields.get("secrets-autonomous") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(SkillError::WrongType {
                    field: "secrets-autonomous",
                    expected: "true or false",
                });
            }
        },
        metadata: match fields.get("metadata") {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(map.clone()),
            Some(_) => {
                return Err(SkillError::WrongType {
                    field: "metadata",
                    expected: "a mapping",
                });
            }
        },
        compatibility: optional_text(&fields, "compatibility")?,
        version: optional_text(&fields, "version")?,
        author: optional_text(&fields, "author")?,
        body: body.to_owned(),
    })
}

/// Checks a skill name: hyphen-case (`^[a-z0-9]+(-[a-z0-9]+)*$`), at most 64 characters.
pub fn validate_skill_name(name: &str) -> Result<(), SkillError> {
    let invalid = |reason| SkillError::InvalidName {
        name: shorten(name),
        reason,
    };
    if name.is_empty() {
        return Err(SkillError::MissingField("name"));
    }
    if name.chars().count() > MAX_NAME_LEN {
        return Err(invalid("longer than 64 characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(invalid(
            "use lowercase letters, digits and hyphens only (hyphen-case)",
        ));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err(invalid(
            "cannot start or end with a hyphen or contain two hyphens in a row",
        ));
    }
    Ok(())
}

fn validate_description(description: &str) -> Result<(), SkillError> {
    if description.is_empty() {
        return Err(SkillError::MissingField("description"));
    }
    if description.contains(['<', '>']) {
        return Err(SkillError::DescriptionAngleBrackets);
    }
    let len = description.chars().count();
    if len > MAX_DESCRIPTION_LEN {
        return Err(SkillError::DescriptionTooLong(len));
    }
    Ok(())
}

/// Splits `---\n<yaml>\n---\n<body>`; fences may carry trailing whitespace and CRLF endings.
fn split_frontmatter(text: &str) -> Result<(&str, &str), SkillError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or(SkillError::MissingFrontmatter)?;
    if first.trim_end() != "---" {
        return Err(SkillError::MissingFrontmatter);
    }
    let yaml_start = first.len();
    let mut offset = yaml_start;
    for line in lines {
        if line.trim_end() == "---" {
            return Ok((&text[yaml_start..offset], &text[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err(SkillError::UnclosedFrontmatter)
}

fn parse_mapping(yaml: &str) -> Result<Map<String, Value>, SkillError> {
    if yaml.trim().is_empty() {
        return Err(SkillError::NotAMapping);
    }
    match serde_saphyr::from_str::<Value>(yaml) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(SkillError::NotAMapping),
        Err(e) => Err(SkillError::InvalidYaml(e.to_string())),
    }
}

fn required_string(fields: &Map<String, Value>, field: &'static str) -> Result<String, SkillError> {
    match fields.get(field) {
        None | Some(Value::Null) => Err(SkillError::MissingField(field)),
        Some(Value::String(s)) => Ok(s.trim().to_owned()),
        Some(_) => Err(SkillError::WrongType {
            field,
            expected: "a string",
        }),
    }
}

/// Scalars are accepted as text (`version: 1.2` means "1.2"); empty text counts as absent.
fn optional_text(
    fields: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<String>, SkillError> {
    let text = match fields.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(_) => {
            return Err(SkillError::WrongType {
                field,
                expected: "a string",
            });
        }
    };
    Ok((!text.is_empty()).then_some(text))
}

fn allowed_tools(raw: Option<&Value>) -> Result<Option<Vec<String>>, SkillError> {
    const FIELD: &str = "allowed-tools";
    let items = match raw {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(SkillError::WrongType {
                field: FIELD,
                expected: "a list of tool names",
            });
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| match item {
            Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
            Value::String(_) => Err(SkillError::InvalidItem {
                field: FIELD,
                index,
                reason: "empty tool name",
            }),
            _ => Err(SkillError::InvalidItem {
                field: FIELD,
                index,
                reason: "must be a tool name",
            }),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn required_secrets(raw: Option<&Value>) -> Result<Vec<RequiredSecret>, SkillError> {
    const FIELD: &str = "required-secrets";
    let items = match raw {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(SkillError::WrongType {
                field: FIELD,
                expected: "a list of secret names",
            });
        }
    };
    let item_error = |index, reason| SkillError::InvalidItem {
        field: FIELD,
        index,
        reason,
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let (name, optional) = match item {
                Value::String(name) => (name.trim(), false),
                Value::Object(map) => {
                    if map.keys().any(|k| k != "name" && k != "optional") {
                        return Err(item_error(index, "only `name` and `optional` are allowed"));
                    }
                    let name = match map.get("name") {
                        Some(Value::String(name)) => name.trim(),
                        _ => return Err(item_error(index, "`name` must be a string")),
                    };
                    let optional = match map.get("optional") {
                        None | Some(Value::Null) => false,
                        Some(Value::Bool(b)) => *b,
                        Some(_) => {
                            return Err(item_error(index, "`optional` must be true or false"));
                        }
                    };
                    (name, optional)
                }
                _ => return Err(item_error(index, "must be a name or {name, optional}")),
            };
            if !is_env_name(name) {
                return Err(item_error(
                    index,
                    "a secret name must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                ));
            }
            Ok(RequiredSecret {
                name: name.to_owned(),
                optional,
            })
        })
        .collect()
}

fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Keeps error messages readable when someone pastes a paragraph into `name`.
fn shorten(text: &str) -> String {
    const MAX: usize = 80;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head}...")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn md(frontmatter: &str) -> String {
        format!("---\n{frontmatter}\n---\n# Body\n")
    }

    #[test]
    fn parses_all_fields() {
        let text = md(concat!(
            "name: deep-research\n",
            "description: Research a topic across sources.\n",
            "license: MIT\n",
            "allowed-tools: [web_search, read_file]\n",
            "required-secrets:\n  - TAVILY_API_KEY\n  - {name: SERPER_KEY, optional: true}\n",
            "secrets-autonomous: false\n",
            "metadata: {team: docs}\n",
            "compatibility: needs network\n",
            "version: 1.2\n",
            "author: Ada",
        ));
        let skill = parse_skill_md(&text).unwrap();
        assert_eq!(skill.name, "deep-research");
        assert_eq!(skill.description, "Research a topic across sources.");
        assert_eq!(skill.license.as_deref(), Some("MIT"));
        assert_eq!(
            skill.allowed_tools,
            Some(vec!["web_search".to_owned(), "read_file".to_owned()])
        );
        assert_eq!(
            skill.required_secrets,
            vec![
                RequiredSecret {
                    name: "TAVILY_API_KEY".into(),
                    optional: false
                },
                RequiredSecret {
                    name: "SERPER_KEY".into(),
                    optional: true
                },
            ]
        );
        assert!(!skill.secrets_autonomous);
        assert_eq!(skill.metadata.unwrap()["team"], "docs");
        assert_eq!(skill.compatibility.as_deref(), Some("needs network"));
        assert_eq!(skill.version.as_deref(), Some("1.2"));
        assert_eq!(skill.author.as_deref(), Some("Ada"));
        assert_eq!(skill.body, "# Body\n");
    }

    #[test]
    fn defaults_for_optional_fields() {
        let skill = parse_skill_md(&md("name: a\ndescription: b")).unwrap();
        assert_eq!(skill.allowed_tools, None);
        assert!(skill.required_secrets.is_empty());
        assert!(skill.secrets_autonomous);
        assert_eq!(skill.license, None);
    }

    #[test]
    fn empty_allowed_tools_means_no_tools() {
        let skill = parse_skill_md(&md("name: a\ndescription: b\nallowed-tools: []")).unwrap();
        assert_eq!(skill.allowed_tools, Some(vec![]));
    }

    #[test]
    fn accepts_crlf_bom_and_fence_whitespace() {
        let text = "\u{feff}--- \r\nname: a\r\ndescription: b\r\n---\t\r\nbody";
        let skill = parse_skill_md(text).unwrap();
        assert_eq!(skill.name, "a");
        assert_eq!(skill.body, "body");
        assert_eq!(
            parse_skill_md("---\nname: a\ndescription: b\n---")
                .unwrap()
                .body,
            ""
        );
    }

    #[test]
    fn rejects_bad_structure() {
        assert_eq!(
            parse_skill_md("# no frontmatter"),
            Err(SkillError::MissingFrontmatter)
        );
        assert_eq!(parse_skill_md(""), Err(SkillError::MissingFrontmatter));
        assert_eq!(
            parse_skill_md("---\nname: a\n"),
            Err(SkillError::UnclosedFrontmatter)
        );
        assert_eq!(parse_skill_md(&md("")), Err(SkillError::NotAMapping));
        assert_eq!(
            parse_skill_md(&md("- a\n- b")),
            Err(SkillError::NotAMapping)
        );
        assert!(matches!(
            parse_skill_md(&md("name: [unclosed")),
            Err(SkillError::InvalidYaml(_))
        ));
    }

    #[test]
    fn rejects_unknown_keys_sorted() {
        let err = parse_skill_md(&md("name: a\ndescription: b\nzeta: 1\nalpha: 2")).unwrap_err();
        assert_eq!(
            err,
            SkillError::UnknownKeys(vec!["alpha".into(), "zeta".into()])
        );
        assert!(err.to_string().contains("allowed keys: name, description"));
    }

    #[test]
    fn name_rules() {
        for bad in ["Deep", "a_b", "-a", "a-", "a--b", "a b", "ü"] {
            let err = parse_skill_md(&md(&format!("name: \"{bad}\"\ndescription: d")));
            assert!(
                matches!(err, Err(SkillError::InvalidName { .. })),
                "{bad}: {err:?}"
            );
        }
        for good in ["a", "a-b", "x1-2y", &"a".repeat(64)] {
            assert!(
                parse_skill_md(&md(&format!("name: {good}\ndescription: d"))).is_ok(),
                "{good}"
            );
        }
        assert!(matches!(
            parse_skill_md(&md(&format!("name: {}\ndescription: d", "a".repeat(65)))),
            Err(SkillError::InvalidName { .. })
        ));
        assert_eq!(
            parse_skill_md(&md("description: d")),
            Err(SkillError::MissingField("name"))
        );
        assert_eq!(
            parse_skill_md(&md("name: 12\ndescription: d")),
            Err(SkillError::WrongType {
                field: "name",
                expected: "a string"
            })
        );
    }

    #[test]
    fn long_names_are_shortened_in_errors() {
        let err = validate_skill_name(&"A".repeat(500)).unwrap_err();
        assert!(err.to_string().len() < 200, "{err}");
    }

    #[test]
    fn description_rules() {
        assert_eq!(
            parse_skill_md(&md("name: a")),
            Err(SkillError::MissingField("description"))
        );
        assert_eq!(
            parse_skill_md(&md("name: a\ndescription: \"  \"")),
            Err(SkillError::MissingField("description"))
        );
        assert_eq!(
            parse_skill_md(&md("name: a\ndescription: \"use <b>\"")),
            Err(SkillError::DescriptionAngleBrackets)
        );
        let long = "é".repeat(1025);
        assert_eq!(
            parse_skill_md(&md(&format!("name: a\ndescription: {long}"))),
            Err(SkillError::DescriptionTooLong(1025))
        );
        let max = "é".repeat(1024);
        assert!(parse_skill_md(&md(&format!("name: a\ndescription: {max}"))).is_ok());
    }

    #[test]
    fn list_field_rules() {
        assert_eq!(
            parse_skill_md(&md("name: a\ndescription: b\nallowed-tools: bash")),
            Err(SkillError::WrongType {
                field: "allowed-tools",
                expected: "a list of tool names"
            })
        );
        assert!(matches!(
            parse_skill_md(&md("name: a\ndescription: b\nallowed-tools: [bash, 3]")),
            Err(SkillError::InvalidItem { index: 1, .. })
        ));
        assert!(matches!(
            parse_skill_md(&md("name: a\ndescription: b\nallowed-tools: [\" \"]")),
            Err(SkillError::InvalidItem { index: 0, .. })
        ));
        assert!(matches!(
            parse_skill_md(&md("name: a\ndescription: b\nrequired-secrets: [\"A=B\"]")),
            Err(SkillError::InvalidItem {
                field: "required-secrets",
                ..
            })
        ));
        assert!(matches!(
            parse_skill_md(&md(
                "name: a\ndescription: b\nrequired-secrets: [{name: A, extra: 1}]"
            )),
            Err(SkillError::InvalidItem { .. })
        ));
        assert_eq!(
            parse_skill_md(&md(
                "name: a\ndescription: b\nsecrets-autonomous: yes please"
            )),
            Err(SkillError::WrongType {
                field: "secrets-autonomous",
                expected: "true or false"
            })
        );
        assert_eq!(
            parse_skill_md(&md("name: a\ndescription: b\nmetadata: [1]")),
            Err(SkillError::WrongType {
                field: "metadata",
                expected: "a mapping"
            })
        );
    }

    fn text() -> impl Strategy<Value = String> {
        // Printable text without angle brackets; YAML quoting is the serializer's job.
        "[^<>\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]{1,40}"
            .prop_map(|s| s.trim().to_owned())
            .prop_filter("non-empty", |s| !s.is_empty())
    }

    fn name() -> impl Strategy<Value = String> {
        prop::collection::vec("[a-z0-9]{1,8}", 1..5).prop_map(|parts| parts.join("-"))
    }

    fn env_name() -> impl Strategy<Value = String> {
        "[A-Z_][A-Z0-9_]{0,15}"
    }

    prop_compose! {
        fn skill_md()(
            name in name(),
            description in text(),
            license in prop::option::of(text()),
            allowed_tools in prop::option::of(prop::collection::vec("[a-z_]{1,12}", 0..4)),
            required_secrets in prop::collection::vec((env_name(), any::<bool>()), 0..3),
            secrets_autonomous in any::<bool>(),
            author in prop::option::of(text()),
            version in prop::option::of(text()),
            compatibility in prop::option::of(text()),
            metadata in prop::option::of(prop::collection::btree_map("[a-z]{1,8}", text(), 0..3)),
            body in "[^\r]{0,200}",
        ) -> SkillMd {
            SkillMd {
                name,
                description,
                license,
                allowed_tools,
                required_secrets: required_secrets
                    .into_iter()
                    .map(|(name, optional)| RequiredSecret { name, optional })
                    .collect(),
                secrets_autonomous,
                metadata: metadata.map(|m| {
                    m.into_iter().map(|(k, v)| (k, Value::String(v))).collect()
                }),
                compatibility,
                version,
                author,
                body,
            }
        }
    }

    fn render(skill: &SkillMd) -> String {
        let mut map = Map::new();
        map.insert("name".into(), skill.name.clone().into());
        map.insert("description".into(), skill.description.clone().into());
        let mut opt = |key: &str, value: &Option<String>| {
            if let Some(v) = value {
                map.insert(key.into(), v.clone().into());
            }
        };
        opt("license", &skill.license);
        opt("author", &skill.author);
        opt("version", &skill.version);
        opt("compatibility", &skill.compatibility);
        if let Some(tools) = &skill.allowed_tools {
            map.insert("allowed-tools".into(), tools.clone().into());
        }
        let secrets: Vec<Value> = skill
            .required_secrets
            .iter()
            .map(|s| serde_json::json!({"name": s.name, "optional": s.optional}))
            .collect();
        map.insert("required-secrets".into(), secrets.into());
        map.insert("secrets-autonomous".into(), skill.secrets_autonomous.into());
        if let Some(metadata) = &skill.metadata {
            map.insert("metadata".into(), Value::Object(metadata.clone()));
        }
        let yaml = serde_saphyr::to_string(&map).unwrap();
        format!("---\n{}\n---\n{}", yaml.trim_end(), skill.body)
    }

    proptest! {
        #[test]
        fn never_panics(text in any::<String>()) {
            let _ = parse_skill_md(&text);
        }

        #[test]
        fn never_panics_inside_frontmatter(yaml in "[ -~\n]{0,200}") {
            let _ = parse_skill_md(&format!("---\n{yaml}\n---\n"));
        }

        #[test]
        fn valid_frontmatter_round_trips(skill in skill_md()) {
            let text = render(&skill);
            prop_assert_eq!(parse_skill_md(&text), Ok(skill), "{}", text);
        }
    }
}
