//! References from Herd resources to other objects in the same namespace.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A key of a Secret in the Run's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Name of the Secret. It must carry the label `herd.dev/model-credentials: "true"`, or the
    /// Agent reports `ResolvedRefs=False` with reason `SecretNotAllowed`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key inside the Secret whose value is used (letters, digits, `-`, `_` and `.`).
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(crate::rules::CONFIG_KEY).message(crate::rules::expression(crate::rules::CONFIG_KEY_MESSAGE)))]
    pub key: String,
}

/// A key of a ConfigMap in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKeyRef {
    /// Name of the ConfigMap.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key inside the ConfigMap whose value is used (letters, digits, `-`, `_` and `.`).
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(crate::rules::CONFIG_KEY).message(crate::rules::expression(crate::rules::CONFIG_KEY_MESSAGE)))]
    pub key: String,
}

/// Text taken from a ConfigMap key instead of being written inline.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValueFrom {
    /// The ConfigMap key holding the text.
    pub config_map_key_ref: ConfigMapKeyRef,
}

/// A ConfigMap in the same namespace, referred to by name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapRef {
    /// Name of the ConfigMap.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}
