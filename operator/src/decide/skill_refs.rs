//! Which skills an Agent gets: its `skills` list resolved against the namespace's Skill
//! resources and the built-in skills.

use herd_crds::agent::ResolvedSkill;
use herd_crds::condition::is_condition_true;
use herd_crds::reason::condition_type;
use herd_crds::skill::Skill;
use kube::ResourceExt;

/// What the Agent controller needs to know of one Skill resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillView {
    /// The Skill's name.
    pub name: String,
    /// `spec.enabled`.
    pub enabled: bool,
    /// The digest of the current generation, when the Skill controller has made it `Ready`
    /// (or, for a disabled skill, accepted it).
    pub digest: Option<String>,
    /// Why it cannot be used, when not usable.
    pub problem: Option<String>,
}

impl SkillView {
    /// Reads a Skill's status: only a status written for the current generation counts.
    pub fn of(skill: &Skill) -> Self {
        let name = skill.name_any();
        let current = skill.status.as_ref().filter(|status| {
            status.observed_generation.is_some()
                && status.observed_generation == skill.metadata.generation
        });
        let (digest, problem) = match current {
            None => (None, Some("not processed yet".to_owned())),
            Some(status) if !is_condition_true(&status.conditions, condition_type::ACCEPTED) => {
                let message = herd_crds::condition::find_condition(
                    &status.conditions,
                    condition_type::ACCEPTED,
                )
                .map(|c| c.message.clone())
                .unwrap_or_default();
                (None, Some(format!("not accepted: {message}")))
            }
            Some(status)
                if skill.spec.enabled
                    && !is_condition_true(&status.conditions, condition_type::READY) =>
            {
                (None, Some("not ready yet".to_owned()))
            }
            Some(status) => (status.digest.clone(), None),
        };
        SkillView {
            name,
            enabled: skill.spec.enabled,
            digest,
            problem,
        }
    }

    fn usable(&self) -> Option<ResolvedSkill> {
        match (&self.digest, self.enabled, &self.problem) {
            (Some(digest), true, None) => Some(ResolvedSkill {
                name: self.name.clone(),
                digest: digest.clone(),
            }),
            _ => None,
        }
    }
}

/// The outcome of resolving an Agent's skills.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkillResolution {
    /// The skills the agent gets, sorted by name.
    pub resolved: Vec<ResolvedSkill>,
    /// Listed skills that exist nowhere.
    pub not_found: Vec<String>,
    /// Listed Skill resources that exist but cannot be used, with why.
    pub not_ready: Vec<(String, String)>,
    /// Listed skills left out because they are disabled.
    pub disabled: Vec<String>,
}

