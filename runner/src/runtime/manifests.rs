//! Reads the manifests given to `herd-runner run -f`: one Agent, any Skills, an optional Run,
//! and the ConfigMaps and Secrets they reference — the same YAML users apply to a cluster.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use herd_crds::agent::Agent;
use herd_crds::manifest::{API_VERSION, Manifest, check_kind, parse_document};
use herd_crds::refs::{SecretKeyRef, ValueFrom};
use herd_crds::run::Run;
use herd_crds::skill::Skill;
use serde_json::Value;

/// A problem with the files given; the message names the file and the field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ManifestsError(pub String);

/// What the files held.
#[derive(Debug, Clone)]
pub struct LocalManifests {
    pub agent: Agent,
    pub skills: Vec<Skill>,
    pub run: Option<Run>,
    /// ConfigMap data by ConfigMap name, then key.
    pub config_maps: BTreeMap<String, BTreeMap<String, String>>,
    /// Secrets by name (MCP header values).
    pub secrets: BTreeMap<String, LocalSecret>,
    /// The raw texts, kept so a suspended run can be resumed from exactly these.
    pub sources: Vec<(PathBuf, String)>,
}

/// The label a Secret needs before an Agent may use it, as in a cluster.
pub const CREDENTIALS_LABEL: &str = "herd.dev/model-credentials";

/// A Secret given with -f: whether it carries [`CREDENTIALS_LABEL`], and its values.
#[derive(Clone, PartialEq, Eq)]
pub struct LocalSecret {
    pub allowed: bool,
    data: BTreeMap<String, String>,
}

/// Values are secrets: only the keys are printed.
impl std::fmt::Debug for LocalSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSecret")
            .field("allowed", &self.allowed)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Whether a file's text holds a Secret (such files are not copied into a run's record).
pub fn holds_a_secret(text: &str) -> bool {
    serde_saphyr::from_multiple::<Value>(text)
        .map(|documents| documents.iter().any(is_secret))
        .unwrap_or(false)
}

/// What `herd-runner run -f` reads: Herd's kinds, and the ConfigMaps and Secrets they use.
const LOCAL_KINDS: &[(&str, &[&str])] = &[
    (API_VERSION, &["Agent", "Skill", "Run"]),
    ("v1", &["ConfigMap", "Secret"]),
];

fn is_secret(document: &Value) -> bool {
    document.get("kind").and_then(Value::as_str) == Some("Secret")
}

impl LocalManifests {
    /// Reads and validates every file.
    pub fn load(files: &[PathBuf]) -> Result<Self, ManifestsError> {
        if files.is_empty() {
            return Err(ManifestsError(
                "no manifests given: pass the Agent with -f agent.yaml".into(),
            ));
        }
        let mut sources = Vec::new();
        for path in files {
            let text = fs::read_to_string(path).map_err(|error| {
                ManifestsError(format!("{}: cannot read: {error}", path.display()))
            })?;
            sources.push((path.clone(), text));
        }
        Self::from_sources(sources)
    }

    /// Parses already-read texts (used when resuming from a checkpoint).
    pub fn from_sources(sources: Vec<(PathBuf, String)>) -> Result<Self, ManifestsError> {
        let mut agents = Vec::new();
        let mut skills = Vec::new();
        let mut runs = Vec::new();
        let mut config_maps = BTreeMap::new();
        let mut secrets = BTreeMap::new();
        for (path, text) in &sources {
            let fail = |message: String| ManifestsError(format!("{}: {message}", path.display()));
            let documents: Vec<Value> = serde_saphyr::from_multiple(text)
                .map_err(|error| fail(format!("invalid YAML: {error}")))?;
            for (index, document) in documents.into_iter().enumerate() {
                if document.is_null() {
                    continue;
                }
                check_kind(index + 1, &document, LOCAL_KINDS)
                    .map_err(|error| fail(error.to_string()))?;
                if document.get("kind").and_then(Value::as_str) == Some("ConfigMap") {
                    let (name, data) = config_map(&document)
                        .map_err(|m| fail(format!("document {}: {m}", index + 1)))?;
                    config_maps.insert(name, data);
                    continue;
                }
                if is_secret(&document) {
                    let (name, secret) = secret(&document)
                        .map_err(|m| fail(format!("document {}: {m}", index + 1)))?;
                    secrets.insert(name, secret);
                    continue;
                }
                match parse_document(index + 1, document) {
                    Ok(Manifest::Agent(agent)) => agents.push(agent),
                    Ok(Manifest::Skill(skill)) => skills.push(skill),
                    Ok(Manifest::Run(run)) => runs.push(run),
                    Err(error) => return Err(fail(error.to_string())),
                }
            }
        }
        let agent = match agents.len() {
            1 => agents.remove(0),
            0 => {
                return Err(ManifestsError(
                    "none of the files holds an Agent (kind: Agent, apiVersion: herd.dev/v1alpha1)"
                        .into(),
                ));
            }
            n => {
                let names: Vec<_> = agents.iter().map(name_of_agent).collect();
                return Err(ManifestsError(format!(
                    "{n} Agents given ({}): give exactly one",
                    names.join(", ")
                )));
            }
        };
        if runs.len() > 1 {
            return Err(ManifestsError(format!(
                "{} Runs given: give at most one",
                runs.len()
            )));
        }
        let run = runs.pop();
        if let Some(run) = &run {
            let wanted = &run.spec.agent_ref.name;
            if wanted != &name_of_agent(&agent) {
                return Err(ManifestsError(format!(
                    "the Run refers to Agent '{wanted}' but the Agent given is '{}'",
                    name_of_agent(&agent)
                )));
            }
        }
        Ok(LocalManifests {
            agent,
            skills,
            run,
            config_maps,
            secrets,
            sources,
        })
    }

