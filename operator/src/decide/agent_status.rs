//! An Agent's status from what its controller found: spec validity, skills, Secrets and
//! ConfigMaps.

use herd_crds::agent::AgentStatus;
use std::time::Duration;

use herd_crds::condition::{Condition, ConditionStatus, find_condition};
use herd_crds::reason::{agent as reason, condition_type};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::{merge, stalled};
use super::skill_refs::SkillResolution;

/// What a referenced Secret looks like, from its metadata only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretState {
    /// It exists with `herd.dev/model-credentials: "true"`.
    Allowed,
    /// It exists without that label.
    NotAllowed,
    /// It does not exist.
    NotFound,
}

/// What a referenced ConfigMap key looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigMapState {
    /// The ConfigMap has the key.
    Found,
    /// The ConfigMap exists without the key.
    KeyMissing,
    /// The ConfigMap does not exist.
    NotFound,
}

/// One referenced Secret and what was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretFinding {
    /// Where the reference is, e.g. `spec.model.apiKeySecretRef`.
    pub field: String,
    /// The Secret's name.
    pub name: String,
    /// What was found.
    pub state: SecretState,
}

/// One referenced ConfigMap key and what was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigMapFinding {
    /// Where the reference is, e.g. `spec.soulFrom`.
    pub field: String,
    /// The ConfigMap's name.
    pub name: String,
    /// The key.
    pub key: String,
    /// What was found.
    pub state: ConfigMapState,
}

/// Everything the Agent controller found, for [`next_status`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentFindings {
    /// Why the spec is invalid, if it is.
    pub spec_error: Option<String>,
    /// The skills.
    pub skills: SkillResolution,
    /// Every referenced Secret.
    pub secrets: Vec<SecretFinding>,
    /// Every referenced ConfigMap key.
    pub config_maps: Vec<ConfigMapFinding>,
}

/// A `ResolvedRefs=False`: the reason of the first problem (skills, then Secrets, then
/// ConfigMaps) and every problem in the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefProblem {
    /// The reason constant.
    pub reason: &'static str,
    /// All problems, `; `-separated.
    pub message: String,
}

