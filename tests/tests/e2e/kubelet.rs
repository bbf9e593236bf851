//! `local-kubelet` on the real API server, with plain Pods (no Herd Run): it binds them to its
//! Node, runs their containers as local processes from the Pod object alone (a ConfigMap
//! volume with `items[].path`, a Secret in the environment, an emptyDir shared by a native
//! sidecar and the main container, a projected token for audience `herd.dev`; the
//! ServiceAccount volume admission adds, and the API server's address, for in-cluster clients),
//! and reports their end in `pods/status`: Succeeded or Failed with exit codes and termination
//! messages, DeadlineExceeded, and SIGTERM on deletion.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use herd_e2e::local_kubelet::LocalKubelet;
use herd_e2e::wait::wait_for;
use herd_e2e::{E2eTest, TestEnv};
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::core::v1::{
    ConfigMap, ContainerStateTerminated, Node, Pod, Secret, ServiceAccount,
};
use kube::Api;
use kube::api::{DeleteParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![E2eTest::shared(
        "kubelet::runs_plain_pods_from_their_spec",
        runs_plain_pods_from_their_spec,
    )]
}

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_local-kubelet"))
}

/// What the `works` Pod's main container reports: the ConfigMap file, the Secret, whether the
/// sidecar's socket is there, the config volume's layout, and the token.
const REPORT: &str = r#"
greeting=$(cat /config/demo/dir/greeting)
data=$(readlink /config/demo/..data)
link=$(readlink /config/demo/dir)
if [ -S /run/herd/sandbox.sock ]; then socket=yes; else socket=no; fi
if [ -e /var/run/secrets/kubernetes.io ]; then account=yes; else account=no; fi
printf 'greeting=%s\npassword=%s\nsocket=%s\ndata=%s\nlink=%s\nhost=%s\naccount=%s\ntoken=%s\n' \
  "$greeting" "$PASSWORD" "$socket" "$data" "$link" "$HOSTNAME" "$account" \
  "$(cat /var/run/secrets/herd.dev/token)" > /dev/termination-log
"#;

/// What the `in-cluster` Pod's container reports: what an in-cluster client reads.
const IN_CLUSTER: &str = r#"
d=/var/run/secrets/kubernetes.io/serviceaccount
if [ -e "$HOME/.kube" ]; then kube=yes; else kube=no; fi
printf 'api=%s:%s\nnamespace=%s\nca=%s\ntoken=%s\nkubeconfig=%s %s\n' \
  "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" "$(cat $d/namespace)" \
  "$(tr -d '\n' < $d/ca.crt)" "$(cat $d/token)" "${KUBECONFIG-unset}" "$kube" \
  > /dev/termination-log
"#;

fn pod(name: &str, spec: serde_json::Value) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": spec
    }))?)
}

/// A container running `script` with the host's `/bin/sh`.
fn shell(name: &str, script: &str) -> serde_json::Value {
    json!({"name": name, "image": "host", "command": ["/bin/sh", "-c", script]})
}

/// The Pod that succeeds: `herd-runner sandbox` as a native sidecar with a startup probe, and
/// a main container reading everything the kubelet provides.
fn works() -> anyhow::Result<Pod> {
    let mut agent = shell("agent", REPORT);
    agent["env"] = json!([{"name": "PASSWORD", "valueFrom": {"secretKeyRef":
        {"name": "creds", "key": "password", "optional": false}}}]);
    agent["volumeMounts"] = json!([
        {"name": "config", "mountPath": "/config/demo"},
        {"name": "socket", "mountPath": "/run/herd"},
        {"name": "api", "mountPath": "/var/run/secrets/herd.dev", "readOnly": true}
    ]);
    agent["securityContext"] = json!({"readOnlyRootFilesystem": true, "runAsUser": 65532});
    pod(
        "works",
        json!({
            "restartPolicy": "Never",
            "serviceAccountName": "runner",
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 5,
            "initContainers": [{
                "name": "sandbox",
                "image": "host",
                "command": ["herd-runner", "sandbox"],
                "restartPolicy": "Always",
                "env": [{"name": "HOME", "value": "/tmp"}, {"name": "HERD_ROOT", "value": "/mnt"},
                        {"name": "HERD_SANDBOX_SOCKET", "value": "/run/herd/sandbox.sock"}],
                "startupProbe": {"exec": {"command": ["test", "-S", "/run/herd/sandbox.sock"]},
                                 "periodSeconds": 1, "failureThreshold": 30},
                "volumeMounts": [
                    {"name": "socket", "mountPath": "/run/herd"},
                    {"name": "workspace", "mountPath": "/mnt/user-data"},
                    {"name": "tmp", "mountPath": "/tmp"}
                ]
            }],
            "containers": [agent],
            "volumes": [
                {"name": "config", "configMap": {"name": "settings",
                    "items": [{"key": "greeting", "path": "dir/greeting"}]}},
                {"name": "socket", "emptyDir": {"medium": "Memory"}},
                {"name": "workspace", "emptyDir": {}},
                {"name": "tmp", "emptyDir": {}},
                {"name": "api", "projected": {"sources": [{"serviceAccountToken":
                    {"audience": "herd.dev", "expirationSeconds": 600, "path": "token"}}]}}
            ]
        }),
    )
}