    /// The Agent's name.
    pub fn agent_name(&self) -> String {
        name_of_agent(&self.agent)
    }

    /// The text a `ValueFrom` points at; `field` names the referring field in the error.
    pub fn value_from(&self, field: &str, from: &ValueFrom) -> Result<String, ManifestsError> {
        let reference = &from.config_map_key_ref;
        let data = self.config_maps.get(&reference.name).ok_or_else(|| {
            ManifestsError(format!(
                "{field}: ConfigMap '{}' is not among the files given (add it with -f)",
                reference.name
            ))
        })?;
        data.get(&reference.key).cloned().ok_or_else(|| {
            ManifestsError(format!(
                "{field}: ConfigMap '{}' has no key '{}'",
                reference.name, reference.key
            ))
        })
    }
}

impl LocalManifests {
    /// The value a `SecretKeyRef` points at, from a Secret given with -f that carries
    /// [`CREDENTIALS_LABEL`] (as the operator requires); `field` names the referring field.
    pub fn secret_value(
        &self,
        field: &str,
        reference: &SecretKeyRef,
    ) -> Result<String, ManifestsError> {
        let secret = self.secrets.get(&reference.name).ok_or_else(|| {
            ManifestsError(format!(
                "{field}: Secret '{}' is not among the files given (add it with -f)",
                reference.name
            ))
        })?;
        if !secret.allowed {
            return Err(ManifestsError(format!(
                "{field}: Secret '{}' lacks the label {CREDENTIALS_LABEL}: \"true\" (a \
                 cluster refuses it too)",
                reference.name
            )));
        }
        secret.data.get(&reference.key).cloned().ok_or_else(|| {
            ManifestsError(format!(
                "{field}: Secret '{}' has no key '{}'",
                reference.name, reference.key
            ))
        })
    }
}

/// A Secret document: `stringData` as is, `data` base64-decoded (`stringData` wins, as in a
/// cluster).
fn secret(document: &Value) -> Result<(String, LocalSecret), String> {
    use base64::Engine as _;
    let name = document
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .ok_or("Secret: metadata.name is required")?
        .to_owned();
    let allowed = document
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(CREDENTIALS_LABEL))
        .and_then(Value::as_str)
        == Some("true");
    let mut data = BTreeMap::new();
    if let Some(entries) = document.get("data").and_then(Value::as_object) {
        for (key, value) in entries {
            let decoded = value
                .as_str()
                .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .ok_or_else(|| {
                    format!("Secret/{name}: data.{key}: must be base64 of UTF-8 text")
                })?;
            data.insert(key.clone(), decoded);
        }
    }
    if let Some(entries) = document.get("stringData").and_then(Value::as_object) {
        for (key, value) in entries {
            let text = value
                .as_str()
                .ok_or_else(|| format!("Secret/{name}: stringData.{key}: must be a string"))?;
            data.insert(key.clone(), text.to_owned());
        }
    }
    Ok((name, LocalSecret { allowed, data }))
}

fn name_of_agent(agent: &Agent) -> String {
    agent.metadata.name.clone().unwrap_or_default()
}

