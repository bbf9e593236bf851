//! When an old Skill version's ConfigMap may go: once no unfinished Run's snapshot names it
//! (its Pod, or a retry's, mounts it) and no Agent still resolves to it (a Run accepted next
//! would snapshot it).

use std::collections::BTreeSet;

use herd_crds::agent::ResolvedSkill;

use super::skill_version::config_map_name;

/// The skill-version ConfigMaps that `skills` lists (of snapshots of unfinished Runs and of
/// Agents' resolved skills) keep.
pub fn versions_in_use<'a>(
    skills: impl IntoIterator<Item = &'a ResolvedSkill>,
) -> BTreeSet<String> {
    skills
        .into_iter()
        .map(|s| config_map_name(&s.name, &s.digest))
        .collect()
}

/// The versions of one Skill to delete: all but `current` that nothing in `in_use` names.
pub fn unused_versions(
    current: &str,
    versions: &[String],
    in_use: &BTreeSet<String>,
) -> Vec<String> {
    versions
        .iter()
        .filter(|v| v.as_str() != current && !in_use.contains(v.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str, digest: &str) -> ResolvedSkill {
        ResolvedSkill {
            name: name.to_owned(),
            digest: digest.to_owned(),
        }
    }

    fn names(all: &[&str]) -> Vec<String> {
        all.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn in_use_names_are_the_config_maps_of_the_listed_versions() {
        let listed = [
            skill("search", "aaaaaaaa1111"),
            skill("web", "bbbbbbbb2222"),
        ];
        assert_eq!(
            versions_in_use(&listed),
            BTreeSet::from(["search-aaaaaaaa".to_owned(), "web-bbbbbbbb".to_owned()])
        );
    }

    #[test]
    fn only_old_unused_versions_go() {
        let versions = names(&["search-11111111", "search-22222222", "search-33333333"]);
        let in_use = BTreeSet::from(["search-22222222".to_owned()]);
        assert_eq!(
            unused_versions("search-33333333", &versions, &in_use),
            names(&["search-11111111"])
        );
        assert_eq!(
            unused_versions("search-33333333", &versions, &BTreeSet::new()),
            names(&["search-11111111", "search-22222222"])
        );
        assert!(
            unused_versions(
                "search-11111111",
                &names(&["search-11111111"]),
                &BTreeSet::new()
            )
            .is_empty(),
            "the current version stays"
        );
    }
}
