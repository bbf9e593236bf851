//! A Run's snapshot: what it was accepted with, fixed for every attempt. The Agent spec with
//! defaults applied and `soulFrom`/`model.scriptFrom` inlined (the agent container can read no
//! ConfigMap), the Run's settings resolved over the Agent's defaults, skill digests and images.
//! Never a Secret value: Secrets stay references, read by the kubelet into the `agent` env.

use std::collections::BTreeMap;
use std::time::Duration;

use herd_crds::agent::{AgentSpec, ModelSpec, ResolvedSkill};
use herd_crds::duration::parse_duration;
use herd_crds::run::RunSpec;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::{Deserialize, Serialize};

use super::run_status::snapshot_name;
use crate::decide::run_owned::{Cached, run_owned};

/// The key of the snapshot's JSON in its ConfigMap.
pub const SNAPSHOT_KEY: &str = "snapshot.json";

/// Everything a Run was accepted with.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The Agent's name.
    pub agent_name: String,
    /// The Agent's spec: defaults applied, the default model filled in, `soulFrom` inlined into
    /// `soul`, `model.scriptFrom` dropped (its text is in `script`).
    pub agent: AgentSpec,
    /// The text of `model.scriptFrom`, for the `scripted` provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// The Run's settings, resolved over the Agent's `runDefaults`.
    pub run: RunSettings,
    /// The skills mounted, with the digests of the versions accepted.
    pub skills: Vec<ResolvedSkill>,
    /// The `agent` container's image.
    pub runner_image: String,
    /// The `sandbox` container's image.
    pub sandbox_image: String,
    /// 0 for a top-level Run, the parent's depth + 1 for a child.
    pub depth: u32,
    /// For a child Run: its parent and the parent's cap on active children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation: Option<Delegation>,
}

/// How a parent delegated to a child Run, kept in the child's snapshot for admission.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Delegation {
    /// The parent Run's name.
    pub parent: String,
    /// The parent's `subagents.maxConcurrent`: how many of its children may be active at once.
    pub max_concurrent: u32,
    /// The workspace claim the child mounts instead of its own: its parent's, when that is
    /// `ReadWriteMany`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_claim: Option<String>,
}

/// A Run's effective settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunSettings {
    /// Plan mode.
    pub plan_mode: bool,
    /// Thinking.
    pub thinking: bool,
    /// The timeout, in seconds from `startTime`.
    pub timeout_seconds: u64,
    /// How long a question may wait, in seconds.
    pub input_timeout_seconds: u64,
    /// How long a question waits in the Pod before it suspends, in seconds; absent: never
    /// (`suspendAfter: 0`, and snapshots taken before suspension existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_after_seconds: Option<u64>,
    /// Most model calls.
    pub max_model_calls: u32,
    /// Most tokens, if capped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// New attempts allowed after infrastructure failures.
    pub retries: u32,
    /// Seconds after which the finished Run is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<u32>,
}

impl RunSettings {
    /// The timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds)
    }

    /// The input timeout.
    pub fn input_timeout(&self) -> Duration {
        Duration::from_secs(self.input_timeout_seconds)
    }
}

/// What the Run controller read for a snapshot, besides the Run and Agent specs.
#[derive(Clone, Debug)]
pub struct SnapshotSources<'a> {
    /// The Agent's name.
    pub agent_name: &'a str,
    /// The Agent's `status.resolvedSkills`.
    pub skills: &'a [ResolvedSkill],
    /// The text `soulFrom` points at, when it is set.
    pub soul: Option<String>,
    /// The text `model.scriptFrom` points at, when it is set.
    pub script: Option<String>,
    /// The operator's default model, when it has one.
    pub default_model: Option<&'a ModelSpec>,
    /// The `agent` container's image.
    pub runner_image: &'a str,
    /// The default `sandbox` image (an Agent's `sandbox.image` wins).
    pub sandbox_image: &'a str,
}

/// Why no snapshot can be taken; the Run fails `InvalidSpec` with this.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// `soulFrom` or `model.scriptFrom` is set but its text was not found.
    #[error("{0} is set but its ConfigMap key was not found")]
    MissingText(&'static str),
    /// Neither `model` nor the operator's default model.
    #[error("spec.model is absent and the operator has no default model")]
    NoModel,
    /// A duration that does not parse.
    #[error("{0}")]
    Duration(String),
}

