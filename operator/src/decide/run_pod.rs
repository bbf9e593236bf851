//! The Pod of one attempt of a Run (docs/operator.md, step 3): `agent` the only regular container
//! (model client, holds the key and the run-API token, runs no tool), `sandbox` a native
//! sidecar running the tools with neither; both restricted, UID 65532, read-only roots.

use std::collections::BTreeMap;
use std::time::Duration;

use herd_crds::agent::{ResolvedSkill, header_env_var};
use herd_crds::run::{MAX_RESPONSES, RunInput};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapProjection, ConfigMapVolumeSource, Container, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, ExecAction, KeyToPath, PersistentVolumeClaimVolumeSource, Pod,
    PodSecurityContext, PodSpec, Probe, ProjectedVolumeSource, ResourceRequirements,
    SeccompProfile, SecretKeySelector, SecurityContext, ServiceAccountTokenProjection, Volume,
    VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::file_keys;
use super::pod_outcome::AGENT_CONTAINER;
use super::run_snapshot::Snapshot;
use super::run_workspace::workspace_claim;
use super::skill_version::config_map_name;
use crate::labels;

/// The sandbox container's name.
pub const SANDBOX_CONTAINER: &str = "sandbox";
/// The ServiceAccount Run pods use (no bindings).
pub const RUNNER_SERVICE_ACCOUNT: &str = "herd-runner";
/// The ConfigMap holding the run API's CA bundle, in every namespace with Run pods.
pub const RUN_API_CA: &str = "herd-run-api-ca";
/// The key of the CA bundle in [`RUN_API_CA`].
pub const CA_KEY: &str = "ca.crt";
/// The audience of the projected token the run API checks.
pub const TOKEN_AUDIENCE: &str = "herd.dev";
/// The UID and GID both containers run as.
pub const RUNNER_UID: i64 = 65532;
/// Keeps the cluster autoscaler from evicting a running agent.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";

const ROOT: &str = "/mnt";
const SOCKET_DIR: &str = "/run/herd";
const SOCKET: &str = "/run/herd/sandbox.sock";
const API_DIR: &str = "/var/run/secrets/herd.dev";
const TERMINATION_LOG: &str = "/dev/termination-log";
const TOKEN_SECONDS: i64 = 600;
const DEADLINE_MARGIN: Duration = Duration::from_secs(300);
const DEFAULT_WORKSPACE: &str = "10Gi";
const TMP_SIZE: &str = "1Gi";

