//! What a Skill is (valid or not, which version) and the status that says so.

use std::collections::BTreeMap;

use herd_crds::condition::{Condition, ConditionStatus};
use herd_crds::reason::{condition_type, skill as reason};
use herd_crds::skill::{SkillSpec, SkillStatus};
use herd_crds::skill_md::parse_skill_md;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::{merge, stalled};
use super::skill_version::{self, RenderError};

/// A valid Skill version, ready to be rendered.
#[derive(Clone, Debug, PartialEq)]
pub struct SkillVersion {
    /// SHA-256 of content and files (hex).
    pub digest: String,
    /// The frontmatter's description.
    pub description: String,
    /// The ConfigMap data (`SKILL.md` and encoded file keys).
    pub data: BTreeMap<String, String>,
}

/// Why a Skill was not accepted: an `Accepted=False` reason and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// One of the skill reasons in `herd_crds::reason::skill`.
    pub reason: &'static str,
    /// What to fix.
    pub message: String,
}

/// Checks a Skill as DeerFlow does (frontmatter rules, name equal to `metadata.name`) and that
/// it fits one ConfigMap.
pub fn evaluate(name: &str, spec: &SkillSpec) -> Result<SkillVersion, Rejection> {
    let parsed = parse_skill_md(&spec.content).map_err(|e| Rejection {
        reason: reason::INVALID_FRONTMATTER,
        message: format!("SKILL.md: {e}"),
    })?;
    if parsed.name != name {
        return Err(Rejection {
            reason: reason::NAME_MISMATCH,
            message: format!(
                "the frontmatter name `{}` differs from metadata.name `{name}`",
                parsed.name
            ),
        });
    }
    let data = skill_version::config_map_data(spec).map_err(|e| Rejection {
        reason: match e {
            RenderError::TooLarge(_) | RenderError::PathTooLong(_) => reason::TOO_LARGE,
            RenderError::InvalidPath(_) | RenderError::ReservedPath => reason::INVALID_FILES,
        },
        message: e.to_string(),
    })?;
    Ok(SkillVersion {
        digest: skill_version::digest(&spec.content, &spec.files),
        description: parsed.description,
        data,
    })
}

/// What became of the version's ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendered {
    /// It exists and belongs to this Skill.
    Ready,
    /// An object of that name belongs to someone else (usually a deleted Skill's leftover,
    /// waiting for garbage collection).
    Conflict(String),
}

