//! The `scripted` model of a scenario's Agent: its script in a ConfigMap the Agent's
//! `model.scriptFrom` names, travelling through the snapshot and the run API's `config`.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// The name of the script's ConfigMap.
const SCRIPT_CONFIG_MAP: &str = "script";

/// Creates the ConfigMap holding `script` in `namespace`.
pub async fn script_config_map(
    admin: &kube::Client,
    namespace: &str,
    script: &str,
) -> anyhow::Result<()> {
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": SCRIPT_CONFIG_MAP}, "data": {"script.yaml": script},
    }))?;
    Api::<ConfigMap>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &config_map)
        .await?;
    Ok(())
}

/// The Agent spec fields of a scripted model, over `extra`'s.
pub fn scripted_agent(extra: Value) -> Value {
    let mut spec = json!({"model": {"provider": "scripted", "name": "script",
        "scriptFrom": {"configMapKeyRef": {"name": SCRIPT_CONFIG_MAP, "key": "script.yaml"}}}});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    spec
}
