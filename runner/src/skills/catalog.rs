//! The skills one run may use: the sandbox's SKILL.md files, parsed, de-duplicated and
//! filtered by the Agent's `skills` list.

use std::collections::{BTreeMap, BTreeSet};

use herd_sandbox::SkillFile;

use super::{RequiredSecret, parse_skill_md};

/// Where a skill comes from: built into the image, or a `Skill` resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkillCategory {
    Public,
    Custom,
}

impl SkillCategory {
    /// Parses the folder name under `/mnt/skills/`.
    pub fn from_dir(dir: &str) -> Option<Self> {
        match dir {
            "public" => Some(Self::Public),
            "custom" => Some(Self::Custom),
            _ => None,
        }
    }

    /// The folder name under `/mnt/skills/`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Custom => "custom",
        }
    }
}

/// A skill the model may load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Virtual path of its SKILL.md, e.g. `/mnt/skills/public/deep-research/SKILL.md`.
    pub path: String,
    pub category: SkillCategory,
    /// `None` = no restriction; `Some([])` = the skill needs no tools.
    pub allowed_tools: Option<Vec<String>>,
    pub required_secrets: Vec<RequiredSecret>,
}

/// The outcome of building a catalog: the usable skills, sorted by name, and what was
/// skipped, for the run's log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkillCatalog {
    pub skills: Vec<Skill>,
    pub warnings: Vec<String>,
}

