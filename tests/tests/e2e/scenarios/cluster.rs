//! One scenario's cluster side: a leading operator (in-process, under the chart's RBAC) whose
//! run API listens where the scenario's Pods reach it (`--run-api-url`), and what runs those
//! Pods: the real node (`HERD_E2E_NODE`, the run API on the node's bridge address, the images
//! `scripts/e2e-node` imported), or else a `local-kubelet` process for the test's namespace (the
//! run API on loopback, which its containers share).

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use herd_crds::run::Run;
use herd_e2e::TestEnv;
use herd_e2e::local_kubelet::LocalKubelet;
use herd_e2e::node::{RealNode, container_logs};
use herd_operator::Running;
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::leaks;
use crate::operator::run_fixtures::create_agent_spec;
use crate::operator::support::{Clients, Rbac, start_leader, test_config};

/// The model key every scenario's Agent is given; it must never be seen outside the Secret and
/// the `agent` container's environment.
pub const MODEL_KEY: &str = "sk-e2e-secret-value";

/// How long an aborted operator may hold its run API's port.
const PORT_FREE: Duration = Duration::from_secs(10);

/// Who runs the scenario's Pods.
enum Kubelet {
    /// The real node's kubelet, on containerd.
    Real,
    /// `local-kubelet`, on this machine's processes.
    Local(LocalKubelet),
}

/// The operator and the kubelet of one scenario.
pub struct Scenario {
    pub admin: Client,
    pub namespace: String,
    operator: Running,
    /// What the operator was started with, to start it again.
    operator_start: (herd_operator::Config, Client),
    kubelet: Kubelet,
    /// Where Pods reach this machine: the node's address, or loopback under `local-kubelet`.
    host: std::net::IpAddr,
}

impl Scenario {
    /// Starts the operator (run API on a free port where the Pods reach it) and, without a real
    /// node, a `local-kubelet` for the test's namespace, and creates the Agent `helper` with
    /// `spec`'s fields over a plain one (its model key a labelled Secret holding [`MODEL_KEY`]).
    pub async fn start(env: &TestEnv, spec: Value) -> anyhow::Result<Self> {
        let mut scenario = Self::start_operator(env, |_| Ok(())).await?;
        scenario.create_helper(spec).await?;
        Ok(scenario)
    }