/// The terminated state of the container `name` in `pod`.
fn terminated(pod: &Pod, name: &str) -> Option<ContainerStateTerminated> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .chain(status.init_container_statuses.iter())
        .flatten()
        .find(|c| c.name == name)?
        .state
        .as_ref()?
        .terminated
        .clone()
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

/// The `key=value` lines of a termination message.
fn report(message: Option<&str>) -> BTreeMap<&str, &str> {
    message
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('='))
        .collect()
}

/// Reviews `token` for the API server's own audiences (`audiences` empty) or those given.
async fn review(
    client: &kube::Client,
    token: &str,
    audiences: &[&str],
) -> anyhow::Result<k8s_openapi::api::authentication::v1::UserInfo> {
    let review: TokenReview =
        serde_json::from_value(json!({"spec": {"token": token, "audiences": audiences}}))?;
    let reviewed = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?
        .status
        .context("a review")?;
    ensure!(reviewed.authenticated == Some(true), "{reviewed:?}");
    Ok(reviewed.user.unwrap_or_default())
}

/// Waits for `name` to reach Succeeded or Failed.
async fn ended(pods: &Api<Pod>, name: &str) -> anyhow::Result<Pod> {
    wait_for(
        &format!("Pod {name} to end"),
        Duration::from_secs(60),
        || async {
            let pod = pods.get(name).await?;
            Ok(matches!(phase(&pod), Some("Succeeded" | "Failed")).then_some(pod))
        },
    )
    .await
}

