//! The built-in skills (`skills/public/`), which the sandbox image carries at
//! `/mnt/skills/public`: Agents may list them without a Skill resource.

use std::collections::BTreeMap;

use herd_crds::agent::ResolvedSkill;
use include_dir::{Dir, include_dir};

use crate::decide::skill_version;

static PUBLIC_SKILLS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../skills/public");

/// Each built-in skill with the digest of its files, computed as for a Skill resource (SKILL.md
/// as content, every other file by its path relative to the skill's folder), sorted by name.
pub fn builtin_skills() -> Vec<ResolvedSkill> {
    let mut skills: Vec<ResolvedSkill> = PUBLIC_SKILLS
        .dirs()
        .filter_map(|dir| {
            let name = dir.path().file_name()?.to_str()?.to_owned();
            let content = dir.get_file(dir.path().join("SKILL.md"))?.contents_utf8()?;
            let mut files = BTreeMap::new();
            collect_files(dir, dir, &mut files);
            files.remove("SKILL.md");
            Some(ResolvedSkill {
                digest: skill_version::digest(content, &files),
                name,
            })
        })
        .collect();
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

fn collect_files(root: &Dir<'_>, dir: &Dir<'_>, out: &mut BTreeMap<String, String>) {
    for file in dir.files() {
        let Ok(relative) = file.path().strip_prefix(root.path()) else {
            continue;
        };
        if let (Some(path), Some(text)) = (relative.to_str(), file.contents_utf8()) {
            out.insert(path.to_owned(), text.to_owned());
        }
    }
    for child in dir.dirs() {
        collect_files(root, child, out);
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::skill_md::parse_skill_md;

    use super::*;

    #[test]
    fn every_public_skill_is_listed_with_a_digest() {
        let skills = builtin_skills();
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert!(names.contains(&"deep-research"), "{names:?}");
        assert_eq!(skills.len(), PUBLIC_SKILLS.dirs().count());
        for skill in &skills {
            assert_eq!(skill.digest.len(), 64);
            let md = PUBLIC_SKILLS
                .get_file(format!("{}/SKILL.md", skill.name))
                .and_then(|f| f.contents_utf8())
                .unwrap();
            assert_eq!(parse_skill_md(md).unwrap().name, skill.name);
        }
    }

    #[test]
    fn files_are_relative_to_the_skill() {
        let dir = PUBLIC_SKILLS.get_dir("deep-research").unwrap();
        let mut files = BTreeMap::new();
        collect_files(dir, dir, &mut files);
        assert!(files.contains_key("SKILL.md"));
        assert!(files.contains_key("report-template.md"));
    }
}