impl AgentFindings {
    /// The references' problems, or `None` when every reference resolves.
    pub fn ref_problem(&self) -> Option<RefProblem> {
        let mut problems: Vec<(&'static str, String)> = Vec::new();
        for name in &self.skills.not_found {
            problems.push((reason::SKILL_NOT_FOUND, format!("skill {name} not found")));
        }
        for (name, why) in &self.skills.not_ready {
            problems.push((reason::SKILL_NOT_READY, format!("skill {name} is {why}")));
        }
        for secret in &self.secrets {
            match secret.state {
                SecretState::Allowed => {}
                SecretState::NotFound => problems.push((
                    reason::SECRET_NOT_FOUND,
                    format!("{}: Secret {} not found", secret.field, secret.name),
                )),
                SecretState::NotAllowed => problems.push((
                    reason::SECRET_NOT_ALLOWED,
                    format!(
                        "{}: Secret {} lacks the label herd.dev/model-credentials: \"true\"",
                        secret.field, secret.name
                    ),
                )),
            }
        }
        for cm in &self.config_maps {
            let problem = match cm.state {
                ConfigMapState::Found => continue,
                ConfigMapState::NotFound => {
                    format!("{}: ConfigMap {} not found", cm.field, cm.name)
                }
                ConfigMapState::KeyMissing => {
                    format!("{}: ConfigMap {} has no key {}", cm.field, cm.name, cm.key)
                }
            };
            problems.push((reason::CONFIG_MAP_NOT_FOUND, problem));
        }
        let (first, _) = problems.first()?;
        Some(RefProblem {
            reason: first,
            message: problems
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        })
    }
}

/// The Agent's whole status after a reconcile.
pub fn next_status(
    previous: &AgentStatus,
    generation: Option<i64>,
    findings: &AgentFindings,
    now: &Time,
) -> AgentStatus {
    let condition = |type_: &str, status, reason: &str, message: &str| {
        Condition::new(type_, status, reason, message, generation, now.clone())
    };
    let accepted = match &findings.spec_error {
        None => condition(
            condition_type::ACCEPTED,
            ConditionStatus::True,
            reason::ACCEPTED,
            "",
        ),
        Some(error) => condition(
            condition_type::ACCEPTED,
            ConditionStatus::False,
            reason::INVALID_SPEC,
            error,
        ),
    };
    let problem = findings.ref_problem();
    let resolved_refs = match &problem {
        None => {
            let note = findings
                .skills
                .disabled
                .iter()
                .map(|name| format!("skill {name} is disabled and left out"))
                .collect::<Vec<_>>()
                .join("; ");
            condition(
                condition_type::RESOLVED_REFS,
                ConditionStatus::True,
                reason::RESOLVED_REFS,
                &note,
            )
        }
        Some(problem) => condition(
            condition_type::RESOLVED_REFS,
            ConditionStatus::False,
            problem.reason,
            &problem.message,
        ),
    };
    let failing = [&accepted, &resolved_refs]
        .into_iter()
        .find(|c| c.status != ConditionStatus::True)
        .cloned();
    let mut desired = vec![accepted, resolved_refs];
    match failing {
        None => desired.push(condition(
            condition_type::READY,
            ConditionStatus::True,
            reason::READY,
            "",
        )),
        Some(failing) => {
            desired.push(condition(
                condition_type::READY,
                ConditionStatus::False,
                reason::NOT_READY,
                &format!("{}: {}", failing.type_, failing.message),
            ));
            desired.push(stalled(&failing.reason, &failing.message, generation, now));
        }
    }
    AgentStatus {
        observed_generation: generation,
        conditions: merge(&previous.conditions, desired),
        resolved_skills: findings.skills.resolved.clone(),
    }
}

/// How soon the controller looks again at an Agent with unresolved references.
///
/// ConfigMaps and unlabelled Secrets are not watched, so a missing one is polled: soon after the
/// problem appears (the common case is one `kubectl apply` creating the Agent a moment before its
/// ConfigMap), then twice as long each time, up to once a minute. The wait is the time the
/// references have been unresolved (from `ResolvedRefs`' transition), so it needs no state of its
/// own and survives restarts. `None` when the references are resolved: nothing to poll.
pub fn unresolved_requeue(status: &AgentStatus, now: &Time) -> Option<Duration> {
    let resolved_refs = find_condition(&status.conditions, condition_type::RESOLVED_REFS)?;
    if resolved_refs.status == ConditionStatus::True {
        return None;
    }
    let since = now.0.duration_since(resolved_refs.last_transition_time.0);
    let unresolved_for = Duration::try_from(since).unwrap_or(Duration::ZERO);
    Some(unresolved_for.clamp(UNRESOLVED_REQUEUE_FIRST, UNRESOLVED_REQUEUE_MAX))
}

/// The first look again after references became unresolved.
pub const UNRESOLVED_REQUEUE_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between looks at an Agent with unresolved references.
pub const UNRESOLVED_REQUEUE_MAX: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use herd_crds::agent::ResolvedSkill;

    use super::*;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn secret(name: &str, state: SecretState) -> SecretFinding {
        SecretFinding {
            field: "spec.model.apiKeySecretRef".into(),
            name: name.into(),
            state,
        }
    }

    fn cm(state: ConfigMapState) -> ConfigMapFinding {
        ConfigMapFinding {
            field: "spec.soulFrom".into(),
            name: "soul".into(),
            key: "SOUL.md".into(),
            state,
        }
    }