fn config_map(document: &Value) -> Result<(String, BTreeMap<String, String>), String> {
    let name = document
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .ok_or("ConfigMap: metadata.name is required")?
        .to_owned();
    let mut data = BTreeMap::new();
    if let Some(entries) = document.get("data").and_then(Value::as_object) {
        for (key, value) in entries {
            let text = value
                .as_str()
                .ok_or_else(|| format!("ConfigMap/{name}: data.{key}: must be a string"))?;
            data.insert(key.clone(), text.to_owned());
        }
    }
    Ok((name, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGENT: &str = "apiVersion: herd.dev/v1alpha1
kind: Agent
metadata:
  name: helper
spec:
  model:
    provider: scripted
    name: demo
    scriptFrom:
      configMapKeyRef: {name: script, key: script.yaml}
";

    const CONFIG_MAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: script
data:
  script.yaml: |
    rules: []
";

    fn load(texts: &[&str]) -> Result<LocalManifests, ManifestsError> {
        LocalManifests::from_sources(
            texts
                .iter()
                .enumerate()
                .map(|(i, t)| (PathBuf::from(format!("f{i}.yaml")), t.to_string()))
                .collect(),
        )
    }

    #[test]
    fn a_wrong_kind_lists_every_kind_read_and_a_wrong_version_the_kinds_own() {
        let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n";
        let error = load(&[&format!("{AGENT}---\n{deployment}")]).unwrap_err();
        assert_eq!(
            error.0,
            "f0.yaml: document 2 (Deployment/web): kind: Unsupported value: \"Deployment\": \
             supported values: \"Agent\", \"Skill\", \"Run\", \"ConfigMap\", \"Secret\""
        );
        let typo = AGENT.replace("kind: Agent", "kind: Agnet");
        assert!(
            load(&[&typo])
                .unwrap_err()
                .0
                .contains("\"ConfigMap\", \"Secret\"")
        );
        let old_map = CONFIG_MAP.replace("apiVersion: v1", "apiVersion: apps/v1");
        let error = load(&[&format!("{AGENT}---\n{old_map}")]).unwrap_err();
        assert!(
            error.0.ends_with(
                "document 2 (ConfigMap/script): apiVersion: Unsupported value: \"apps/v1\": \
                 supported values: \"v1\""
            ),
            "{error}"
        );
        let old_agent = AGENT.replace("herd.dev/v1alpha1", "herd.dev/v1");
        let error = load(&[&old_agent]).unwrap_err();
        assert!(
            error.0.ends_with("supported values: \"herd.dev/v1alpha1\""),
            "{error}"
        );
    }

    #[test]
    fn reads_an_agent_and_the_config_maps_it_uses() {
        let manifests = load(&[&format!("{AGENT}---\n{CONFIG_MAP}")]).unwrap();
        assert_eq!(manifests.agent_name(), "helper");
        let from = manifests
            .agent
            .spec
            .model
            .as_ref()
            .unwrap()
            .script_from
            .clone()
            .unwrap();
        let script = manifests
            .value_from("spec.model.scriptFrom", &from)
            .unwrap();
        assert_eq!(script, "rules: []\n");
    }

    #[test]
    fn a_missing_config_map_names_the_field() {
        let manifests = load(&[AGENT]).unwrap();
        let from = manifests
            .agent
            .spec
            .model
            .clone()
            .unwrap()
            .script_from
            .unwrap();
        let error = manifests
            .value_from("spec.model.scriptFrom", &from)
            .unwrap_err();
        assert!(
            error
                .0
                .contains("spec.model.scriptFrom: ConfigMap 'script'"),
            "{error}"
        );
    }

    #[test]
    fn exactly_one_agent_is_required() {
        assert!(
            load(&[CONFIG_MAP])
                .unwrap_err()
                .0
                .contains("none of the files")
        );
        let two = load(&[AGENT, AGENT]).unwrap_err();
        assert!(two.0.contains("2 Agents given"), "{two}");
    }

    #[test]
    fn invalid_fields_are_reported_with_file_and_path() {
        let bad = AGENT.replace("provider: scripted", "provider: nope");
        let error = load(&[&bad]).unwrap_err();
        assert!(
            error.0.starts_with("f0.yaml: document 1 (Agent/helper)"),
            "{error}"
        );
        assert!(error.0.contains("provider"), "{error}");
    }

    #[test]
    fn secrets_are_read_labelled_decoded_and_never_printed() {
        let secrets = "apiVersion: v1
kind: Secret
metadata:
  name: docs
  labels: {herd.dev/model-credentials: \"true\"}
data:
  token: czNjcmV0
stringData:
  plain: open-s3same
---
apiVersion: v1
kind: Secret
metadata: {name: bare}
stringData: {token: x}
";
        let manifests = load(&[AGENT, secrets]).unwrap();
        let key = |name: &str, key: &str| SecretKeyRef {
            name: name.into(),
            key: key.into(),
        };
        assert_eq!(
            manifests.secret_value("f", &key("docs", "token")).unwrap(),
            "s3cret"
        );
        assert_eq!(
            manifests.secret_value("f", &key("docs", "plain")).unwrap(),
            "open-s3same"
        );
        let unlabelled = manifests
            .secret_value("f", &key("bare", "token"))
            .unwrap_err();
        assert!(unlabelled.0.contains("lacks the label"), "{unlabelled}");
        let missing = manifests
            .secret_value("f", &key("none", "token"))
            .unwrap_err();
        assert!(missing.0.contains("add it with -f"), "{missing}");
        let no_key = manifests
            .secret_value("f", &key("docs", "nope"))
            .unwrap_err();
        assert!(no_key.0.contains("has no key 'nope'"), "{no_key}");
        let printed = format!("{:?}", manifests.secrets);
        assert!(
            !printed.contains("s3cret") && !printed.contains("s3same"),
            "{printed}"
        );
        assert!(holds_a_secret(secrets) && !holds_a_secret(AGENT));
    }

    #[test]
    fn a_run_must_name_the_agent_given() {
        let run = "apiVersion: herd.dev/v1alpha1
kind: Run
metadata: {name: r1}
spec:
  agentRef: {name: other}
  task: hello
";
        let error = load(&[AGENT, run]).unwrap_err();
        assert!(error.0.contains("refers to Agent 'other'"), "{error}");
    }
}