/// The Skill's whole status after a reconcile.
pub fn next_status(
    previous: &SkillStatus,
    generation: Option<i64>,
    enabled: bool,
    outcome: &Result<(SkillVersion, Rendered), Rejection>,
    now: &Time,
) -> SkillStatus {
    let condition = |type_: &str, status, reason: &str, message: &str| {
        Condition::new(type_, status, reason, message, generation, now.clone())
    };
    let mut desired = Vec::with_capacity(3);
    let (digest, description) = match outcome {
        Err(rejection) => {
            desired.push(condition(
                condition_type::ACCEPTED,
                ConditionStatus::False,
                rejection.reason,
                &rejection.message,
            ));
            desired.push(condition(
                condition_type::READY,
                ConditionStatus::False,
                reason::NOT_READY,
                &format!("not accepted: {}", rejection.message),
            ));
            desired.push(stalled(
                rejection.reason,
                &rejection.message,
                generation,
                now,
            ));
            (None, None)
        }
        Ok((version, rendered)) => {
            desired.push(condition(
                condition_type::ACCEPTED,
                ConditionStatus::True,
                reason::ACCEPTED,
                "",
            ));
            let short = version.digest.get(..8).unwrap_or(&version.digest);
            desired.push(match (rendered, enabled) {
                (Rendered::Conflict(message), _) => condition(
                    condition_type::READY,
                    ConditionStatus::False,
                    reason::CONFIG_MAP_CONFLICT,
                    message,
                ),
                (Rendered::Ready, false) => condition(
                    condition_type::READY,
                    ConditionStatus::False,
                    reason::DISABLED,
                    "spec.enabled is false: no agent gets this skill",
                ),
                (Rendered::Ready, true) => condition(
                    condition_type::READY,
                    ConditionStatus::True,
                    reason::READY,
                    &format!("version {short} rendered"),
                ),
            });
            (
                Some(version.digest.clone()),
                Some(version.description.clone()),
            )
        }
    };
    SkillStatus {
        observed_generation: generation,
        conditions: merge(&previous.conditions, desired),
        digest,
        description,
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::condition::find_condition;

    use super::*;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn spec(content: &str) -> SkillSpec {
        SkillSpec {
            content: content.to_owned(),
            files: BTreeMap::new(),
            enabled: true,
        }
    }

    const GOOD: &str = "---\nname: web\ndescription: Search the web.\n---\nBody\n";

    #[test]
    fn a_valid_skill_is_a_version() {
        let version = evaluate("web", &spec(GOOD)).unwrap();
        assert_eq!(version.description, "Search the web.");
        assert_eq!(
            version.digest,
            skill_version::digest(GOOD, &BTreeMap::new())
        );
        assert_eq!(version.data["SKILL.md"], GOOD);
    }

    #[test]
    fn rejections_name_their_reason() {
        let cases = [
            ("web", "no frontmatter", reason::INVALID_FRONTMATTER),
            ("web", "---\nname: web\n---\n", reason::INVALID_FRONTMATTER),
            ("other", GOOD, reason::NAME_MISMATCH),
        ];
        for (name, content, expected) in cases {
            let rejection = evaluate(name, &spec(content)).unwrap_err();
            assert_eq!(rejection.reason, expected, "{content}");
            assert!(!rejection.message.is_empty());
        }
        let mut big = spec(GOOD);
        big.files.insert(
            "big.txt".into(),
            "x".repeat(skill_version::MAX_CONFIG_MAP_BYTES),
        );
        assert_eq!(evaluate("web", &big).unwrap_err().reason, reason::TOO_LARGE);
        let mut escaping = spec(GOOD);
        escaping.files.insert("../x".into(), String::new());
        assert_eq!(
            evaluate("web", &escaping).unwrap_err().reason,
            reason::INVALID_FILES
        );
        let mismatch = evaluate("other", &spec(GOOD)).unwrap_err();
        assert!(mismatch.message.contains("`web`") && mismatch.message.contains("`other`"));
    }

    fn status_of(
        outcome: &Result<(SkillVersion, Rendered), Rejection>,
        enabled: bool,
    ) -> SkillStatus {
        next_status(&SkillStatus::default(), Some(3), enabled, outcome, &at(10))
    }

    fn condition<'a>(status: &'a SkillStatus, type_: &str) -> Option<&'a Condition> {
        find_condition(&status.conditions, type_)
    }

    #[test]
    fn ready_when_accepted_rendered_and_enabled() {
        let version = evaluate("web", &spec(GOOD)).unwrap();
        let status = status_of(&Ok((version.clone(), Rendered::Ready)), true);
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.digest.as_deref(), Some(version.digest.as_str()));
        assert_eq!(status.description.as_deref(), Some("Search the web."));
        let ready = condition(&status, condition_type::READY).unwrap();
        assert_eq!(ready.status, ConditionStatus::True);
        assert!(
            ready.message.contains(&version.digest[..8]),
            "{}",
            ready.message
        );
        assert!(condition(&status, condition_type::STALLED).is_none());
        assert!(condition(&status, condition_type::RECONCILING).is_none());
        assert_eq!(
            condition(&status, condition_type::ACCEPTED).unwrap().status,
            ConditionStatus::True
        );
    }

    #[test]
    fn disabled_and_conflicting_are_not_ready_but_not_stalled() {
        let version = evaluate("web", &spec(GOOD)).unwrap();
        let disabled = status_of(&Ok((version.clone(), Rendered::Ready)), false);
        let ready = condition(&disabled, condition_type::READY).unwrap();
        assert_eq!(
            (ready.status, ready.reason.as_str()),
            (ConditionStatus::False, reason::DISABLED)
        );
        assert!(condition(&disabled, condition_type::STALLED).is_none());

        let conflict = status_of(&Ok((version, Rendered::Conflict("taken".into()))), true);
        let ready = condition(&conflict, condition_type::READY).unwrap();
        assert_eq!(ready.reason, reason::CONFIG_MAP_CONFLICT);
        assert_eq!(ready.message, "taken");
    }

    #[test]
    fn rejected_is_stalled_without_a_digest() {
        let rejection = evaluate("other", &spec(GOOD)).unwrap_err();
        let status = status_of(&Err(rejection.clone()), true);
        assert_eq!(status.digest, None);
        assert_eq!(status.description, None);
        let accepted = condition(&status, condition_type::ACCEPTED).unwrap();
        assert_eq!(accepted.reason, reason::NAME_MISMATCH);
        let stalled = condition(&status, condition_type::STALLED).unwrap();
        assert_eq!(
            (stalled.status, stalled.reason.as_str()),
            (ConditionStatus::True, reason::NAME_MISMATCH)
        );
        assert_eq!(
            condition(&status, condition_type::READY).unwrap().status,
            ConditionStatus::False
        );
    }

    #[test]
    fn an_unchanged_outcome_is_an_unchanged_status() {
        let version = evaluate("web", &spec(GOOD)).unwrap();
        let outcome = Ok((version, Rendered::Ready));
        let first = next_status(&SkillStatus::default(), Some(1), true, &outcome, &at(10));
        let second = next_status(&first, Some(1), true, &outcome, &at(99));
        assert_eq!(first, second, "a later reconcile must not cause a write");
    }
}