    fn get<'a>(status: &'a AgentStatus, type_: &str) -> Option<&'a Condition> {
        find_condition(&status.conditions, type_)
    }

    fn summary(status: &AgentStatus) -> Vec<(String, ConditionStatus, String)> {
        status
            .conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status, c.reason.clone()))
            .collect()
    }

    fn row(t: &str, s: ConditionStatus, r: &str) -> (String, ConditionStatus, String) {
        (t.into(), s, r.into())
    }

    #[test]
    fn all_resolved_is_ready() {
        let findings = AgentFindings {
            skills: SkillResolution {
                resolved: vec![ResolvedSkill {
                    name: "web".into(),
                    digest: "d".into(),
                }],
                ..Default::default()
            },
            secrets: vec![secret("key", SecretState::Allowed)],
            config_maps: vec![cm(ConfigMapState::Found)],
            ..Default::default()
        };
        let status = next_status(&AgentStatus::default(), Some(4), &findings, &at(1));
        use ConditionStatus::True;
        assert_eq!(
            summary(&status),
            vec![
                row("Accepted", True, "Accepted"),
                row("ResolvedRefs", True, "ResolvedRefs"),
                row("Ready", True, "Ready"),
            ]
        );
        assert_eq!(status.observed_generation, Some(4));
        assert_eq!(status.resolved_skills, findings.skills.resolved);
    }

    #[test]
    fn each_reference_problem_has_its_reason() {
        let cases: Vec<(AgentFindings, &str)> = vec![
            (
                AgentFindings {
                    skills: SkillResolution {
                        not_found: vec!["x".into()],
                        ..Default::default()
                    },
                    ..Default::default()
                },
                reason::SKILL_NOT_FOUND,
            ),
            (
                AgentFindings {
                    skills: SkillResolution {
                        not_ready: vec![("x".into(), "not ready yet".into())],
                        ..Default::default()
                    },
                    ..Default::default()
                },
                reason::SKILL_NOT_READY,
            ),
            (
                AgentFindings {
                    secrets: vec![secret("k", SecretState::NotFound)],
                    ..Default::default()
                },
                reason::SECRET_NOT_FOUND,
            ),
            (
                AgentFindings {
                    secrets: vec![secret("k", SecretState::NotAllowed)],
                    ..Default::default()
                },
                reason::SECRET_NOT_ALLOWED,
            ),
            (
                AgentFindings {
                    config_maps: vec![cm(ConfigMapState::NotFound)],
                    ..Default::default()
                },
                reason::CONFIG_MAP_NOT_FOUND,
            ),
            (
                AgentFindings {
                    config_maps: vec![cm(ConfigMapState::KeyMissing)],
                    ..Default::default()
                },
                reason::CONFIG_MAP_NOT_FOUND,
            ),
        ];
        use ConditionStatus::{False, True};
        for (findings, expected) in cases {
            let status = next_status(&AgentStatus::default(), Some(1), &findings, &at(1));
            assert_eq!(
                summary(&status),
                vec![
                    row("Accepted", True, "Accepted"),
                    row("ResolvedRefs", False, expected),
                    row("Ready", False, "NotReady"),
                    row("Stalled", True, expected),
                ],
                "{findings:?}"
            );
            let message = &get(&status, "ResolvedRefs").unwrap().message;
            assert!(!message.is_empty());
            assert!(
                get(&status, "Ready")
                    .unwrap()
                    .message
                    .starts_with("ResolvedRefs: ")
            );
        }
    }

    #[test]
    fn the_first_problem_names_the_reason_and_all_are_listed() {
        let findings = AgentFindings {
            skills: SkillResolution {
                not_found: vec!["gone".into()],
                ..Default::default()
            },
            secrets: vec![secret("unlabelled", SecretState::NotAllowed)],
            ..Default::default()
        };
        let problem = findings.ref_problem().unwrap();
        assert_eq!(problem.reason, reason::SKILL_NOT_FOUND);
        assert_eq!(
            problem.message,
            "skill gone not found; spec.model.apiKeySecretRef: Secret unlabelled lacks the label herd.dev/model-credentials: \"true\""
        );
    }

    #[test]
    fn an_invalid_spec_stalls_with_invalid_spec() {
        let findings = AgentFindings {
            spec_error: Some("no model".into()),
            secrets: vec![secret("k", SecretState::NotFound)],
            ..Default::default()
        };
        let status = next_status(&AgentStatus::default(), Some(1), &findings, &at(1));
        use ConditionStatus::{False, True};
        assert_eq!(
            summary(&status),
            vec![
                row("Accepted", False, "InvalidSpec"),
                row("ResolvedRefs", False, "SecretNotFound"),
                row("Ready", False, "NotReady"),
                row("Stalled", True, "InvalidSpec"),
            ]
        );
        assert_eq!(get(&status, "Ready").unwrap().message, "Accepted: no model");
    }

    #[test]
    fn fixing_the_problem_drops_stalled_and_moves_ready() {
        let broken = AgentFindings {
            secrets: vec![secret("k", SecretState::NotAllowed)],
            ..Default::default()
        };
        let first = next_status(&AgentStatus::default(), Some(1), &broken, &at(1));
        let again = next_status(&first, Some(1), &broken, &at(5));
        assert_eq!(first, again, "unchanged findings, unchanged status");
        let fixed = AgentFindings {
            secrets: vec![secret("k", SecretState::Allowed)],
            ..Default::default()
        };
        let after = next_status(&first, Some(1), &fixed, &at(9));
        assert!(get(&after, "Stalled").is_none());
        let ready = get(&after, "Ready").unwrap();
        assert_eq!(
            (ready.status, &ready.last_transition_time),
            (ConditionStatus::True, &at(9))
        );
        assert_eq!(
            get(&after, "Accepted").unwrap().last_transition_time,
            at(1),
            "Accepted did not change"
        );
    }

    #[test]
    fn an_mcp_header_secret_is_reported_as_the_models_is() {
        let header = |state| SecretFinding {
            field: "spec.mcp.servers[0].headers[0].secretKeyRef".into(),
            name: "docs-token".into(),
            state,
        };
        for (state, reason) in [
            (SecretState::NotFound, "SecretNotFound"),
            (SecretState::NotAllowed, "SecretNotAllowed"),
        ] {
            let findings = AgentFindings {
                secrets: vec![secret("k", SecretState::Allowed), header(state)],
                ..Default::default()
            };
            let status = next_status(&AgentStatus::default(), Some(1), &findings, &at(1));
            let refs = get(&status, "ResolvedRefs").unwrap();
            assert_eq!(
                (refs.status, refs.reason.as_str()),
                (ConditionStatus::False, reason)
            );
            assert!(
                refs.message
                    .starts_with("spec.mcp.servers[0].headers[0].secretKeyRef: Secret docs-token"),
                "{}",
                refs.message
            );
        }
    }

    #[test]
    fn disabled_skills_are_noted_not_failed() {
        let findings = AgentFindings {
            skills: SkillResolution {
                disabled: vec!["off".into()],
                ..Default::default()
            },
            ..Default::default()
        };
        let status = next_status(&AgentStatus::default(), Some(1), &findings, &at(1));
        let refs = get(&status, "ResolvedRefs").unwrap();
        assert_eq!(refs.status, ConditionStatus::True);
        assert_eq!(refs.message, "skill off is disabled and left out");
    }

    #[test]
    fn unresolved_references_are_polled_soon_then_less_often() {
        let missing = AgentFindings {
            config_maps: vec![cm(ConfigMapState::NotFound)],
            ..Default::default()
        };
        let status = next_status(&AgentStatus::default(), Some(1), &missing, &at(100));
        let after = |seconds: i64| unresolved_requeue(&status, &at(100 + seconds));
        assert_eq!(after(0), Some(UNRESOLVED_REQUEUE_FIRST));
        assert_eq!(after(1), Some(Duration::from_secs(1)));
        assert_eq!(after(2), Some(Duration::from_secs(2)));
        assert_eq!(after(4), Some(Duration::from_secs(4)));
        assert_eq!(after(45), Some(Duration::from_secs(45)));
        assert_eq!(after(3600), Some(UNRESOLVED_REQUEUE_MAX));
        // A clock behind the transition (another replica's) polls soon rather than never.
        assert_eq!(after(-30), Some(UNRESOLVED_REQUEUE_FIRST));
        // The wait counts from the transition, not from the last write: a later reconcile that
        // finds the same problem keeps the transition time.
        let again = next_status(&status, Some(1), &missing, &at(130));
        assert_eq!(
            unresolved_requeue(&again, &at(130)),
            Some(Duration::from_secs(30))
        );
    }

    #[test]
    fn resolved_references_are_not_polled() {
        let findings = AgentFindings {
            config_maps: vec![cm(ConfigMapState::Found)],
            ..Default::default()
        };
        let status = next_status(&AgentStatus::default(), Some(1), &findings, &at(1));
        assert_eq!(unresolved_requeue(&status, &at(500)), None);
        assert_eq!(unresolved_requeue(&AgentStatus::default(), &at(500)), None);
    }
}