async fn runs_plain_pods_from_their_spec(env: TestEnv) -> anyhow::Result<()> {
    let client = env.client();
    let namespace = env.namespace();
    let kubelet = LocalKubelet::start(&env, exe()).await?;
    let node = Api::<Node>::all(client.clone())
        .get(herd_e2e::kubelet::DEFAULT_NODE)
        .await?;
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ensure!(ready, "the Node is Ready");

    let pp = PostParams::default();
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "runner"}}))?;
    Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create(&pp, &account)
        .await?;
    let settings: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "settings"}, "data": {"greeting": "hello", "unused": "x"}}),
    )?;
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .create(&pp, &settings)
        .await?;
    let creds: Secret = serde_json::from_value(
        json!({"metadata": {"name": "creds"}, "stringData": {"password": "s3cret"}}),
    )?;
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&pp, &creds)
        .await?;

    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut crash = shell("agent", "echo starting; echo boom >&2; exit 3");
    crash["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
    let crashes = pod(
        "crashes",
        json!({"restartPolicy": "Never", "serviceAccountName": "runner", "containers": [crash]}),
    )?;
    let overdue = pod(
        "overdue",
        json!({"restartPolicy": "Never", "serviceAccountName": "runner",
               "activeDeadlineSeconds": 2,
               "terminationGracePeriodSeconds": 1,
               "containers": [shell("agent", "while true; do sleep 0.1; done")]}),
    )?;
    let graceful = pod(
        "graceful",
        json!({"restartPolicy": "Never", "serviceAccountName": "runner",
               "terminationGracePeriodSeconds": 45,
               "containers": [shell("agent",
                   "trap 'echo stopped by SIGTERM > /dev/termination-log; exit 143' TERM; \
                    while true; do sleep 0.1; done")]}),
    )?;
    // The ServiceAccount admission adds the `kube-api-access-*` volume to this one.
    let in_cluster = pod(
        "in-cluster",
        json!({"restartPolicy": "Never", "serviceAccountName": "runner",
               "containers": [shell("client", IN_CLUSTER)]}),
    )?;
    for made in [works()?, crashes, overdue, graceful, in_cluster] {
        pods.create(&pp, &made).await?;
    }

    // Succeeded, with what the main container saw in its termination message.
    let done = ended(&pods, "works").await?;
    let agent = terminated(&done, "agent").context("agent terminated")?;
    ensure!(
        phase(&done) == Some("Succeeded") && agent.exit_code == 0,
        "works: {:?} {agent:?}",
        phase(&done)
    );
    ensure!(
        done.spec.as_ref().and_then(|s| s.node_name.as_deref())
            == Some(herd_e2e::kubelet::DEFAULT_NODE),
        "bound to the kubelet's Node"
    );
    let report = report(agent.message.as_deref());
    ensure!(report.get("greeting") == Some(&"hello"), "{report:?}");
    ensure!(report.get("password") == Some(&"s3cret"), "{report:?}");
    ensure!(
        report.get("socket") == Some(&"yes"),
        "the sidecar started first: {report:?}"
    );
    ensure!(report.get("link") == Some(&"..data/dir"), "{report:?}");
    ensure!(
        report.get("data").is_some_and(|d| d.starts_with("..20")),
        "{report:?}"
    );
    ensure!(report.get("host") == Some(&"works"), "{report:?}");
    ensure!(
        report.get("account") == Some(&"no"),
        "automountServiceAccountToken: false: {report:?}"
    );
    let sidecar = terminated(&done, "sandbox").context("the sidecar was stopped")?;
    ensure!(sidecar.started_at.is_some(), "{sidecar:?}");

    // The token is the Pod's: bound to it, for audience herd.dev.
    let token = report.get("token").copied().unwrap_or_default();
    let user = review(&client, token, &["herd.dev"]).await?;
    ensure!(
        user.username.as_deref() == Some(&format!("system:serviceaccount:{namespace}:runner")),
        "{user:?}"
    );
    let extra = user.extra.unwrap_or_default();
    ensure!(
        extra.get("authentication.kubernetes.io/pod-name") == Some(&vec!["works".to_owned()])
            && extra.get("authentication.kubernetes.io/pod-uid")
                == Some(&vec![done.metadata.uid.clone().unwrap_or_default()]),
        "{extra:?}"
    );

    in_cluster_client_finds_its_files(&env, &pods).await?;

    // Failed with its exit code, and the log's end as the message.
    let crashed = ended(&pods, "crashes").await?;
    let agent = terminated(&crashed, "agent").context("agent terminated")?;
    ensure!(
        phase(&crashed) == Some("Failed")
            && agent.exit_code == 3
            && agent.reason.as_deref() == Some("Error")
            && agent.message.as_deref() == Some("starting\nboom\n"),
        "crashes: {agent:?}"
    );

    let output = std::fs::read_to_string(kubelet.log())?;
    ensure!(
        output.contains(&format!("[{namespace}/crashes/agent] starting")),
        "the containers' output is in the kubelet's log"
    );

    let late = ended(&pods, "overdue").await?;
    let status = late.status.clone().unwrap_or_default();
    ensure!(
        status.phase.as_deref() == Some("Failed")
            && status.reason.as_deref() == Some("DeadlineExceeded"),
        "overdue: {status:?}"
    );

    stops_on_sigterm(&pods).await?;
    drop(kubelet);
    Ok(())
}