/// Resolves `listed` (the Agent's `skills`: `None` = every enabled skill, `[]` = none) against
/// the namespace's Skills (`custom`) and the built-in ones. A usable Skill resource replaces a
/// built-in skill of the same name, as in the runner.
pub fn resolve(
    listed: Option<&[String]>,
    custom: &[SkillView],
    builtin: &[ResolvedSkill],
) -> SkillResolution {
    let mut out = SkillResolution::default();
    match listed {
        None => {
            out.resolved = custom.iter().filter_map(SkillView::usable).collect();
            for skill in builtin {
                if !out.resolved.iter().any(|r| r.name == skill.name) {
                    out.resolved.push(skill.clone());
                }
            }
        }
        Some(names) => {
            for name in names {
                let resource = custom.iter().find(|s| &s.name == name);
                match resource {
                    Some(view) if !view.enabled => out.disabled.push(name.clone()),
                    Some(view) => match (view.usable(), &view.problem) {
                        (Some(resolved), _) => out.resolved.push(resolved),
                        (None, problem) => out.not_ready.push((
                            name.clone(),
                            problem.clone().unwrap_or_else(|| "not ready".to_owned()),
                        )),
                    },
                    None => match builtin.iter().find(|b| &b.name == name) {
                        Some(skill) => out.resolved.push(skill.clone()),
                        None => out.not_found.push(name.clone()),
                    },
                }
            }
        }
    }
    out.resolved.sort_by(|a, b| a.name.cmp(&b.name));
    out.resolved.dedup_by(|a, b| a.name == b.name);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str, enabled: bool, digest: Option<&str>, problem: Option<&str>) -> SkillView {
        SkillView {
            name: name.into(),
            enabled,
            digest: digest.map(Into::into),
            problem: problem.map(Into::into),
        }
    }

    fn resolved(name: &str, digest: &str) -> ResolvedSkill {
        ResolvedSkill {
            name: name.into(),
            digest: digest.into(),
        }
    }

    fn builtin() -> Vec<ResolvedSkill> {
        vec![resolved("deep-research", "b1"), resolved("web", "b2")]
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn absent_list_takes_every_usable_skill_and_custom_replaces_builtin() {
        let custom = [
            view("web", true, Some("c1"), None),
            view("broken", true, None, Some("not accepted: x")),
            view("off", false, Some("c3"), None),
            view("mine", true, Some("c4"), None),
        ];
        let out = resolve(None, &custom, &builtin());
        assert_eq!(
            out.resolved,
            vec![
                resolved("deep-research", "b1"),
                resolved("mine", "c4"),
                resolved("web", "c1")
            ]
        );
        assert!(out.not_found.is_empty() && out.not_ready.is_empty());
    }

    #[test]
    fn an_unusable_custom_skill_does_not_hide_the_builtin_when_unlisted() {
        let custom = [view("web", true, None, Some("not ready yet"))];
        let out = resolve(None, &custom, &builtin());
        assert!(out.resolved.contains(&resolved("web", "b2")));
    }

    #[test]
    fn empty_list_means_none() {
        let out = resolve(
            Some(&[]),
            &[view("mine", true, Some("c"), None)],
            &builtin(),
        );
        assert_eq!(out, SkillResolution::default());
    }

    #[test]
    fn listed_names_resolve_or_report() {
        let custom = [
            view("mine", true, Some("c1"), None),
            view("pending", true, None, Some("not processed yet")),
            view("off", false, Some("c3"), None),
        ];
        let list = names(&["web", "mine", "missing", "pending", "off"]);
        let out = resolve(Some(&list), &custom, &builtin());
        assert_eq!(
            out.resolved,
            vec![resolved("mine", "c1"), resolved("web", "b2")]
        );
        assert_eq!(out.not_found, names(&["missing"]));
        assert_eq!(
            out.not_ready,
            vec![("pending".to_owned(), "not processed yet".to_owned())]
        );
        assert_eq!(out.disabled, names(&["off"]));
    }

    fn skill(generation: i64, observed: Option<i64>, conditions: &[(&str, bool)]) -> Skill {
        use herd_crds::condition::{Condition, ConditionStatus};
        use herd_crds::skill::{SkillSpec, SkillStatus};
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH);
        let mut skill = Skill::new(
            "mine",
            SkillSpec {
                content: String::new(),
                files: Default::default(),
                enabled: true,
            },
        );
        skill.metadata.generation = Some(generation);
        skill.status = Some(SkillStatus {
            observed_generation: observed,
            conditions: conditions
                .iter()
                .map(|(t, ok)| {
                    let status = if *ok {
                        ConditionStatus::True
                    } else {
                        ConditionStatus::False
                    };
                    Condition::new(t, status, "R", "why", observed, now.clone())
                })
                .collect(),
            digest: Some("d".into()),
            description: None,
        });
        skill
    }

    #[test]
    fn view_reads_only_a_current_status() {
        let ready = [("Accepted", true), ("Ready", true)];
        assert_eq!(
            SkillView::of(&skill(2, Some(2), &ready)).digest.as_deref(),
            Some("d")
        );
        let stale = SkillView::of(&skill(3, Some(2), &ready));
        assert_eq!(stale.digest, None);
        assert_eq!(stale.problem.as_deref(), Some("not processed yet"));
        let rejected = SkillView::of(&skill(2, Some(2), &[("Accepted", false), ("Ready", false)]));
        assert_eq!(rejected.problem.as_deref(), Some("not accepted: why"));
        let unready = SkillView::of(&skill(2, Some(2), &[("Accepted", true), ("Ready", false)]));
        assert_eq!(unready.problem.as_deref(), Some("not ready yet"));
    }
}
