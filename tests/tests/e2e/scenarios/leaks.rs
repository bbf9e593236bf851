//! Where a model key must never appear: the Run's status, the namespace's Events and
//! ConfigMaps (the snapshot and the result among them), the Pod's spec (which names the Secret
//! and key only), the operator's logs, and whatever the containers printed or left as their
//! termination message.

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
/// cluster) are kept for [`assert_key_nowhere`].
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

/// Fails naming the first place outside the Secret where [`MODEL_KEY`] is seen, for the Run
/// `run` of `scenario` (finished: its Pod has run).
pub async fn assert_key_nowhere(scenario: &Scenario, run: &Run) -> anyhow::Result<()> {
    let namespace = &scenario.namespace;
    let absent = |what: &str, text: &str| -> anyhow::Result<()> {
        ensure!(!text.contains(MODEL_KEY), "the model key is in {what}");
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
    let key = agent["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == "HERD_MODEL_API_KEY"))
        .context("the agent container has no HERD_MODEL_API_KEY")?;
    ensure!(
        key.get("value").is_none() && key["valueFrom"]["secretKeyRef"]["name"] == "model-key",
        "the key reaches the agent only through secretKeyRef: {key}"
    );
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

    let outputs = scenario.container_outputs()?;
    ensure!(
        outputs.len() >= 3,
        "the kubelet's log and at least the two containers' outputs: {outputs:?}"
    );
    for path in outputs {
        let text = std::fs::read(&path).with_context(|| path.display().to_string())?;
        absent(&path.display().to_string(), &String::from_utf8_lossy(&text))?;
    }
    Ok(())
}