/// The `in-cluster` Pod: the API server's address in its environment (the kubeconfig's, as
/// there is no kube-proxy), and the ServiceAccount volume admission added, as in-cluster
/// clients read them: a token of the Pod's account bound to it for the API server, the CA
/// that `kube-root-ca.crt` publishes, the namespace; and no kubeconfig (`KUBECONFIG`,
/// `$HOME/.kube`), which kube-rs's `Client::try_default` would prefer.
async fn in_cluster_client_finds_its_files(env: &TestEnv, pods: &Api<Pod>) -> anyhow::Result<()> {
    let client = env.client();
    let namespace = env.namespace();
    let done = ended(pods, "in-cluster").await?;
    let injected = done
        .spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .any(|volume| volume.name.starts_with("kube-api-access-"));
    ensure!(injected, "admission adds the ServiceAccount volume");
    let client_state = terminated(&done, "client").context("client terminated")?;
    ensure!(
        phase(&done) == Some("Succeeded"),
        "in-cluster: {client_state:?}"
    );
    let report = report(client_state.message.as_deref());
    let config = herd_e2e::kubeconfig::config_from_kubeconfig(env.cluster().kubeconfig()).await?;
    let api = herd_e2e::kubelet::service_env::ApiServer::from_url(&config.cluster_url)
        .map_err(anyhow::Error::msg)?;
    let address = format!("{}:{}", api.host, api.port);
    ensure!(report.get("api") == Some(&address.as_str()), "{report:?}");
    ensure!(report.get("namespace") == Some(&namespace), "{report:?}");
    ensure!(
        report.get("kubeconfig") == Some(&"unset no"),
        "no kubeconfig for kube-rs to prefer over the in-cluster config: {report:?}"
    );
    let root_ca = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get("kube-root-ca.crt")
        .await?
        .data
        .unwrap_or_default()
        .remove("ca.crt")
        .unwrap_or_default()
        .replace('\n', "");
    ensure!(
        !root_ca.is_empty() && report.get("ca") == Some(&root_ca.as_str()),
        "ca.crt is kube-root-ca.crt's: {report:?}"
    );
    let user = review(
        &client,
        report.get("token").copied().unwrap_or_default(),
        &[],
    )
    .await?;
    ensure!(
        user.username.as_deref() == Some(&format!("system:serviceaccount:{namespace}:runner")),
        "{user:?}"
    );
    let extra = user.extra.unwrap_or_default();
    ensure!(
        extra.get("authentication.kubernetes.io/pod-name") == Some(&vec!["in-cluster".to_owned()]),
        "{extra:?}"
    );
    Ok(())
}

/// Deleting a running Pod: SIGTERM reaches its PID 1, which stops at once, long before the
/// 45 s grace period; its final status is written before the kubelet deletes it for good.
async fn stops_on_sigterm(pods: &Api<Pod>) -> anyhow::Result<()> {
    let running = wait_for("graceful to run", Duration::from_secs(60), || async {
        let pod = pods.get("graceful").await?;
        let agent_runs = pod
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
            .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
        Ok(agent_runs.then_some(pod))
    })
    .await?;
    let version = running
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let watch = WatchParams::default()
        .fields("metadata.name=graceful")
        .timeout(50);
    let mut events = pods.watch(&watch, &version).await?.boxed();
    let asked = Instant::now();
    pods.delete("graceful", &DeleteParams::default()).await?;
    let mut last = None;
    let gone = tokio::time::timeout(Duration::from_secs(40), async {
        while let Some(event) = events.try_next().await? {
            match event {
                WatchEvent::Modified(pod) => last = Some(pod),
                WatchEvent::Deleted(pod) => return anyhow::Ok(pod),
                WatchEvent::Error(e) => bail!("watching graceful: {e:?}"),
                _ => {}
            }
        }
        bail!("the watch ended before graceful was deleted")
    })
    .await
    .context("graceful was not deleted within 40 s")??;
    ensure!(
        asked.elapsed() < Duration::from_secs(20),
        "SIGTERM, not the grace period's end"
    );
    let agent = terminated(&gone, "agent")
        .or_else(|| last.as_ref().and_then(|pod| terminated(pod, "agent")))
        .context("the final status")?;
    ensure!(
        agent.exit_code == 143
            && agent.signal.is_none()
            && agent.message.as_deref() == Some("stopped by SIGTERM\n"),
        "graceful: {agent:?}"
    );
    ensure!(
        phase(&gone) == Some("Failed"),
        "graceful: {:?}",
        phase(&gone)
    );
    Ok(())
}
