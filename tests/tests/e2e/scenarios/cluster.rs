//! One scenario's cluster side: a leading operator whose run API listens on a loopback port
//! its Pods are told (`--run-api-url`), and a `local-kubelet` process for the test's namespace.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use herd_crds::run::Run;
use herd_e2e::TestEnv;
use herd_e2e::local_kubelet::LocalKubelet;
use herd_operator::Running;
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::leaks;
use crate::operator::run_fixtures::create_agent_spec;
use crate::operator::support::{Rbac, operator_client, start_leader, test_config};

/// The model key every scenario's Agent is given; it must never be seen outside the Secret and
/// the `agent` container's environment.
pub const MODEL_KEY: &str = "sk-e2e-secret-value";

/// How long an aborted operator may hold its run API's port.
const PORT_FREE: Duration = Duration::from_secs(10);

/// The operator and the kubelet of one scenario.
pub struct Scenario {
    pub admin: Client,
    pub namespace: String,
    operator: Running,
    /// What the operator was started with, to start it again.
    operator_start: (herd_operator::Config, Client),
    kubelet: LocalKubelet,
}

impl Scenario {
    /// Starts the operator (run API on a free loopback port, valid for 127.0.0.1) and a
    /// `local-kubelet` for the test's namespace, and creates the Agent `helper` with `spec`'s
    /// fields over a plain one (its model key a labelled Secret holding [`MODEL_KEY`]).
    pub async fn start(env: &TestEnv, spec: Value) -> anyhow::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        leaks::capture_operator_logs();
        let admin = env.client();
        let namespace = env.namespace().to_owned();
        let operator = operator_client(
            &admin,
            env.cluster().kubeconfig(),
            &namespace,
            Rbac::Namespaced,
        )
        .await?;
        let mut config = test_config(&[&namespace], &namespace, "only")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        config.run_api_addr = format!("127.0.0.1:{port}").parse()?;
        config.runs.run_api_url = format!("https://127.0.0.1:{port}");
        let operator_start = (config.clone(), operator.clone());
        let running = start_leader(config, operator).await?;

        let kubelet =
            LocalKubelet::start(env, Path::new(env!("CARGO_BIN_EXE_local-kubelet"))).await?;

        let mut model = json!({"apiKeySecretRef": {"name": "model-key", "key": "api-key"}});
        if let (Some(model), Some(given)) = (
            model.as_object_mut(),
            spec.get("model").and_then(Value::as_object),
        ) {
            model.extend(given.clone());
        }
        let mut full = spec;
        full["model"] = model;
        create_agent_spec(&admin, &namespace, full).await?;
        Ok(Scenario {
            admin,
            namespace,
            operator: running,
            operator_start,
            kubelet,
        })
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
                    _ = check.tick() => self.kubelet.check_running()?,
                }
            }
        };
        let run = tokio::time::timeout(timeout, wait)
            .await
            .with_context(|| {
                format!(
                    "Run {name} did not {what} within {timeout:?}; the kubelet's log ends:\n{}",
                    herd_e2e::dump::tail(self.kubelet.log(), 40)
                )
            })??;
        if !done(&run) {
            anyhow::bail!(
                "Run {name} ended before it could {what}: {}; the kubelet's log ends:\n{}",
                crate::operator::run_fixtures::message(&run),
                herd_e2e::dump::tail(self.kubelet.log(), 40)
            );
        }
        Ok(run)
    }

    /// Every file a container wrote that a user could read: each container's output and
    /// termination message, and the kubelet's own log (which repeats the containers' output).
    pub fn container_outputs(&self) -> anyhow::Result<Vec<PathBuf>> {
        let mut found = vec![self.kubelet.log().to_owned()];
        for entry in walkdir::WalkDir::new(self.kubelet.state()) {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy();
            if entry.file_type().is_file() && (name == "output.log" || name == "termination-log") {
                found.push(entry.path().to_owned());
            }
        }
        Ok(found)
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