/// The snapshot of a Run accepted now.
pub fn snapshot(
    run: &RunSpec,
    agent: &AgentSpec,
    sources: SnapshotSources<'_>,
) -> Result<Snapshot, SnapshotError> {
    let mut spec = agent.clone();
    if spec.soul_from.take().is_some() {
        spec.soul = Some(
            sources
                .soul
                .ok_or(SnapshotError::MissingText("spec.soulFrom"))?,
        );
    }
    let mut model = match spec.model.take() {
        Some(model) => model,
        None => sources
            .default_model
            .cloned()
            .ok_or(SnapshotError::NoModel)?,
    };
    let script = if model.script_from.take().is_some() {
        Some(
            sources
                .script
                .ok_or(SnapshotError::MissingText("spec.model.scriptFrom"))?,
        )
    } else {
        None
    };
    if let Some(over) = &run.model {
        if let Some(name) = &over.name {
            model.name.clone_from(name);
        }
        model.temperature = over.temperature.or(model.temperature);
        model.max_tokens = over.max_tokens.or(model.max_tokens);
    }
    spec.model = Some(model);
    let defaults = &agent.run_defaults;
    let seconds = |text: &str| {
        parse_duration(text)
            .map(|d| d.as_secs())
            .map_err(|e| SnapshotError::Duration(e.to_string()))
    };
    let settings = RunSettings {
        plan_mode: run.plan_mode.unwrap_or(defaults.plan_mode),
        thinking: run.thinking.unwrap_or(defaults.thinking),
        timeout_seconds: seconds(run.timeout.as_deref().unwrap_or(&defaults.timeout))?,
        input_timeout_seconds: seconds(
            run.input_timeout
                .as_deref()
                .unwrap_or(&defaults.input_timeout),
        )?,
        suspend_after_seconds: defaults
            .suspend_after()
            .map_err(|e| SnapshotError::Duration(e.to_string()))?
            .map(|wait| wait.as_secs().max(1)),
        max_model_calls: defaults.max_model_calls,
        token_budget: defaults.token_budget,
        retries: defaults.retries,
        ttl_seconds_after_finished: run
            .ttl_seconds_after_finished
            .or(defaults.ttl_seconds_after_finished),
    };
    let sandbox_image = spec
        .sandbox
        .image
        .clone()
        .unwrap_or_else(|| sources.sandbox_image.to_owned());
    Ok(Snapshot {
        agent_name: sources.agent_name.to_owned(),
        agent: spec,
        script,
        run: settings,
        skills: sources.skills.to_vec(),
        runner_image: sources.runner_image.to_owned(),
        sandbox_image,
        depth: 0,
        delegation: None,
    })
}

/// The immutable ConfigMap `<run>-snapshot`, owned by the Run.
pub fn snapshot_config_map(
    run: &str,
    namespace: &str,
    owner: OwnerReference,
    snapshot: &Snapshot,
) -> Result<ConfigMap, serde_json::Error> {
    Ok(ConfigMap {
        metadata: run_owned(snapshot_name(run), run, namespace, owner, Cached::Yes),
        data: Some(BTreeMap::from([(
            SNAPSHOT_KEY.to_owned(),
            serde_json::to_string(snapshot)?,
        )])),
        immutable: Some(true),
        ..ConfigMap::default()
    })
}

