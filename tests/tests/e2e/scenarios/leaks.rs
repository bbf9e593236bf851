//! Where a secret the `agent` container holds (the model key, an MCP server's header) must
//! never appear: the Run's status, the namespace's Events and ConfigMaps (the snapshot and the
//! result among them), the Pod's spec (which names the Secret and key only), the operator's
//! logs, and whatever the containers printed or left as their termination message.

use std::sync::{Mutex, OnceLock, PoisonError};

use anyhow::{Context, ensure};
use herd_crds::run::Run;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;

use super::cluster::{MODEL_KEY, Scenario};
use crate::operator::run_fixtures::container;

/// Everything every in-process operator of this test binary logged, at debug and above.
static OPERATOR_LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// A writer appending to [`OPERATOR_LOGS`].
struct LogSink;

impl std::io::Write for LogSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        OPERATOR_LOGS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// From the first call on, the operator's logs (debug and above, as JSON lines like in a
/// cluster) are kept for [`assert_secrets_nowhere`].
pub fn capture_operator_logs() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let subscriber = tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(|| LogSink),
            )
            .with(Targets::new().with_target("herd_operator", tracing::Level::DEBUG));
        // Another test of the binary may have installed one first: then nothing is kept, and
        // the check below finds the logs empty and says so.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// A secret value, and how the `agent` container gets it: the variable `env` from a
/// `secretKeyRef` to the Secret `secret`.
#[derive(Clone, Copy, Debug)]
pub struct SecretUse<'a> {
    pub value: &'a str,
    pub env: &'a str,
    pub secret: &'a str,
}

/// The model key every scenario's Agent is given ([`MODEL_KEY`]).
pub const MODEL_SECRET: SecretUse<'static> = SecretUse {
    value: MODEL_KEY,
    env: "HERD_MODEL_API_KEY",
    secret: "model-key",
};

/// Fails naming the first place outside its Secret where one of `secrets` is seen, for the Run
/// `run` of `scenario` (finished: its Pod has run), or the first that reaches the `agent`
/// container otherwise than through `secretKeyRef`.
pub async fn assert_secrets_nowhere(
    scenario: &Scenario,
    run: &Run,
    secrets: &[SecretUse<'_>],
) -> anyhow::Result<()> {
    let namespace = &scenario.namespace;
    let absent = |what: &str, text: &str| -> anyhow::Result<()> {
        for secret in secrets {
            ensure!(
                !text.contains(secret.value),
                "the value of {} (Secret {}) is in {what}",
                secret.env,
                secret.secret
            );
        }
        Ok(())
    };
    absent("the Run", &serde_json::to_string(run)?)?;

    let events: Api<Event> = Api::namespaced(scenario.admin.clone(), namespace);
    for event in events.list(&ListParams::default()).await? {
        absent(
            &format!("the Event {}", event.name_any()),
            &serde_json::to_string(&event)?,
        )?;
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(scenario.admin.clone(), namespace);
    let mut names = Vec::new();
    for config_map in config_maps.list(&ListParams::default()).await? {
        let mut text = serde_json::to_string(&config_map)?;
        for bytes in config_map.binary_data.iter().flat_map(|d| d.values()) {
            text.push_str(&String::from_utf8_lossy(&bytes.0));
        }
        absent(&format!("the ConfigMap {}", config_map.name_any()), &text)?;
        names.push(config_map.name_any());
    }
    let run_name = run.name_any();
    for expected in [format!("{run_name}-snapshot"), format!("{run_name}-result")] {
        ensure!(
            names.contains(&expected),
            "no ConfigMap {expected}: {names:?}"
        );
    }

    let pods: Api<Pod> = Api::namespaced(scenario.admin.clone(), namespace);
    let pod = pods.get(&Scenario::pod_name(run)).await?;
    let pod = serde_json::to_value(&pod)?;
    absent("the Pod", &pod.to_string())?;
    let agent = container(&pod, "containers", "agent")?;
    for secret in secrets {
        let var = agent["env"]
            .as_array()
            .and_then(|env| env.iter().find(|e| e["name"] == secret.env))
            .with_context(|| format!("the agent container has no {}", secret.env))?;
        ensure!(
            var.get("value").is_none() && var["valueFrom"]["secretKeyRef"]["name"] == secret.secret,
            "{} reaches the agent only through secretKeyRef to {}: {var}",
            secret.env,
            secret.secret
        );
    }
    let termination: Vec<String> = pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["state"]["terminated"]["message"].to_string())
        .collect();
    absent("a termination message", &termination.join("\n"))?;

    let logs = OPERATOR_LOGS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    ensure!(
        !logs.is_empty(),
        "no operator log was captured (another subscriber was installed first)"
    );
    absent("the operator's logs", &String::from_utf8_lossy(&logs))?;

    let outputs = scenario.container_outputs().await?;
    let at_least = if scenario.on_real_node() { 2 } else { 3 };
    ensure!(
        outputs.len() >= at_least,
        "the two containers' outputs (and local-kubelet's log): {:?}",
        outputs.iter().map(|(at, _)| at).collect::<Vec<_>>()
    );
    for (at, text) in outputs {
        absent(&at, &text)?;
    }
    Ok(())
}