    /// Starts the operator as [`Scenario::start`] does, with `adjust` changing its settings
    /// first (a flag under test), and creates no Agent.
    pub async fn start_operator(
        env: &TestEnv,
        adjust: impl FnOnce(&mut herd_operator::Config) -> anyhow::Result<()>,
    ) -> anyhow::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        leaks::capture_operator_logs();
        let Clients {
            operator,
            admin,
            namespace,
        } = Clients::new(env, Rbac::Namespaced).await?;
        let mut config = test_config(&[&namespace], &namespace, "only")?;
        let (host, kubelet) = match env.node() {
            Some(node) => {
                config.runs.runner_image = RealNode::image("runner");
                config.runs.sandbox_image = RealNode::image("sandbox");
                config.runs.run_api_cidr = Some(format!("{}/32", node.node_ip()));
                (node.node_ip(), Kubelet::Real)
            }
            None => (
                std::net::Ipv4Addr::LOCALHOST.into(),
                Kubelet::Local(
                    LocalKubelet::start(env, Path::new(env!("CARGO_BIN_EXE_local-kubelet")))
                        .await?,
                ),
            ),
        };
        let address = std::net::TcpListener::bind((host, 0))?.local_addr()?;
        config.run_api_addr = address;
        config.runs.run_api_port = i32::from(address.port());
        config.runs.run_api_url = format!("https://{address}");
        adjust(&mut config)?;
        let operator_start = (config.clone(), operator.clone());
        let running = start_leader(config, operator).await?;
        Ok(Scenario {
            admin,
            namespace,
            operator: running,
            operator_start,
            kubelet,
            host,
        })
    }

    /// Creates the Agent `helper` with `spec`'s fields over a plain one (its model key a
    /// labelled Secret holding [`MODEL_KEY`]).
    pub async fn create_helper(&mut self, spec: Value) -> anyhow::Result<()> {
        let mut model = json!({"apiKeySecretRef": {"name": "model-key", "key": "api-key"}});
        if let (Some(model), Some(given)) = (
            model.as_object_mut(),
            spec.get("model").and_then(Value::as_object),
        ) {
            model.extend(given.clone());
        }
        let mut full = spec;
        full["model"] = model;
        create_agent_spec(&self.admin, &self.namespace, full).await
    }

    /// Where the scenario's Pods reach this machine: a server they must call listens here.
    pub fn host(&self) -> std::net::IpAddr {
        self.host
    }

    /// Whether the Pods run on the real node.
    pub fn on_real_node(&self) -> bool {
        matches!(self.kubelet, Kubelet::Real)
    }

    /// Creates the Run `name` of `helper` with `task`.
    pub async fn create_run(&self, name: &str, task: &str) -> anyhow::Result<()> {
        self.create_run_with(name, json!({"task": task})).await
    }

    /// Creates the Run `name` of `helper` with `spec`'s fields.
    pub async fn create_run_with(&self, name: &str, spec: Value) -> anyhow::Result<()> {
        let mut run = json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run", "metadata": {"name": name},
            "spec": {"agentRef": {"name": "helper"}},
        });
        if let (Some(full), Some(given)) = (run["spec"].as_object_mut(), spec.as_object()) {
            full.extend(given.clone());
        }
        let run: Run = serde_json::from_value(run)?;
        self.runs().create(&Default::default(), &run).await?;
        Ok(())
    }

    /// Stops the operator as a crash would (its Lease kept, its run API's connections cut) and
    /// starts it again with the same settings on the same run API address.
    pub async fn restart_operator(&mut self) -> anyhow::Result<()> {
        self.operator.abort();
        let _ = self.operator.wait().await;
        let (config, client) = self.operator_start.clone();
        // The aborted tasks let go of the run API's port as their cancellation reaches them.
        let port = config.run_api_addr;
        herd_e2e::wait::wait_for("the run API's port to be free", PORT_FREE, || async {
            Ok(std::net::TcpListener::bind(port).ok().map(drop))
        })
        .await?;
        self.operator = start_leader(config, client).await?;
        Ok(())
    }

    /// The Runs of the namespace.
    pub fn runs(&self) -> Api<Run> {
        Api::namespaced(self.admin.clone(), &self.namespace)
    }

    /// Waits, for at most `timeout`, until the Run `name` has a `Succeeded` condition that is
    /// not `Unknown`; fails early when the kubelet has exited.
    pub async fn finished(&mut self, name: &str, timeout: Duration) -> anyhow::Result<Run> {
        self.until(name, "finish", timeout, ended).await
    }

    /// Waits, for at most `timeout`, until the Run `name` is as `done` says (`what` it is
    /// waited for, for the error); fails early when the kubelet has exited or the Run ended
    /// otherwise.
    pub async fn until(
        &mut self,
        name: &str,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Run) -> bool,
    ) -> anyhow::Result<Run> {
        let runs = self.runs();
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut events = watcher(runs, config).boxed();
        let wait = async {
            let mut check = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    event = events.next() => match event {
                        Some(Ok(watcher::Event::Apply(run) | watcher::Event::InitApply(run)))
                            if done(&run) || ended(&run) => return Ok(run),
                        Some(Err(error)) => return Err(anyhow::Error::from(error)),
                        None => anyhow::bail!("the watch of Run {name} ended"),
                        Some(Ok(_)) => {}
                    },
                    _ = check.tick() => self.check_kubelet()?,
                }
            }
        };
        let Ok(run) = tokio::time::timeout(timeout, wait).await else {
            anyhow::bail!(
                "Run {name} did not {what} within {timeout:?}; {}",
                self.containers_said().await
            );
        };
        let run = run?;
        if !done(&run) {
            anyhow::bail!(
                "Run {name} ended before it could {what}: {}; {}",
                crate::operator::run_fixtures::message(&run),
                self.containers_said().await
            );
        }
        Ok(run)
    }

    /// `Err` with the end of its log when `local-kubelet` has exited.
    fn check_kubelet(&mut self) -> anyhow::Result<()> {
        match &mut self.kubelet {
            Kubelet::Local(kubelet) => kubelet.check_running(),
            Kubelet::Real => Ok(()),
        }
    }

    /// The end of what the containers printed, for a failure message.
    pub async fn containers_said(&self) -> String {
        match &self.kubelet {
            Kubelet::Local(kubelet) => format!(
                "the kubelet's log ends:\n{}",
                herd_e2e::dump::tail(kubelet.log(), 40)
            ),
            Kubelet::Real => {
                let mut said = String::from("the containers' logs end:\n");
                for (container, text) in container_logs(&self.admin, &self.namespace).await {
                    let lines: Vec<&str> = text.lines().collect();
                    let tail = lines[lines.len().saturating_sub(20)..].join("\n");
                    said.push_str(&format!("--- {container}\n{tail}\n"));
                }
                said
            }
        }
    }

    /// Everything a container printed that a user could read, as `(where, text)`: on the real
    /// node each container's log through the API server (`kubectl logs`); under
    /// `local-kubelet` each container's output and termination message, and the kubelet's own
    /// log (which repeats the containers' output).
    pub async fn container_outputs(&self) -> anyhow::Result<Vec<(String, String)>> {
        let kubelet = match &self.kubelet {
            Kubelet::Real => {
                self.pods_ended().await?;
                return Ok(container_logs(&self.admin, &self.namespace).await);
            }
            Kubelet::Local(kubelet) => kubelet,
        };
        let mut files = vec![kubelet.log().to_owned()];
        for entry in walkdir::WalkDir::new(kubelet.state()) {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy();
            if entry.file_type().is_file() && (name == "output.log" || name == "termination-log") {
                files.push(entry.path().to_owned());
            }
        }
        files
            .into_iter()
            .map(|path| {
                let text = std::fs::read(&path).with_context(|| path.display().to_string())?;
                Ok((
                    path.display().to_string(),
                    String::from_utf8_lossy(&text).into_owned(),
                ))
            })
            .collect()
    }

    /// Waits until every Pod of the namespace has ended (phase `Succeeded` or `Failed`): a Run
    /// ends when its result is posted, a moment before its `agent` process exits and the
    /// kubelet stops the sandbox, and only then are their logs complete.
    async fn pods_ended(&self) -> anyhow::Result<()> {
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.admin.clone(), &self.namespace);
        herd_e2e::wait::wait_for("the Pods to end", Duration::from_secs(60), || async {
            let list = pods.list(&Default::default()).await?;
            let ended = list.items.iter().all(|pod| {
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                matches!(phase, Some("Succeeded" | "Failed"))
            });
            Ok(ended.then_some(()))
        })
        .await
    }

    /// The name of the scenario's Pod of `run`'s first attempt.
    pub fn pod_name(run: &Run) -> String {
        format!("{}-1", run.name_any())
    }
}

/// Whether the Run's `Succeeded` condition is True or False.
fn ended(run: &Run) -> bool {
    run.status.as_ref().is_some_and(|s| {
        herd_crds::condition::find_condition(&s.conditions, "Succeeded")
            .is_some_and(|c| c.status != herd_crds::condition::ConditionStatus::Unknown)
    })
}