/// Reads a snapshot back from its ConfigMap.
pub fn read_snapshot(config_map: &ConfigMap) -> Option<Snapshot> {
    let text = config_map.data.as_ref()?.get(SNAPSHOT_KEY)?;
    serde_json::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels;
    use herd_crds::agent::Provider;
    use serde_json::json;

    fn agent(value: serde_json::Value) -> AgentSpec {
        serde_json::from_value(value).unwrap()
    }

    fn run(value: serde_json::Value) -> RunSpec {
        let mut base = json!({"agentRef": {"name": "a"}, "task": "t"});
        if let (Some(b), Some(extra)) = (base.as_object_mut(), value.as_object()) {
            b.extend(extra.clone());
        }
        serde_json::from_value(base).unwrap()
    }

    fn default_model() -> ModelSpec {
        serde_json::from_value(json!({
            "provider": "openai", "name": "qwen", "baseUrl": "http://llm:8080/v1",
            "apiKeySecretRef": {"name": "llm-key", "key": "api-key"}
        }))
        .unwrap()
    }

    fn sources(config: Option<&ModelSpec>) -> SnapshotSources<'_> {
        SnapshotSources {
            agent_name: "a",
            skills: &[],
            soul: None,
            script: None,
            default_model: config,
            runner_image: "runner:1",
            sandbox_image: "sandbox:1",
        }
    }

    #[test]
    fn defaults_and_the_default_model_are_applied() {
        let config = default_model();
        let s = snapshot(&run(json!({})), &agent(json!({})), sources(Some(&config))).unwrap();
        let model = s.agent.model.clone().unwrap();
        assert_eq!(model.name, "qwen");
        assert_eq!(model.provider, Provider::Openai);
        assert_eq!(
            model.api_key_secret_ref,
            Some(herd_crds::refs::SecretKeyRef {
                name: "llm-key".into(),
                key: "api-key".into()
            }),
            "a reference, never a value"
        );
        assert_eq!(s.run.timeout(), Duration::from_secs(1800));
        assert_eq!(s.run.input_timeout(), Duration::from_secs(86_400));
        assert_eq!(s.run.max_model_calls, 50);
        assert!(s.run.thinking);
        assert_eq!(s.run.retries, 0);
        assert_eq!(s.runner_image, "runner:1");
        assert_eq!(s.sandbox_image, "sandbox:1");
        assert_eq!(s.depth, 0);
        assert_eq!(
            snapshot(&run(json!({})), &agent(json!({})), sources(None)),
            Err(SnapshotError::NoModel)
        );
    }

    #[test]
    fn the_run_overrides_the_agents_defaults() {
        let config = default_model();
        let a = agent(json!({
            "model": {"provider": "openai", "name": "m", "temperature": 0.5, "maxTokens": 100},
            "runDefaults": {"timeout": "1h", "retries": 2, "ttlSecondsAfterFinished": 60,
                            "planMode": true},
            "sandbox": {"image": "custom:2"}
        }));
        let r = run(
            json!({"model": {"name": "big", "maxTokens": 9}, "timeout": "90s",
                           "inputTimeout": "2h", "thinking": false,
                           "ttlSecondsAfterFinished": 5}),
        );
        let s = snapshot(&r, &a, sources(Some(&config))).unwrap();
        let model = s.agent.model.clone().unwrap();
        assert_eq!(
            (model.name.as_str(), model.temperature, model.max_tokens),
            ("big", Some(0.5), Some(9))
        );
        assert_eq!(s.run.timeout_seconds, 90);
        assert_eq!(s.run.input_timeout_seconds, 7200);
        assert!(!s.run.thinking);
        assert!(s.run.plan_mode);
        assert_eq!(s.run.retries, 2);
        assert_eq!(s.run.ttl_seconds_after_finished, Some(5));
        assert_eq!(s.sandbox_image, "custom:2");
    }

    #[test]
    fn soul_from_and_script_from_are_inlined() {
        let config = default_model();
        let a = agent(json!({
            "soulFrom": {"configMapKeyRef": {"name": "souls", "key": "SOUL.md"}},
            "model": {"provider": "scripted", "name": "s",
                      "scriptFrom": {"configMapKeyRef": {"name": "scripts", "key": "s.yaml"}}}
        }));
        let mut found = sources(Some(&config));
        found.soul = Some("be brief".into());
        found.script = Some("rules: []".into());
        let s = snapshot(&run(json!({})), &a, found).unwrap();
        assert_eq!(s.agent.soul.as_deref(), Some("be brief"));
        assert_eq!(s.agent.soul_from, None);
        assert_eq!(s.script.as_deref(), Some("rules: []"));
        assert_eq!(s.agent.model.unwrap().script_from, None);
        assert_eq!(
            snapshot(&run(json!({})), &a, sources(Some(&config))),
            Err(SnapshotError::MissingText("spec.soulFrom"))
        );
    }

    #[test]
    fn the_config_map_is_immutable_owned_and_reads_back() {
        let config = default_model();
        let mut found = sources(Some(&config));
        let skills = [ResolvedSkill {
            name: "web".into(),
            digest: "abcdef0123".into(),
        }];
        found.skills = &skills;
        let s = snapshot(&run(json!({})), &agent(json!({})), found).unwrap();
        let owner = OwnerReference {
            api_version: "herd.dev/v1alpha1".into(),
            kind: "Run".into(),
            name: "r".into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let cm = snapshot_config_map("r", "ns", owner.clone(), &s).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("r-snapshot"));
        assert_eq!(cm.immutable, Some(true));
        assert_eq!(cm.metadata.owner_references, Some(vec![owner]));
        let labels = cm.metadata.labels.clone().unwrap();
        assert_eq!(labels[labels::MANAGED_BY], labels::MANAGER);
        assert_eq!(labels[labels::RUN], "r");
        assert_eq!(read_snapshot(&cm), Some(s.clone()));
        assert_eq!(read_snapshot(&s_less(&cm)), None);
        assert_eq!(s.skills, skills);
    }

    fn s_less(cm: &ConfigMap) -> ConfigMap {
        ConfigMap {
            data: None,
            ..cm.clone()
        }
    }
}
