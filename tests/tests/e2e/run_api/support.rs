//! A runner's view of the run API: the operator started for the test, the Run's Pod, a token
//! bound to it, and an HTTPS client trusting only the namespace's copy of the run API's CA.

use anyhow::{Context, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures::StreamExt;
use herd_crds::run::Run;
use herd_crds::wire::{ApiError, RunConfig};
use herd_e2e::TestEnv;
use herd_e2e::runner::{run_api_ca, runner_token};
use herd_e2e::wait::wait_for;
use herd_operator::Running;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::operator::run_fixtures::{WAIT, create_agent_spec, create_run, run_until, start_agent};
use crate::operator::support::{Clients, Rbac, start_leader, test_config};

/// The audience of runner tokens.
pub const AUDIENCE: &str = "herd.dev";

/// One test's operator, its namespace and a client for its run API.
pub struct Fixture {
    pub admin: Client,
    pub namespace: String,
    pub running: Running,
    https: reqwest::Client,
}

/// [`test_config`] for the test's namespace, the run API's URL at 127.0.0.1 (what its
/// certificate is valid for).
pub fn run_api_config(namespace: &str) -> anyhow::Result<herd_operator::Config> {
    let mut config = test_config(&[namespace], namespace, "only")?;
    config.runs.run_api_url = "https://127.0.0.1:8443".into();
    Ok(config)
}

impl Fixture {
    /// Starts a leading operator for the test's namespace whose run API's certificate is valid
    /// for 127.0.0.1, and an Agent `helper` with these `runDefaults`; waits for the CA bundle.
    pub async fn start(env: TestEnv, run_defaults: serde_json::Value) -> anyhow::Result<Self> {
        Self::start_with(env, json!({"runDefaults": run_defaults, "sandbox": {}})).await
    }

    /// [`Fixture::start`] with the Agent `helper`'s spec fields `spec` (over a plain spec).
    pub async fn start_with(env: TestEnv, spec: serde_json::Value) -> anyhow::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let Clients {
            operator,
            admin,
            namespace,
        } = Clients::new(&env, Rbac::Namespaced).await?;
        let running = start_leader(run_api_config(&namespace)?, operator).await?;
        create_agent_spec(&admin, &namespace, spec).await?;
        Ok(Fixture {
            admin,
            namespace,
            running,
            https: reqwest::Client::new(),
        })
    }

    /// Creates the Run `name` and waits for its first Pod; from then on the client trusts the
    /// namespace's `herd-run-api-ca` only.
    pub async fn run_pod(&mut self, name: &str) -> anyhow::Result<Pod> {
        create_run(&self.admin, &self.namespace, name).await?;
        let pod = self.pod(&format!("{name}-1")).await?;
        let bundle = run_api_ca(&self.admin, &self.namespace).await?;
        self.https = reqwest::Client::builder()
            .tls_certs_only(reqwest::Certificate::from_pem_bundle(bundle.as_bytes())?)
            .build()?;
        Ok(pod)
    }

    /// Creates the Run `name`, plays the kubelet starting its first Pod's `agent` container, and
    /// returns the run API token of that attempt's runner.
    pub async fn started_runner(&mut self, name: &str) -> anyhow::Result<String> {
        let pod = self.run_pod(name).await?;
        start_agent(&self.admin, &self.namespace, &format!("{name}-1")).await?;
        self.token(&pod, Some(AUDIENCE)).await
    }

    /// Waits for the Pod `name`.
    pub async fn pod(&self, name: &str) -> anyhow::Result<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        wait_for(&format!("the Pod {name}"), WAIT, || async {
            Ok(pods.get_opt(name).await?)
        })
        .await
    }

    /// A token of `herd-runner` bound to `pod`, for `audience` (none: the API server's own).
    pub async fn token(&self, pod: &Pod, audience: Option<&str>) -> anyhow::Result<String> {
        runner_token(&self.admin, &self.namespace, pod, audience, 600).await
    }

    /// The URL of `route` of the Run `run`.
    pub fn url(&self, run: &str, route: &str) -> String {
        run_url(&self.running, &self.namespace, run, route)
    }

    /// Evicts the Pod of attempt 1 of the Run `run` (saying `message`, as the kubelet does),
    /// waits for attempt 2 and reads its config as attempt 2's Pod does.
    pub async fn evict_first_attempt(&self, run: &str, message: &str) -> anyhow::Result<RunConfig> {
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        let evict = json!({"status": {"phase": "Failed", "reason": "Evicted", "message": message}});
        pods.patch_status(
            &format!("{run}-1"),
            &PatchParams::default(),
            &Patch::Merge(&evict),
        )
        .await?;
        run_until(&self.runs(), run, "attempt 2", |r| {
            r.status.as_ref().and_then(|s| s.attempt) == Some(2)
        })
        .await?;
        let second = self.pod(&format!("{run}-2")).await?;
        let token = self.token(&second, Some(AUDIENCE)).await?;
        send(self.https.get(self.url(run, "config")).bearer_auth(&token))
            .await?
            .expect(200)
    }

    /// POSTs `body` as JSON to `route` of the Run `run`, as the runner holding `token`.
    pub async fn post(
        &self,
        run: &str,
        route: &str,
        token: &str,
        body: &impl serde::Serialize,
    ) -> anyhow::Result<Answer> {
        send(
            self.https
                .post(self.url(run, route))
                .bearer_auth(token)
                .json(body),
        )
        .await
    }

    /// The HTTPS client.
    pub fn https(&self) -> &reqwest::Client {
        &self.https
    }

    /// The Runs of the namespace, as the admin reads them.
    pub fn runs(&self) -> Api<Run> {
        Api::namespaced(self.admin.clone(), &self.namespace)
    }
}