/// The operator's settings for Run pods.
#[derive(Clone, Debug, PartialEq)]
pub struct PodConfig {
    /// `HERD_API_URL`: the run API as pods reach it (`--run-api-url`).
    pub run_api_url: String,
    /// The `agent` container's resources (`--runner-resources`).
    pub runner_resources: ResourceRequirements,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` of the `agent` container (`--runner-otlp-endpoint`).
    pub otlp_endpoint: Option<String>,
}

/// One skill version to mount, with the keys of its ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillMount {
    /// The skill's name (its folder under `/mnt/skills/custom`).
    pub name: String,
    /// The version's digest (names the ConfigMap `<skill>-<digest8>`).
    pub digest: String,
    /// The ConfigMap's keys (encoded file paths).
    pub keys: Vec<String>,
}

/// The skill versions of a snapshot that need a ConfigMap: every one but the built-in skills the
/// sandbox image carries (by name and digest: a Skill resource replacing a built-in has its own).
pub fn custom_versions<'a>(
    skills: &'a [ResolvedSkill],
    builtin: &'a [ResolvedSkill],
) -> impl Iterator<Item = &'a ResolvedSkill> + 'a {
    skills.iter().filter(move |skill| !builtin.contains(skill))
}

/// The mounts of `versions`, given the keys of each version ConfigMap found (by name); the
/// first missing one is why the Pod must wait (a kubelet would leave it `ContainerCreating`).
pub fn skill_mounts<'a>(
    versions: impl Iterator<Item = &'a ResolvedSkill>,
    found: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<SkillMount>, String> {
    versions
        .map(|skill| {
            let name = config_map_name(&skill.name, &skill.digest);
            match found.get(&name) {
                Some(keys) => Ok(SkillMount {
                    name: skill.name.clone(),
                    digest: skill.digest.clone(),
                    keys: keys.clone(),
                }),
                None => Err(format!("skill ConfigMap {name} not found")),
            }
        })
        .collect()
}

/// What the Pod of one attempt is made from.
#[derive(Clone, Debug)]
pub struct PodInputs<'a> {
    /// The Run's name.
    pub run: &'a str,
    /// The Run's namespace.
    pub namespace: &'a str,
    /// The Run as controller owner.
    pub owner: OwnerReference,
    /// The attempt, from 1.
    pub attempt: u32,
    /// The snapshot.
    pub snapshot: &'a Snapshot,
    /// The Run's `inputs`.
    pub inputs: &'a [RunInput],
    /// The skills, with their keys.
    pub skills: &'a [SkillMount],
    /// Working time left before the Run's timeout.
    pub time_left: Duration,
    /// How many answers `spec.responses` holds already.
    pub answers_given: usize,
    /// The Run's trace (its `herd.dev/traceparent` annotation), continued by the runner.
    pub traceparent: Option<&'a str>,
    /// The digest of the Run's egress set: the namespace's policy of that set opens the Pod's
    /// egress.
    pub egress_set: &'a str,
}

/// The Pod's `activeDeadlineSeconds`, a backstop for when the operator is away (it enforces
/// both clocks itself and deletes the Pod): never before the Run's own limits, since `timeout`
/// counts working time only, it is the working time left plus every wait for a person the Run
/// may still have in this Pod (one per answer it can still take), each up to `inputTimeout`,
/// plus a margin.
pub fn pod_deadline(time_left: Duration, input_timeout: Duration, waits_left: usize) -> Duration {
    let waits = u32::try_from(waits_left.max(1)).unwrap_or(u32::MAX);
    time_left
        .saturating_add(input_timeout.saturating_mul(waits))
        .saturating_add(DEADLINE_MARGIN)
}

/// The Pod's name for an attempt.
pub fn pod_name(run: &str, attempt: u32) -> String {
    format!("{run}-{attempt}")
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn empty_dir(name: &str, medium: Option<&str>, size: Option<Quantity>) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: medium.map(str::to_owned),
            size_limit: size,
        }),
        ..Volume::default()
    }
}

fn restricted() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        run_as_user: Some(RUNNER_UID),
        run_as_group: Some(RUNNER_UID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            localhost_profile: None,
        }),
        ..SecurityContext::default()
    }
}

/// The sandbox's resources from the snapshot: the Agent's merged over `--sandbox-resources`
/// when the Run was accepted.
fn sandbox_resources(snapshot: &Snapshot) -> Option<ResourceRequirements> {
    let spec = snapshot.agent.sandbox.resources.as_ref()?;
    let map = |m: &BTreeMap<String, Quantity>| (!m.is_empty()).then(|| m.clone());
    Some(ResourceRequirements {
        limits: map(&spec.limits),
        requests: map(&spec.requests),
        ..ResourceRequirements::default()
    })
}

fn workspace_volume(run: &str, snapshot: &Snapshot) -> Volume {
    if snapshot
        .agent
        .sandbox
        .workspace
        .persistent_volume_claim
        .is_some()
    {
        return Volume {
            name: "workspace".to_owned(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: workspace_claim(run, snapshot),
                read_only: None,
            }),
            ..Volume::default()
        };
    }
    let size = snapshot
        .agent
        .sandbox
        .resources
        .as_ref()
        .and_then(|r| {
            r.limits
                .get("ephemeral-storage")
                .or_else(|| r.requests.get("ephemeral-storage"))
        })
        .cloned()
        .unwrap_or_else(|| Quantity(DEFAULT_WORKSPACE.to_owned()));
    empty_dir("workspace", None, Some(size))
}

fn skills_volume(skills: &[SkillMount]) -> Volume {
    let sources = skills
        .iter()
        .map(|skill| VolumeProjection {
            config_map: Some(ConfigMapProjection {
                name: config_map_name(&skill.name, &skill.digest),
                items: Some(
                    skill
                        .keys
                        .iter()
                        .filter_map(|key| {
                            Some(KeyToPath {
                                key: key.clone(),
                                path: format!("{}/{}", skill.name, file_keys::decode(key)?),
                                mode: None,
                            })
                        })
                        .collect(),
                ),
                optional: Some(false),
            }),
            ..VolumeProjection::default()
        })
        .collect();
    Volume {
        name: "skills".to_owned(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(sources),
            default_mode: None,
        }),
        ..Volume::default()
    }
}

/// The run API's token and CA, for `agent` only.
fn api_volume() -> Volume {
    Volume {
        name: "herd-api".to_owned(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(vec![
                VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        audience: Some(TOKEN_AUDIENCE.to_owned()),
                        expiration_seconds: Some(TOKEN_SECONDS),
                        path: "token".to_owned(),
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: RUN_API_CA.to_owned(),
                        items: Some(vec![KeyToPath {
                            key: CA_KEY.to_owned(),
                            path: CA_KEY.to_owned(),
                            mode: None,
                        }]),
                        optional: Some(false),
                    }),
                    ..VolumeProjection::default()
                },
            ]),
            default_mode: None,
        }),
        ..Volume::default()
    }
}

fn agent_container(inputs: &PodInputs<'_>, config: &PodConfig) -> Container {
    let snapshot = inputs.snapshot;
    let mut vars = vec![
        env("HERD_API_URL", &config.run_api_url),
        env("HERD_TOKEN_FILE", &format!("{API_DIR}/token")),
        env("HERD_CA_FILE", &format!("{API_DIR}/{CA_KEY}")),
        env("HERD_ROOT", ROOT),
        env("HERD_SANDBOX_SOCKET", SOCKET),
        env("HERD_TERMINATION_LOG", TERMINATION_LOG),
        env("HERD_RUN_NAMESPACE", inputs.namespace),
        env("HERD_RUN_NAME", inputs.run),
        env("HERD_ATTEMPT", &inputs.attempt.to_string()),
    ];
    if let Some(traceparent) = inputs.traceparent {
        vars.push(env("TRACEPARENT", traceparent));
    }
    if let Some(endpoint) = &config.otlp_endpoint {
        vars.push(env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint));
        vars.push(env("OTEL_SERVICE_NAME", "herd-runner"));
    }
    if let Some(key) = snapshot
        .agent
        .model
        .as_ref()
        .and_then(|m| m.api_key_secret_ref.as_ref())
    {
        vars.push(secret_env("HERD_MODEL_API_KEY", &key.name, &key.key));
    }
    if let Some(key) = snapshot
        .agent
        .tools
        .as_ref()
        .and_then(|t| t.web_search.as_ref())
        .and_then(|w| w.api_key_secret_ref.as_ref())
    {
        vars.push(secret_env("HERD_WEB_SEARCH_API_KEY", &key.name, &key.key));
    }
    let mcp_servers = snapshot.agent.mcp.iter().flat_map(|mcp| mcp.servers.iter());
    for (i, server) in mcp_servers.enumerate() {
        for (j, header) in server.headers.iter().enumerate() {
            let key = &header.secret_key_ref;
            vars.push(secret_env(&header_env_var(i, j), &key.name, &key.key));
        }
    }
    Container {
        name: AGENT_CONTAINER.to_owned(),
        image: Some(snapshot.runner_image.clone()),
        command: Some(vec!["herd-runner".to_owned(), "pod".to_owned()]),
        env: Some(vars),
        resources: Some(config.runner_resources.clone()),
        security_context: Some(restricted()),
        termination_message_path: Some(TERMINATION_LOG.to_owned()),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        volume_mounts: Some(vec![
            mount("tmp-agent", "/tmp", false),
            mount("socket", SOCKET_DIR, false),
            mount("herd-api", API_DIR, true),
        ]),
        ..Container::default()
    }
}

fn sandbox_container(inputs: &PodInputs<'_>) -> Container {
    let mut mounts = vec![
        mount("tmp-sandbox", "/tmp", false),
        mount("socket", SOCKET_DIR, false),
        mount("workspace", &format!("{ROOT}/user-data"), false),
    ];
    if !inputs.skills.is_empty() {
        mounts.push(mount("skills", &format!("{ROOT}/skills/custom"), true));
    }
    for i in 0..inputs.inputs.len() {
        mounts.push(mount(
            &format!("input-{i}"),
            &format!("{ROOT}/inputs/{i}"),
            true,
        ));
    }
    Container {
        name: SANDBOX_CONTAINER.to_owned(),
        image: Some(inputs.snapshot.sandbox_image.clone()),
        command: Some(vec!["herd-runner".to_owned(), "sandbox".to_owned()]),
        // A native sidecar: it starts before `agent` and stops after it.
        restart_policy: Some("Always".to_owned()),
        env: Some(vec![
            env("HOME", "/tmp"),
            env("HERD_ROOT", ROOT),
            env("HERD_SANDBOX_SOCKET", SOCKET),
        ]),
        startup_probe: Some(Probe {
            exec: Some(ExecAction {
                command: Some(vec![
                    "herd-runner".to_owned(),
                    "sandbox".to_owned(),
                    "--ready".to_owned(),
                ]),
            }),
            period_seconds: Some(1),
            failure_threshold: Some(60),
            ..Probe::default()
        }),
        resources: sandbox_resources(inputs.snapshot),
        security_context: Some(restricted()),
        volume_mounts: Some(mounts),
        ..Container::default()
    }
}

/// The Pod of one attempt.
pub fn desired_pod(inputs: &PodInputs<'_>, config: &PodConfig) -> Pod {
    let snapshot = inputs.snapshot;
    let sandbox = &snapshot.agent.sandbox;
    let tmp = || Some(Quantity(TMP_SIZE.to_owned()));
    let mut volumes = vec![
        empty_dir("tmp-agent", None, tmp()),
        empty_dir("tmp-sandbox", None, tmp()),
        empty_dir("socket", Some("Memory"), None),
        workspace_volume(inputs.run, snapshot),
        api_volume(),
    ];
    if !inputs.skills.is_empty() {
        volumes.push(skills_volume(inputs.skills));
    }
    for (i, input) in inputs.inputs.iter().enumerate() {
        volumes.push(Volume {
            name: format!("input-{i}"),
            config_map: Some(ConfigMapVolumeSource {
                name: input.config_map_ref.name.clone(),
                optional: Some(false),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    let deadline = pod_deadline(
        inputs.time_left,
        snapshot.run.input_timeout(),
        MAX_RESPONSES.saturating_sub(inputs.answers_given),
    );
    let deadline_seconds = i64::try_from(deadline.as_secs()).unwrap_or(i64::MAX).max(1);
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(inputs.run, inputs.attempt)),
            namespace: Some(inputs.namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned()),
                (labels::RUN.to_owned(), inputs.run.to_owned()),
                (labels::AGENT.to_owned(), snapshot.agent_name.clone()),
                (labels::ATTEMPT.to_owned(), inputs.attempt.to_string()),
                (labels::EGRESS_SET.to_owned(), inputs.egress_set.to_owned()),
            ])),
            annotations: Some(BTreeMap::from([(
                SAFE_TO_EVICT.to_owned(),
                "false".to_owned(),
            )])),
            owner_references: Some(vec![inputs.owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_owned()),
            service_account_name: Some(RUNNER_SERVICE_ACCOUNT.to_owned()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            share_process_namespace: Some(false),
            termination_grace_period_seconds: Some(30),
            active_deadline_seconds: Some(deadline_seconds),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(RUNNER_UID),
                run_as_group: Some(RUNNER_UID),
                fs_group: Some(RUNNER_UID),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_owned(),
                    localhost_profile: None,
                }),
                ..PodSecurityContext::default()
            }),
            init_containers: Some(vec![sandbox_container(inputs)]),
            containers: vec![agent_container(inputs, config)],
            volumes: Some(volumes),
            runtime_class_name: sandbox.runtime_class_name.clone(),
            node_selector: (!sandbox.node_selector.is_empty())
                .then(|| sandbox.node_selector.clone()),
            tolerations: (!sandbox.tolerations.is_empty()).then(|| sandbox.tolerations.clone()),
            ..PodSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::fixtures::{run_owner, snapshot};
    use serde_json::{Value, json};

    fn keyed() -> Snapshot {
        snapshot(json!({
            "model": {"provider": "openai", "name": "m",
                      "apiKeySecretRef": {"name": "llm", "key": "api-key"}},
            "tools": {"webSearch": {"provider": "tavily",
                                    "apiKeySecretRef": {"name": "search", "key": "k"}}},
            "mcp": {"servers": [
                {"name": "time", "command": ["python3", "-m", "mcp_server_time"]},
                {"name": "docs", "url": "http://docs/mcp", "headers": [
                    {"name": "Authorization", "secretKeyRef": {"name": "docs-token", "key": "t"}}]}]},
            "sandbox": {"resources": {"limits": {"memory": "2Gi", "ephemeral-storage": "3Gi"}},
                        "runtimeClassName": "gvisor", "nodeSelector": {"pool": "agents"},
                        "tolerations": [{"key": "agents", "operator": "Exists"}]}
        }))
    }

    #[test]
    fn custom_skill_versions_mount_from_their_config_maps_and_a_missing_one_waits() {
        let version = |name: &str, digest: &str| ResolvedSkill {
            name: name.into(),
            digest: digest.into(),
        };
        let builtin = [version("deep-research", "b0b0b0b0b0")];
        let skills = [
            version("deep-research", "b0b0b0b0b0"),
            version("notes", "1234567890"),
            version("deep-research", "c0c0c0c0c0"),
        ];
        let custom: Vec<&ResolvedSkill> = custom_versions(&skills, &builtin).collect();
        assert_eq!(
            custom,
            [&skills[1], &skills[2]],
            "the built-in version comes from the image; a Skill replacing it does not"
        );
        let mut found =
            BTreeMap::from([("notes-12345678".to_owned(), vec!["SKILL.md".to_owned()])]);
        assert_eq!(
            skill_mounts(custom.iter().copied(), &found),
            Err("skill ConfigMap deep-research-c0c0c0c0 not found".to_owned())
        );
        found.insert(
            "deep-research-c0c0c0c0".into(),
            vec!["SKILL.md".into(), "a~2fb".into()],
        );
        let mounts = skill_mounts(custom.iter().copied(), &found).unwrap();
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[1].keys, ["SKILL.md", "a~2fb"]);
        assert_eq!(mounts[0].digest, "1234567890");
        assert_eq!(
            skill_mounts(std::iter::empty(), &BTreeMap::new()),
            Ok(vec![])
        );
    }

    fn owner() -> OwnerReference {
        run_owner("r", "u1")
    }

    fn config() -> PodConfig {
        PodConfig {
            run_api_url: "https://herd.herd-system.svc:8443".into(),
            runner_resources: crate::decide::runner_resources::parse_resources(
                crate::decide::runner_resources::DEFAULT_RUNNER_RESOURCES,
            )
            .unwrap(),
            otlp_endpoint: None,
        }
    }

    fn pod(snapshot: &Snapshot, inputs: &[RunInput], skills: &[SkillMount]) -> Value {
        let made = desired_pod(
            &PodInputs {
                run: "r",
                namespace: "ns",
                owner: owner(),
                attempt: 2,
                snapshot,
                inputs,
                skills,
                time_left: Duration::from_secs(1000),
                answers_given: 30,
                traceparent: None,
                egress_set: "0123456789abcdef",
            },
            &config(),
        );
        serde_json::to_value(made).unwrap()
    }

    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_runner_continues_the_runs_trace_and_exports_where_told() {
        let snapshot = snapshot(json!({}));
        let made = desired_pod(
            &PodInputs {
                run: "r",
                namespace: "ns",
                owner: owner(),
                attempt: 1,
                snapshot: &snapshot,
                inputs: &[],
                skills: &[],
                time_left: Duration::from_secs(1000),
                answers_given: 30,
                traceparent: Some(TRACEPARENT),
                egress_set: "0123456789abcdef",
            },
            &PodConfig {
                otlp_endpoint: Some("http://collector:4318".into()),
                ..config()
            },
        );
        let traced = serde_json::to_value(made).unwrap();
        let env = container(&traced, "containers", "agent")["env"]
            .as_array()
            .unwrap();
        assert!(env.contains(&json!({"name": "TRACEPARENT", "value": TRACEPARENT})));
        assert!(env.contains(
            &json!({"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://collector:4318"})
        ));
        let plain = pod(&snapshot, &[], &[]);
        assert!(!plain.to_string().contains("TRACEPARENT"));
    }

    fn container<'a>(pod: &'a Value, list: &str, name: &str) -> &'a Value {
        pod["spec"][list]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
    }

    fn skills() -> Vec<SkillMount> {
        vec![SkillMount {
            name: "web".into(),
            digest: "0123456789abcdef".into(),
            keys: vec!["SKILL.md".into(), file_keys::encode("scripts/check.py")],
        }]
    }

    fn inputs() -> Vec<RunInput> {
        serde_json::from_value(json!([{"configMapRef": {"name": "data"}, "path": "reports"}]))
            .unwrap()
    }

    #[test]
    fn the_whole_pod() {
        insta::assert_json_snapshot!(pod(&keyed(), &inputs(), &skills()));
    }

    #[test]
    fn agent_is_the_only_container_and_sandbox_a_native_sidecar_with_its_probe() {
        let p = pod(&keyed(), &[], &[]);
        assert_eq!(p["spec"]["containers"].as_array().unwrap().len(), 1);
        assert_eq!(p["spec"]["containers"][0]["name"], "agent");
        let sandbox = container(&p, "initContainers", "sandbox");
        assert_eq!(sandbox["restartPolicy"], "Always");
        assert_eq!(
            sandbox["startupProbe"],
            json!({"exec": {"command": ["herd-runner", "sandbox", "--ready"]},
                   "periodSeconds": 1, "failureThreshold": 60})
        );
        assert_eq!(
            container(&p, "containers", "agent")["terminationMessagePolicy"],
            "FallbackToLogsOnError"
        );
    }

    #[test]
    fn secrets_and_the_token_reach_agent_only_by_reference() {
        let p = pod(&keyed(), &inputs(), &skills());
        let agent = container(&p, "containers", "agent");
        let key = agent["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "HERD_MODEL_API_KEY")
            .unwrap();
        assert_eq!(
            key,
            &json!({"name": "HERD_MODEL_API_KEY", "valueFrom": {"secretKeyRef":
                {"name": "llm", "key": "api-key", "optional": false}}})
        );
        let header = agent["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "HERD_MCP_1_HEADER_0")
            .unwrap();
        assert_eq!(
            header,
            &json!({"name": "HERD_MCP_1_HEADER_0", "valueFrom": {"secretKeyRef":
                {"name": "docs-token", "key": "t", "optional": false}}}),
            "the second server's first header"
        );
        let sandbox = container(&p, "initContainers", "sandbox");
        let text = sandbox.to_string();
        for secret in [
            "secretKeyRef",
            "herd-api",
            "llm",
            "search",
            "TOKEN",
            "docs-token",
            "HERD_MCP",
        ] {
            assert!(!text.contains(secret), "{secret} in sandbox: {text}");
        }
        assert!(sandbox["envFrom"].is_null());
        let mounts: Vec<&str> = agent["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            mounts,
            ["tmp-agent", "socket", "herd-api"],
            "no workspace, no skills"
        );
        let api = p["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "herd-api")
            .unwrap();
        assert_eq!(
            api["projected"]["sources"][0],
            json!({"serviceAccountToken": {"audience": "herd.dev", "expirationSeconds": 600,
                                           "path": "token"}})
        );
        assert_eq!(p["spec"]["automountServiceAccountToken"], false);
        assert_eq!(p["spec"]["serviceAccountName"], "herd-runner");
        assert_eq!(p["spec"]["shareProcessNamespace"], false);
    }

    #[test]
    fn both_containers_are_restricted() {
        let p = pod(&keyed(), &[], &[]);
        for c in [
            container(&p, "containers", "agent"),
            container(&p, "initContainers", "sandbox"),
        ] {
            assert_eq!(
                c["securityContext"],
                json!({"allowPrivilegeEscalation": false,
                       "capabilities": {"drop": ["ALL"]},
                       "readOnlyRootFilesystem": true, "runAsNonRoot": true,
                       "runAsUser": 65532, "runAsGroup": 65532,
                       "seccompProfile": {"type": "RuntimeDefault"}})
            );
        }
        assert_eq!(p["spec"]["securityContext"]["runAsUser"], 65532);
    }

    #[test]
    fn the_deadline_leaves_room_for_every_wait_still_possible() {
        let hour = Duration::from_secs(3600);
        assert_eq!(
            pod_deadline(hour, hour, 32),
            hour * 33 + DEADLINE_MARGIN,
            "a fresh Run may still ask 32 questions"
        );
        assert_eq!(
            pod_deadline(Duration::ZERO, hour, 0),
            hour + DEADLINE_MARGIN,
            "the last wait is still one"
        );
        assert_eq!(
            pod_deadline(Duration::MAX, hour, 1),
            Duration::MAX,
            "saturates"
        );
    }

    #[test]
    fn metadata_deadline_and_scheduling() {
        let p = pod(&keyed(), &[], &[]);
        assert_eq!(p["metadata"]["name"], "r-2");
        assert_eq!(
            p["metadata"]["labels"],
            json!({"app.kubernetes.io/managed-by": "herd-operator", "herd.dev/run": "r",
                   "herd.dev/agent": "helper", "herd.dev/attempt": "2",
                   "herd.dev/egress-set": "0123456789abcdef"})
        );
        assert_eq!(
            p["metadata"]["annotations"],
            json!({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})
        );
        assert_eq!(p["metadata"]["ownerReferences"][0]["uid"], "u1");
        assert_eq!(p["spec"]["activeDeadlineSeconds"], 1000 + 2 * 3600 + 300);
        assert_eq!(p["spec"]["restartPolicy"], "Never");
        assert_eq!(p["spec"]["enableServiceLinks"], false);
        assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 30);
        assert_eq!(p["spec"]["runtimeClassName"], "gvisor");
        assert_eq!(p["spec"]["nodeSelector"], json!({"pool": "agents"}));
        assert_eq!(
            p["spec"]["tolerations"],
            json!([{"key": "agents", "operator": "Exists"}])
        );
        assert_eq!(
            container(&p, "initContainers", "sandbox")["resources"],
            json!({"limits": {"memory": "2Gi", "ephemeral-storage": "3Gi"}})
        );
        assert_eq!(
            container(&p, "containers", "agent")["resources"],
            json!({"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}})
        );
    }

    fn volume(p: &Value, name: &str) -> Value {
        p["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    }

    #[test]
    fn volumes_tmp_socket_workspace_skills_and_inputs() {
        let p = pod(&keyed(), &inputs(), &skills());
        assert_eq!(
            volume(&p, "tmp-sandbox"),
            json!({"name": "tmp-sandbox", "emptyDir": {"sizeLimit": "1Gi"}})
        );
        assert_eq!(
            volume(&p, "socket"),
            json!({"name": "socket", "emptyDir": {"medium": "Memory"}})
        );
        assert_eq!(
            volume(&p, "workspace"),
            json!({"name": "workspace", "emptyDir": {"sizeLimit": "3Gi"}})
        );
        assert_eq!(
            volume(&p, "skills")["projected"]["sources"],
            json!([{"configMap": {"name": "web-01234567", "optional": false, "items": [
                {"key": "SKILL.md", "path": "web/SKILL.md"},
                {"key": "scripts_-check.py", "path": "web/scripts/check.py"}]}}])
        );
        assert_eq!(
            volume(&p, "input-0"),
            json!({"name": "input-0", "configMap": {"name": "data", "optional": false}})
        );
        let sandbox = container(&p, "initContainers", "sandbox");
        let mounts = &sandbox["volumeMounts"];
        assert!(mounts.as_array().unwrap().contains(
            &json!({"name": "skills", "mountPath": "/mnt/skills/custom", "readOnly": true})
        ));
        assert!(
            mounts.as_array().unwrap().contains(
                &json!({"name": "input-0", "mountPath": "/mnt/inputs/0", "readOnly": true})
            )
        );
        assert!(
            mounts
                .as_array()
                .unwrap()
                .contains(&json!({"name": "workspace", "mountPath": "/mnt/user-data"}))
        );

        let plain = pod(&snapshot(json!({})), &[], &[]);
        assert_eq!(
            volume(&plain, "workspace"),
            json!({"name": "workspace", "emptyDir": {"sizeLimit": "10Gi"}})
        );
        assert_eq!(volume(&plain, "skills"), Value::Null);
        let claimed = pod(
            &snapshot(json!({"sandbox": {"workspace": {"persistentVolumeClaim": {}}}})),
            &[],
            &[],
        );
        assert_eq!(
            volume(&claimed, "workspace"),
            json!({"name": "workspace", "persistentVolumeClaim": {"claimName": "r-workspace"}})
        );
        let env = container(&plain, "containers", "agent")["env"].to_string();
        assert!(!env.contains("secretKeyRef"), "no key without a reference");
    }
}
