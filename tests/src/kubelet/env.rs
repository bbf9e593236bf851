//! A container's environment and command line, decided from the Pod and the Secrets and
//! ConfigMaps it names, as the kubelet makes them: `envFrom` first, then `env` in order (a
//! later name wins), `$(VAR)` references expanded with what is defined before, `valueFrom`
//! read from Secrets, ConfigMaps and the Pod's own fields. Under it, what the kubelet adds for
//! the API server (`KUBERNETES_SERVICE_HOST`/`PORT`, see [`ApiServer`]) and what a container
//! runtime adds from an image: `PATH`, `HOME` and `HOSTNAME` (there is no image here, so the
//! defaults of one without an `Env`). Nothing comes from the kubelet's own environment.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, Pod};

use super::image;
use super::service_env::ApiServer;

/// `PATH` of an image that sets none (containerd's default).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The Pod's address: containers share the host's network.
pub const POD_IP: &str = "127.0.0.1";

/// The Secrets and ConfigMaps a container names, as read from the API (`None`: not found).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// Secrets by name: their decoded data.
    pub secrets: BTreeMap<String, Option<BTreeMap<String, Vec<u8>>>>,
    /// ConfigMaps by name: `data` and `binaryData` together.
    pub config_maps: BTreeMap<String, Option<BTreeMap<String, Vec<u8>>>>,
}

/// The names of the Secrets and ConfigMaps `container`'s environment reads.
pub fn referenced(container: &Container) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut secrets = BTreeSet::new();
    let mut config_maps = BTreeSet::new();
    for from in container.env_from.iter().flatten() {
        if let Some(secret) = &from.secret_ref {
            secrets.insert(secret.name.clone());
        }
        if let Some(map) = &from.config_map_ref {
            config_maps.insert(map.name.clone());
        }
    }
    for source in container
        .env
        .iter()
        .flatten()
        .filter_map(|var| var.value_from.as_ref())
    {
        if let Some(key) = &source.secret_key_ref {
            secrets.insert(key.name.clone());
        }
        if let Some(key) = &source.config_map_key_ref {
            config_maps.insert(key.name.clone());
        }
    }
    (secrets, config_maps)
}

/// The environment of `container` in `pod` on node `node`, whose containers reach the API
/// server at `api`, in the order it was defined; an error names what is missing (the
/// kubelet's `CreateContainerConfigError`).
pub fn container_env(
    pod: &Pod,
    node: &str,
    api: &ApiServer,
    container: &Container,
    sources: &Sources,
) -> Result<Vec<(String, String)>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut env = Env::default();
    env.set("PATH", DEFAULT_PATH.to_owned());
    env.set("HOSTNAME", pod.metadata.name.clone().unwrap_or_default());
    env.set("HOME", "/".to_owned());
    // As the kubelet's service variables: the Pod's own win, and `$(VAR)` may use them.
    for (name, value) in api.env() {
        env.set(&name, value);
    }
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or_default();
        let data = if let Some(secret) = &from.secret_ref {
            let data = found(&sources.secrets, &secret.name);
            if data.is_none() && secret.optional != Some(true) {
                return Err(format!("secret \"{}\" not found", secret.name));
            }
            data
        } else if let Some(map) = &from.config_map_ref {
            let data = found(&sources.config_maps, &map.name);
            if data.is_none() && map.optional != Some(true) {
                return Err(format!("configmap \"{}\" not found", map.name));
            }
            data
        } else {
            None
        };
        for (key, value) in data.into_iter().flatten() {
            // The kubelet skips keys that are no valid variable name.
            let name = format!("{prefix}{key}");
            if valid_name(&name) {
                env.set(&name, text(value));
            }
        }
    }
    for var in container.env.iter().flatten() {
        if let Some(value) = var_value(var, pod, node, namespace, sources, &env)? {
            env.set(&var.name, value);
        }
    }
    Ok(env.vars)
}

/// The command line: `command` + `args` with `$(VAR)` expanded from `env`. There is no image
/// to take an entrypoint from, so a container must name its command, unless its image is one
/// whose entrypoint this node knows ([`image::entrypoint`]).
pub fn argv(container: &Container, env: &[(String, String)]) -> Result<Vec<String>, String> {
    let command = match container.command.clone().unwrap_or_default() {
        command if !command.is_empty() => command,
        _ => {
            image::entrypoint(container.image.as_deref().unwrap_or_default()).ok_or_else(|| {
                format!(
                    "container {:?} has no command: local-kubelet runs no images, so it cannot \
                     use an image's entrypoint (it knows only the operator image's)",
                    container.name
                )
            })?
        }
    };
    let lookup = |name: &str| {
        env.iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, v)| v.as_str())
    };
    Ok(command
        .iter()
        .chain(container.args.iter().flatten())
        .map(|arg| expand(arg, lookup))
        .collect())
}