/// The URL of `route` of the Run `run` in `namespace`, on `running`'s run API.
pub fn run_url(running: &Running, namespace: &str, run: &str, route: &str) -> String {
    format!(
        "https://{}/v1/runs/{namespace}/{run}/{route}",
        running.run_api_addr
    )
}

/// The checkpoint attempt 2's config carries from attempt 1, decoded; fails unless `config` is
/// attempt 2's and carries one.
pub fn carried_checkpoint(config: &RunConfig) -> anyhow::Result<Vec<u8>> {
    anyhow::ensure!(config.attempt == 2, "attempt {}, not 2", config.attempt);
    let carried = config
        .checkpoint_gzip_base64
        .as_ref()
        .context("attempt 2 has no checkpoint")?;
    Ok(STANDARD.decode(carried)?)
}

/// The gzip bytes of a checkpoint ConfigMap.
pub fn checkpoint_bytes(saved: &ConfigMap) -> Option<&Vec<u8>> {
    saved
        .binary_data
        .as_ref()
        .and_then(|b| b.get("checkpoint.json.gz"))
        .map(|b| &b.0)
}

/// The ids of the questions asked by the attempt that wrote a checkpoint ConfigMap, as JSON.
pub fn asked(saved: &ConfigMap) -> Option<&str> {
    saved
        .annotations()
        .get("herd.dev/questions")
        .map(String::as_str)
}

/// A request's status and body.
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: String,
}

/// Sends `request`, keeping the status, `Retry-After` and the body.
pub async fn send(request: reqwest::RequestBuilder) -> anyhow::Result<Answer> {
    let response = request.send().await.context("calling the run API")?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response.text().await?;
    Ok(Answer {
        status,
        retry_after,
        body,
    })
}

/// [`send`] for a request the server must answer before its body ends: fails after a minute.
pub async fn send_within(request: reqwest::RequestBuilder) -> anyhow::Result<Answer> {
    tokio::time::timeout(WAIT, send(request))
        .await
        .context("the run API did not answer before the body ended")?
}

/// A body of `bytes` that then stalls, never ending.
pub fn stalled(bytes: Vec<u8>) -> reqwest::Body {
    let first = futures::stream::iter([Ok::<_, std::io::Error>(bytes)]);
    reqwest::Body::wrap_stream(first.chain(futures::stream::pending()))
}

impl Answer {
    /// The body as `T`, when the status is `status`.
    pub fn expect<T: serde::de::DeserializeOwned>(&self, status: u16) -> anyhow::Result<T> {
        if self.status != status {
            bail!("expected {status}, got {}: {}", self.status, self.body);
        }
        serde_json::from_str(&self.body)
            .with_context(|| format!("the body of a {status}: {}", self.body))
    }

    /// Fails unless this is the `ApiError` of `status` with `reason`; returns its message.
    pub fn refused(&self, status: u16, reason: &str) -> anyhow::Result<String> {
        let error: ApiError = self.expect(status)?;
        if error.reason != reason {
            bail!("expected reason {reason}, got {error:?}");
        }
        Ok(error.message)
    }
}