impl SkillCatalog {
    /// Builds the catalog from the SKILL.md files found in the sandbox.
    ///
    /// A file that does not parse, or whose `name` differs from its folder, is skipped with a
    /// warning. A custom skill replaces a public one of the same name. `filter` is the Agent's
    /// `skills`: `None` keeps all, `Some([])` none, `Some(names)` only those; names that match
    /// no installed skill are reported.
    pub fn build(files: &[SkillFile], filter: Option<&[String]>) -> Self {
        let mut warnings = Vec::new();
        let mut by_name: BTreeMap<String, Skill> = BTreeMap::new();

        let mut ordered: Vec<(SkillCategory, &SkillFile)> = Vec::with_capacity(files.len());
        for file in files {
            match SkillCategory::from_dir(&file.category) {
                Some(category) => ordered.push((category, file)),
                None => warnings.push(format!(
                    "skipping skill at {}: unknown category `{}` (expected public or custom)",
                    file.path, file.category
                )),
            }
        }
        // Public first, so a custom skill of the same name replaces it; then by path, so
        // the outcome does not depend on the order the sandbox listed the files in.
        ordered.sort_by(|a, b| (a.0, &a.1.path).cmp(&(b.0, &b.1.path)));

        for (category, file) in ordered {
            let parsed = match parse_skill_md(&file.content) {
                Ok(parsed) => parsed,
                Err(e) => {
                    warnings.push(format!("skipping skill at {}: {e}", file.path));
                    continue;
                }
            };
            if parsed.name != file.dir_name {
                warnings.push(format!(
                    "skipping skill at {}: its name `{}` differs from its folder `{}`",
                    file.path, parsed.name, file.dir_name
                ));
                continue;
            }
            by_name.insert(
                parsed.name.clone(),
                Skill {
                    name: parsed.name,
                    description: parsed.description,
                    path: file.path.clone(),
                    category,
                    allowed_tools: parsed.allowed_tools,
                    required_secrets: parsed.required_secrets,
                },
            );
        }

        if let Some(wanted) = filter {
            let wanted: BTreeSet<&str> = wanted.iter().map(String::as_str).collect();
            for name in &wanted {
                if !by_name.contains_key(*name) {
                    warnings.push(format!(
                        "the agent lists skill `{name}`, which is not installed"
                    ));
                }
            }
            by_name.retain(|name, _| wanted.contains(name.as_str()));
        }

        Self {
            skills: by_name.into_values().collect(),
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::skills::parse_skill_md;

    fn file(category: &str, dir: &str, name: &str, description: &str) -> SkillFile {
        SkillFile {
            category: category.into(),
            dir_name: dir.into(),
            path: format!("/mnt/skills/{category}/{dir}/SKILL.md"),
            content: format!("---\nname: {name}\ndescription: {description}\n---\nBody\n"),
        }
    }

    fn names(catalog: &SkillCatalog) -> Vec<&str> {
        catalog.skills.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn builds_sorted_skills_with_paths() {
        let catalog = SkillCatalog::build(
            &[
                file("public", "zeta", "zeta", "Z"),
                file("custom", "alpha", "alpha", "A"),
            ],
            None,
        );
        assert_eq!(names(&catalog), ["alpha", "zeta"]);
        assert!(catalog.warnings.is_empty());
        let alpha = &catalog.skills[0];
        assert_eq!(alpha.path, "/mnt/skills/custom/alpha/SKILL.md");
        assert_eq!(alpha.category, SkillCategory::Custom);
        assert_eq!(alpha.description, "A");
    }

    #[test]
    fn custom_shadows_public_in_any_listing_order() {
        let public = file("public", "report", "report", "built-in");
        let custom = file("custom", "report", "report", "mine");
        for files in [
            vec![public.clone(), custom.clone()],
            vec![custom.clone(), public.clone()],
        ] {
            let catalog = SkillCatalog::build(&files, None);
            assert_eq!(catalog.skills.len(), 1);
            assert_eq!(catalog.skills[0].description, "mine");
            assert_eq!(catalog.skills[0].category, SkillCategory::Custom);
        }
    }

    #[test]
    fn skips_invalid_and_mismatched_with_warnings() {
        let mut broken = file("public", "broken", "broken", "x");
        broken.content = "no frontmatter".into();
        let catalog = SkillCatalog::build(
            &[
                broken,
                file("custom", "folder", "other-name", "x"),
                file("extra", "odd", "odd", "x"),
                file("public", "good", "good", "x"),
            ],
            None,
        );
        assert_eq!(names(&catalog), ["good"]);
        assert_eq!(catalog.warnings.len(), 3, "{:?}", catalog.warnings);
        assert!(
            catalog
                .warnings
                .iter()
                .any(|w| w.contains("unknown category"))
        );
        assert!(
            catalog
                .warnings
                .iter()
                .any(|w| w.contains("/mnt/skills/public/broken/SKILL.md")
                    && w.contains("frontmatter"))
        );
        assert!(
            catalog
                .warnings
                .iter()
                .any(|w| w.contains("`other-name` differs from its folder `folder`"))
        );
    }

    #[test]
    fn tri_state_filter() {
        let files = [
            file("public", "a", "a", "x"),
            file("public", "b", "b", "x"),
            file("custom", "c", "c", "x"),
        ];
        assert_eq!(names(&SkillCatalog::build(&files, None)), ["a", "b", "c"]);
        let none = SkillCatalog::build(&files, Some(&[]));
        assert!(none.skills.is_empty());
        assert!(none.warnings.is_empty());
        let some = SkillCatalog::build(&files, Some(&["c".into(), "a".into(), "nope".into()]));
        assert_eq!(names(&some), ["a", "c"]);
        assert_eq!(
            some.warnings,
            ["the agent lists skill `nope`, which is not installed"]
        );
    }

    #[test]
    fn carries_allowed_tools_and_secrets() {
        let mut f = file("public", "s", "s", "x");
        f.content =
            "---\nname: s\ndescription: x\nallowed-tools: [bash]\nrequired-secrets: [KEY]\n---\n"
                .into();
        let skill = &SkillCatalog::build(&[f], None).skills[0];
        assert_eq!(skill.allowed_tools, Some(vec!["bash".to_owned()]));
        assert_eq!(skill.required_secrets[0].name, "KEY");
    }

    /// Every built-in skill must load: a broken one would silently vanish from every agent.
    #[test]
    fn built_in_skills_are_valid() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../skills/public");
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&root).unwrap() {
            let entry = entry.unwrap();
            if !entry.file_type().unwrap().is_dir() {
                continue;
            }
            let dir_name = entry.file_name().into_string().unwrap();
            let content = std::fs::read_to_string(entry.path().join("SKILL.md")).unwrap();
            let parsed = parse_skill_md(&content)
                .unwrap_or_else(|e| panic!("skills/public/{dir_name}/SKILL.md: {e}"));
            assert!(
                parsed.body.trim().len() > 200,
                "{dir_name}: instructions too thin"
            );
            // Resources are named by their virtual path; each must ship with the skill.
            let prefix = format!("/mnt/skills/public/{dir_name}/");
            for (start, _) in content.match_indices(&prefix) {
                let rest = &content[start + prefix.len()..];
                let end = rest
                    .find(|c: char| c.is_whitespace() || c == '`' || c == ')')
                    .unwrap_or(rest.len());
                let resource = entry.path().join(&rest[..end]);
                assert!(
                    resource.is_file(),
                    "{dir_name}: missing {}",
                    resource.display()
                );
            }
            files.push(SkillFile {
                category: "public".into(),
                path: format!("/mnt/skills/public/{dir_name}/SKILL.md"),
                dir_name,
                content,
            });
        }
        assert!(files.len() >= 3, "at least three built-in skills");
        let catalog = SkillCatalog::build(&files, None);
        assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
        assert_eq!(catalog.skills.len(), files.len());
    }
}