/// Kubernetes' `$(VAR)` expansion: a defined variable is replaced, an undefined one stays as
/// written, `$$` is a `$`, any other `$` stays.
pub fn expand<'a>(input: &str, lookup: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let mut chars = after.chars();
        match chars.next() {
            None => {
                out.push('$');
                rest = after;
            }
            Some('$') => {
                out.push('$');
                rest = &after[1..];
            }
            Some('(') => match after.find(')') {
                Some(close) => {
                    let name = &after[1..close];
                    match lookup(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &after[close + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = &after[1..];
                }
            },
            Some(other) => {
                out.push('$');
                out.push(other);
                rest = chars.as_str();
            }
        }
    }
    out.push_str(rest);
    out
}

/// Variables in definition order; setting one again replaces its value in place.
#[derive(Debug, Default)]
struct Env {
    vars: Vec<(String, String)>,
}

impl Env {
    fn set(&mut self, name: &str, value: String) {
        match self.vars.iter_mut().find(|(key, _)| key == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name.to_owned(), value)),
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, v)| v.as_str())
    }
}

fn var_value(
    var: &EnvVar,
    pod: &Pod,
    node: &str,
    namespace: &str,
    sources: &Sources,
    env: &Env,
) -> Result<Option<String>, String> {
    let Some(source) = &var.value_from else {
        return Ok(Some(expand(
            var.value.as_deref().unwrap_or_default(),
            |name| env.get(name),
        )));
    };
    from_source(source, pod, node, namespace, sources)
}

fn from_source(
    source: &EnvVarSource,
    pod: &Pod,
    node: &str,
    namespace: &str,
    sources: &Sources,
) -> Result<Option<String>, String> {
    if let Some(key) = &source.secret_key_ref {
        let optional = key.optional == Some(true);
        let Some(data) = found(&sources.secrets, &key.name) else {
            return missing(optional, format!("secret \"{}\" not found", key.name));
        };
        return match data.get(&key.key) {
            Some(value) => Ok(Some(text(value))),
            None => missing(
                optional,
                format!(
                    "couldn't find key {} in Secret {namespace}/{}",
                    key.key, key.name
                ),
            ),
        };
    }
    if let Some(key) = &source.config_map_key_ref {
        let optional = key.optional == Some(true);
        let Some(data) = found(&sources.config_maps, &key.name) else {
            return missing(optional, format!("configmap \"{}\" not found", key.name));
        };
        return match data.get(&key.key) {
            Some(value) => Ok(Some(text(value))),
            None => missing(
                optional,
                format!(
                    "couldn't find key {} in ConfigMap {namespace}/{}",
                    key.key, key.name
                ),
            ),
        };
    }
    if let Some(field) = &source.field_ref {
        return pod_field(pod, node, &field.field_path).map(Some);
    }
    Err("resourceFieldRef and fileKeyRef are not supported by local-kubelet".to_owned())
}

fn missing(optional: bool, why: String) -> Result<Option<String>, String> {
    if optional { Ok(None) } else { Err(why) }
}

/// A field of the Pod for the downward API (`fieldRef.fieldPath`).
pub fn pod_field(pod: &Pod, node: &str, path: &str) -> Result<String, String> {
    let meta = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    let keyed = |prefix: &str, map: &Option<BTreeMap<String, String>>| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(
            map.as_ref()
                .and_then(|m| m.get(key))
                .cloned()
                .unwrap_or_default(),
        )
    };
    if let Some(value) = keyed("metadata.labels['", &meta.labels) {
        return Ok(value);
    }
    if let Some(value) = keyed("metadata.annotations['", &meta.annotations) {
        return Ok(value);
    }
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => lines(&meta.labels),
        "metadata.annotations" => lines(&meta.annotations),
        "spec.nodeName" => node.to_owned(),
        "spec.serviceAccountName" => spec.service_account_name.unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" | "status.podIP" | "status.podIPs" => POD_IP.to_owned(),
        other => {
            return Err(format!(
                "fieldRef {other} is not supported by local-kubelet"
            ));
        }
    })
}

