//! What an Agent refers to (Secrets, ConfigMap keys) and whether its spec can be used at all.

use herd_crds::agent::{AgentSpec, ModelSpec, Provider};

/// A Secret an Agent needs: where the reference is written, and the Secret's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRef {
    /// The field, e.g. `spec.model.apiKeySecretRef`.
    pub field: String,
    /// The Secret's name.
    pub name: String,
}

/// A ConfigMap key an Agent needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigMapKey {
    /// The field, e.g. `spec.soulFrom`.
    pub field: String,
    /// The ConfigMap's name.
    pub name: String,
    /// The key.
    pub key: String,
}

/// Why the spec cannot be used, beyond what the API server's schema checks: the CEL rules
/// (for objects that reached the cluster before a rule existed), a missing model when the
/// operator has no default, and a scripted model without its script.
pub fn spec_error(spec: &AgentSpec, default_model: Option<&ModelSpec>) -> Option<String> {
    let mut errors = Vec::new();
    if let Err(e) = spec.validate() {
        errors.push(e.to_string());
    }
    match &spec.model {
        None if default_model.is_none() => errors.push(
            "spec.model is absent and the operator has no default model \
             (--default-model-provider and --default-model-name)"
                .to_owned(),
        ),
        None if default_model.is_some_and(|model| model.provider == Provider::Scripted) => errors
            .push(
                "the operator's default model is scripted, which needs spec.model.scriptFrom"
                    .to_owned(),
            ),
        Some(model) if model.provider == Provider::Scripted && model.script_from.is_none() => {
            errors.push("spec.model.scriptFrom is required with provider scripted".to_owned());
        }
        _ => {}
    }
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// Every Secret the Agent's pods would need: the model's key (the operator's default model's,
/// looked up in the Agent's namespace, when `spec.model` is absent), the web search key and
/// the MCP servers' headers.
pub fn secret_refs(spec: &AgentSpec, default_model: Option<&ModelSpec>) -> Vec<SecretRef> {
    let mut refs = Vec::new();
    match &spec.model {
        Some(model) => {
            if let Some(secret) = &model.api_key_secret_ref {
                refs.push(SecretRef {
                    field: "spec.model.apiKeySecretRef".into(),
                    name: secret.name.clone(),
                });
            }
        }
        None => {
            if let Some(name) = default_model
                .and_then(|model| model.api_key_secret_ref.as_ref())
                .map(|secret| secret.name.as_str())
                .filter(|n| !n.is_empty())
            {
                refs.push(SecretRef {
                    field: "the operator's default model".into(),
                    name: name.to_owned(),
                });
            }
        }
    }
    if let Some(secret) = spec
        .tools
        .as_ref()
        .and_then(|t| t.web_search.as_ref())
        .and_then(|w| w.api_key_secret_ref.as_ref())
    {
        refs.push(SecretRef {
            field: "spec.tools.webSearch.apiKeySecretRef".into(),
            name: secret.name.clone(),
        });
    }
    let servers = spec.mcp.iter().flat_map(|mcp| mcp.servers.iter());
    for (i, server) in servers.enumerate() {
        for (j, header) in server.headers.iter().enumerate() {
            refs.push(SecretRef {
                field: format!("spec.mcp.servers[{i}].headers[{j}].secretKeyRef"),
                name: header.secret_key_ref.name.clone(),
            });
        }
    }
    refs
}

/// Every ConfigMap key the Agent reads: `soulFrom` and `model.scriptFrom`.
pub fn config_map_keys(spec: &AgentSpec) -> Vec<ConfigMapKey> {
    let mut keys = Vec::new();
    if let Some(from) = &spec.soul_from {
        keys.push(ConfigMapKey {
            field: "spec.soulFrom".into(),
            name: from.config_map_key_ref.name.clone(),
            key: from.config_map_key_ref.key.clone(),
        });
    }
    if let Some(from) = spec.model.as_ref().and_then(|m| m.script_from.as_ref()) {
        keys.push(ConfigMapKey {
            field: "spec.model.scriptFrom".into(),
            name: from.config_map_key_ref.name.clone(),
            key: from.config_map_key_ref.key.clone(),
        });
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: serde_json::Value) -> AgentSpec {
        serde_json::from_value(yaml).unwrap()
    }

    /// The operator's default model when it has a name: OpenAI, with `secret` as its key.
    fn default_model(name: Option<&str>, secret: Option<&str>) -> Option<ModelSpec> {
        let mut model: ModelSpec =
            serde_json::from_value(serde_json::json!({"provider": "openai", "name": name?}))
                .unwrap();
        model.api_key_secret_ref = secret.map(|name| herd_crds::refs::SecretKeyRef {
            name: name.into(),
            key: "api-key".into(),
        });
        Some(model)
    }

    #[test]
    fn a_model_is_required_somewhere() {
        let bare = spec(serde_json::json!({}));
        let error = spec_error(&bare, default_model(None, None).as_ref()).unwrap();
        assert!(error.contains("--default-model-name"), "{error}");
        assert_eq!(
            spec_error(&bare, default_model(Some("m"), None).as_ref()),
            None
        );
        let own = spec(serde_json::json!({"model": {"provider": "openai", "name": "m"}}));
        assert_eq!(spec_error(&own, default_model(None, None).as_ref()), None);
    }

    #[test]
    fn scripted_needs_a_script() {
        let scripted = spec(serde_json::json!({"model": {"provider": "scripted", "name": "s"}}));
        assert!(spec_error(&scripted, None).is_some());
        let with_script = spec(
            serde_json::json!({"model": {"provider": "scripted", "name": "s",
            "scriptFrom": {"configMapKeyRef": {"name": "script", "key": "s.yaml"}}}}),
        );
        assert_eq!(spec_error(&with_script, None), None);
        let mut scripted_default = default_model(Some("s"), None);
        if let Some(model) = &mut scripted_default {
            model.provider = Provider::Scripted;
        }
        assert!(spec_error(&spec(serde_json::json!({})), scripted_default.as_ref()).is_some());
    }

    #[test]
    fn cel_rules_are_rechecked() {
        let both = spec(
            serde_json::json!({"model": {"provider": "openai", "name": "m"},
            "soul": "x", "soulFrom": {"configMapKeyRef": {"name": "a", "key": "b"}}}),
        );
        assert!(spec_error(&both, None).is_some());
    }

    #[test]
    fn secrets_of_the_model_the_default_model_and_web_search() {
        let own = spec(serde_json::json!({
            "model": {"provider": "openai", "name": "m", "apiKeySecretRef": {"name": "k", "key": "v"}},
            "tools": {"webSearch": {"provider": "tavily", "apiKeySecretRef": {"name": "t", "key": "v"}}}
        }));
        let refs = secret_refs(&own, default_model(Some("d"), Some("default-key")).as_ref());
        let names: Vec<_> = refs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["k", "t"], "an own model ignores the default's key");
        let bare = spec(serde_json::json!({}));
        let refs = secret_refs(
            &bare,
            default_model(Some("d"), Some("default-key")).as_ref(),
        );
        assert_eq!(
            refs,
            vec![SecretRef {
                field: "the operator's default model".into(),
                name: "default-key".into()
            }]
        );
        assert!(secret_refs(&bare, default_model(Some("d"), None).as_ref()).is_empty());
        assert!(secret_refs(&bare, default_model(None, Some("k")).as_ref()).is_empty());
    }

    #[test]
    fn secrets_of_mcp_headers_name_their_field() {
        let agent = spec(serde_json::json!({
            "model": {"provider": "openai", "name": "m"},
            "mcp": {"servers": [
                {"name": "time", "command": ["t"]},
                {"name": "docs", "url": "http://d/mcp", "headers": [
                    {"name": "Authorization", "secretKeyRef": {"name": "docs-token", "key": "t"}},
                    {"name": "X-Team", "secretKeyRef": {"name": "team", "key": "id"}}]}]}
        }));
        let refs = secret_refs(&agent, None);
        assert_eq!(
            refs,
            vec![
                SecretRef {
                    field: "spec.mcp.servers[1].headers[0].secretKeyRef".into(),
                    name: "docs-token".into()
                },
                SecretRef {
                    field: "spec.mcp.servers[1].headers[1].secretKeyRef".into(),
                    name: "team".into()
                },
            ]
        );
    }

    #[test]
    fn config_map_keys_of_soul_and_script() {
        let agent = spec(serde_json::json!({
            "model": {"provider": "scripted", "name": "s",
                "scriptFrom": {"configMapKeyRef": {"name": "script", "key": "s.yaml"}}},
            "soulFrom": {"configMapKeyRef": {"name": "soul", "key": "SOUL.md"}}
        }));
        let keys = config_map_keys(&agent);
        assert_eq!(keys.len(), 2);
        assert_eq!(
            (keys[0].name.as_str(), keys[0].key.as_str()),
            ("soul", "SOUL.md")
        );
        assert_eq!(keys[1].field, "spec.model.scriptFrom");
        assert!(config_map_keys(&spec(serde_json::json!({}))).is_empty());
    }
}