/// Labels or annotations as the downward API writes them: `key="value"` lines, sorted.
fn lines(map: &Option<BTreeMap<String, String>>) -> String {
    map.iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn found<'a>(
    map: &'a BTreeMap<String, Option<BTreeMap<String, Vec<u8>>>>,
    name: &str,
) -> Option<&'a BTreeMap<String, Vec<u8>>> {
    map.get(name).and_then(Option::as_ref)
}

fn text(value: &[u8]) -> String {
    String::from_utf8_lossy(value).into_owned()
}

/// A C identifier-ish name the kubelet accepts from `envFrom` (letters, digits, `_`, `-`,
/// `.`; not starting with a digit).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::test_support::container;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1",
                         "labels": {"app": "x", "b": "y"}},
            "spec": {"serviceAccountName": "sa", "containers": []}
        }))
        .unwrap()
    }

    fn sources() -> Sources {
        Sources {
            secrets: BTreeMap::from([
                (
                    "llm".to_owned(),
                    Some(BTreeMap::from([("api-key".to_owned(), b"sk-1".to_vec())])),
                ),
                ("gone".to_owned(), None),
            ]),
            config_maps: BTreeMap::from([(
                "settings".to_owned(),
                Some(BTreeMap::from([
                    ("MODE".to_owned(), b"fast".to_vec()),
                    ("1bad".to_owned(), b"skipped".to_vec()),
                ])),
            )]),
        }
    }

    fn api() -> ApiServer {
        ApiServer {
            host: "127.0.0.1".to_owned(),
            port: 36443,
        }
    }

    fn get<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn env_comes_from_values_secrets_config_maps_and_the_pod() {
        let c = container(json!({"name": "c",
        "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "S_"}],
        "env": [
            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "api-key"}}},
            {"name": "URL", "value": "http://$(POD_NAME)/$(NOPE)/$$(KEY)"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "SEEN", "value": "$(POD_NAME) $(S_MODE)"},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "HOME", "value": "/tmp"},
            {"name": "MAYBE", "valueFrom": {"secretKeyRef":
                {"name": "gone", "key": "k", "optional": true}}}
        ]}));
        let env = container_env(&pod(), "node-1", &api(), &c, &sources()).unwrap();
        assert_eq!(get(&env, "KEY"), Some("sk-1"));
        assert_eq!(
            get(&env, "URL"),
            Some("http://$(POD_NAME)/$(NOPE)/$(KEY)"),
            "only what is defined before expands"
        );
        assert_eq!(get(&env, "SEEN"), Some("p fast"));
        assert_eq!(get(&env, "APP"), Some("x"));
        assert_eq!(get(&env, "NODE"), Some("node-1"));
        assert_eq!(get(&env, "S_MODE"), Some("fast"));
        assert_eq!(
            get(&env, "S_1bad"),
            Some("skipped"),
            "prefixed, it is valid"
        );
        assert_eq!(
            get(&env, "HOME"),
            Some("/tmp"),
            "the Pod wins over the defaults"
        );
        assert_eq!(get(&env, "HOSTNAME"), Some("p"));
        assert_eq!(get(&env, "PATH"), Some(DEFAULT_PATH));
        assert_eq!(get(&env, "MAYBE"), None);
        assert_eq!(env.iter().filter(|(k, _)| k == "HOME").count(), 1);
    }

    #[test]
    fn a_missing_secret_or_key_is_a_config_error_naming_it() {
        let missing = |var: serde_json::Value| {
            container_env(
                &pod(),
                "n",
                &api(),
                &container(json!({"name": "c", "env": [var]})),
                &sources(),
            )
            .unwrap_err()
        };
        assert_eq!(
            missing(
                json!({"name": "A", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}})
            ),
            "secret \"gone\" not found"
        );
        assert_eq!(
            missing(
                json!({"name": "A", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "k"}}})
            ),
            "couldn't find key k in Secret ns/llm"
        );
        assert_eq!(
            missing(
                json!({"name": "A", "valueFrom": {"configMapKeyRef": {"name": "other", "key": "k"}}})
            ),
            "configmap \"other\" not found"
        );
    }

    #[test]
    fn referenced_names_every_source() {
        let c = container(json!({"name": "c",
            "envFrom": [{"secretRef": {"name": "a"}}, {"configMapRef": {"name": "b"}}],
            "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "c", "key": "k"}}},
                    {"name": "Y", "valueFrom": {"configMapKeyRef": {"name": "d", "key": "k"}}}]}));
        let (secrets, maps) = referenced(&c);
        assert_eq!(secrets, BTreeSet::from(["a".to_owned(), "c".to_owned()]));
        assert_eq!(maps, BTreeSet::from(["b".to_owned(), "d".to_owned()]));
    }

    #[test]
    fn the_command_line_expands_and_needs_a_command() {
        let env = vec![("MSG".to_owned(), "hi".to_owned())];
        let c = container(json!({"name": "c", "command": ["/bin/sh", "-c"],
                                 "args": ["echo $(MSG) $MSG $(OTHER)"]}));
        assert_eq!(
            argv(&c, &env).unwrap(),
            ["/bin/sh", "-c", "echo hi $MSG $(OTHER)"]
        );
        let no_command = container(json!({"name": "c", "args": ["x"]}));
        assert!(argv(&no_command, &env).unwrap_err().contains("no command"));
        let runner_image = container(
            json!({"name": "c", "image": "ghcr.io/herd-dev/herd-runner:0.1.0",
                                            "args": ["x"]}),
        );
        assert!(
            argv(&runner_image, &env)
                .unwrap_err()
                .contains("no command")
        );
    }

    #[test]
    fn the_operator_image_runs_its_entrypoint_with_the_args() {
        let env = vec![("NS".to_owned(), "herd".to_owned())];
        let operator = container(json!({"name": "operator",
            "image": "ghcr.io/herd-dev/herd-operator:0.1.0",
            "args": ["--lease-namespace=$(NS)", "--log-format=json"]}));
        assert_eq!(
            argv(&operator, &env).unwrap(),
            [
                "/herd-operator",
                "--lease-namespace=herd",
                "--log-format=json"
            ]
        );
        let mut overridden = operator.clone();
        overridden.command = Some(vec!["/bin/sh".to_owned(), "-c".to_owned()]);
        assert_eq!(
            argv(&overridden, &env).unwrap()[0],
            "/bin/sh",
            "a command replaces the entrypoint"
        );
    }

    #[test]
    fn every_container_finds_the_api_server_unless_the_pod_says_otherwise() {
        let plain = container(json!({"name": "c",
            "env": [{"name": "API", "value": "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"}]}));
        let env = container_env(&pod(), "n", &api(), &plain, &sources()).unwrap();
        assert_eq!(get(&env, "KUBERNETES_SERVICE_HOST"), Some("127.0.0.1"));
        assert_eq!(get(&env, "KUBERNETES_SERVICE_PORT"), Some("36443"));
        assert_eq!(get(&env, "API"), Some("https://127.0.0.1:36443"));
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "PATH",
                "HOSTNAME",
                "HOME",
                "KUBERNETES_SERVICE_HOST",
                "KUBERNETES_SERVICE_PORT",
                "API"
            ],
            "nothing else, and nothing from the kubelet's own environment (no KUBECONFIG)"
        );
        let own = container(json!({"name": "c",
            "env": [{"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]}));
        let env = container_env(&pod(), "n", &api(), &own, &sources()).unwrap();
        assert_eq!(get(&env, "KUBERNETES_SERVICE_PORT"), Some("6443"));
    }

    #[test]
    fn expansion_follows_kubernetes() {
        let lookup = |name: &str| match name {
            "A" => Some("1"),
            "" => Some("empty"),
            _ => None,
        };
        for (input, want) in [
            ("$(A)", "1"),
            ("x$(A)y$(A)", "x1y1"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$1"),
            ("$(B)", "$(B)"),
            ("$(A", "$(A"),
            ("$A", "$A"),
            ("$", "$"),
            ("a$", "a$"),
            ("$()", "empty"),
            ("é$(A)é", "é1é"),
            ("$é", "$é"),
        ] {
            assert_eq!(expand(input, lookup), want, "{input}");
        }
    }

    #[test]
    fn downward_fields() {
        assert_eq!(pod_field(&pod(), "n", "metadata.uid").unwrap(), "u-1");
        assert_eq!(
            pod_field(&pod(), "n", "metadata.labels").unwrap(),
            "app=\"x\"\nb=\"y\""
        );
        assert_eq!(pod_field(&pod(), "n", "status.podIP").unwrap(), POD_IP);
        assert_eq!(
            pod_field(&pod(), "n", "spec.serviceAccountName").unwrap(),
            "sa"
        );
        assert!(pod_field(&pod(), "n", "metadata.generation").is_err());
    }
}
