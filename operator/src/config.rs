//! The operator's settings: command-line flags, each also read from an environment variable.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser};
use herd_crds::agent::{ModelSpec, Provider};
use herd_crds::refs::SecretKeyRef;
use k8s_openapi::api::core::v1::ResourceRequirements;

use crate::decide::admission::Caps;
use crate::decide::runner_resources::{
    DEFAULT_RUNNER_RESOURCES, DEFAULT_SANDBOX_RESOURCES, parse_resources,
};

/// How the operator runs: which namespaces it watches, its Lease, its HTTP listener, its
/// default model.
#[derive(Parser, Clone, Debug)]
#[command(
    name = "herd-operator",
    version,
    about = "Reconciles Herd Agents, Skills and Runs"
)]
pub struct Config {
    /// Namespaces to watch, comma-separated. Empty: all namespaces (needs the ClusterRole).
    #[arg(long, env = "HERD_WATCH_NAMESPACES", value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,

    /// Leader election: the Lease, and how long a leader holds it.
    #[command(flatten)]
    pub lease: LeaseConfig,

    /// Address of the HTTP listener serving `/healthz`, `/readyz` and `/metrics`; port 0 picks
    /// a free port.
    #[arg(long, env = "HERD_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,

    /// Serve `/metrics` over HTTPS on `--metrics-addr` instead of plain HTTP on `--http-addr`:
    /// the run API's certificate, and a bearer token that a TokenReview authenticates and a
    /// SubjectAccessReview allows `get` on the non-resource URL `/metrics`.
    #[arg(long, env = "HERD_METRICS_SECURE")]
    pub metrics_secure: bool,

    /// Address of the HTTPS `/metrics` listener of `--metrics-secure`; port 0 picks a free
    /// port.
    #[arg(long, env = "HERD_METRICS_ADDR", default_value = "0.0.0.0:8444")]
    pub metrics_addr: SocketAddr,

    /// Address of the run API (HTTPS, the certificate of Secret `herd-run-api-tls`), served by
    /// every replica; port 0 picks a free port.
    #[arg(long, env = "HERD_RUN_API_ADDR", default_value = "0.0.0.0:8443")]
    pub run_api_addr: SocketAddr,

    /// Who writes the run API's TLS Secret `herd-run-api-tls` in the Lease's namespace:
    /// `operator` (issues and renews a self-signed CA and leaf) or `external` (cert-manager or
    /// an admin writes `tls.crt`, `tls.key` and `ca.crt`; the operator only reads it).
    #[arg(long, env = "HERD_RUN_API_TLS", value_enum, default_value_t = RunApiTlsMode::Operator)]
    pub run_api_tls: RunApiTlsMode,

    /// Most reconciles running at once, per controller.
    #[arg(long, env = "HERD_CONCURRENCY", default_value_t = 16)]
    pub concurrency: u16,

    /// The model of Agents whose `spec.model` is absent.
    #[command(flatten)]
    pub default_model: DefaultModelConfig,

    /// How Run pods are made and what they reach.
    #[command(flatten)]
    pub runs: RunPodConfig,

    /// How many Runs may be active at once.
    #[command(flatten)]
    pub admission: AdmissionConfig,

    /// Log lines as JSON (`json`) or for people (`text`).
    #[arg(long, env = "HERD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,

    /// Where the error that stops the operator is written for `kubectl describe pod` (the
    /// kubelet's `terminationMessagePath`). Written only when the file exists: the kubelet
    /// creates it in a Pod, and elsewhere nothing is made.
    #[arg(
        long,
        env = "HERD_TERMINATION_LOG",
        value_name = "FILE",
        default_value = "/dev/termination-log"
    )]
    pub termination_log: std::path::PathBuf,
}

/// The images and endpoints of Run pods.
#[derive(Args, Clone, Debug)]
pub struct RunPodConfig {
    /// Image of the `agent` container (`herd-runner pod`).
    #[arg(
        long,
        env = "HERD_RUNNER_IMAGE",
        default_value = "ghcr.io/herd-dev/herd-runner:latest"
    )]
    pub runner_image: String,
    /// Default image of the `sandbox` container (an Agent's `sandbox.image` wins).
    #[arg(
        long,
        env = "HERD_SANDBOX_IMAGE",
        default_value = "ghcr.io/herd-dev/herd-sandbox:latest"
    )]
    pub sandbox_image: String,
    /// The run API's URL as Run pods reach it (`HERD_API_URL`).
    #[arg(
        long,
        env = "HERD_RUN_API_URL",
        default_value = "https://herd-operator.herd-system.svc:8443"
    )]
    pub run_api_url: String,
    /// The run API's port, opened in the Run NetworkPolicies.
    #[arg(long, env = "HERD_RUN_API_PORT", default_value_t = 8443)]
    pub run_api_port: i32,
    /// A CIDR holding the run API, when the operator runs outside the cluster; else Run pods
    /// reach the operator's pods in the Lease's namespace.
    #[arg(long, env = "HERD_RUN_API_CIDR")]
    pub run_api_cidr: Option<String>,
    /// The OTLP/HTTP endpoint Run pods export traces to (their `OTEL_EXPORTER_OTLP_ENDPOINT`);
    /// none: Run pods export nothing.
    #[arg(long, env = "HERD_RUNNER_OTLP_ENDPOINT")]
    pub runner_otlp_endpoint: Option<String>,
    /// The CIDR holding that endpoint, opened (on `--runner-otlp-port` only) in each Run's
    /// NetworkPolicy.
    #[arg(long, env = "HERD_RUNNER_OTLP_CIDR")]
    pub runner_otlp_cidr: Option<String>,
    /// The endpoint's port in the Run NetworkPolicies.
    #[arg(long, env = "HERD_RUNNER_OTLP_PORT", default_value_t = 4318)]
    pub runner_otlp_port: i32,
    /// DNS names of the run API's serving certificate, comma-separated (the chart passes its
    /// Service's names); the host of `--run-api-url` is always added.
    #[arg(long, env = "HERD_RUN_API_DNS_NAMES", value_delimiter = ',')]
    pub run_api_dns_names: Vec<String>,
    /// Requests and limits of the `agent` container, as
    /// `requests.<resource>=<quantity>,limits.<resource>=<quantity>`.
    #[arg(long, env = "HERD_RUNNER_RESOURCES", default_value = DEFAULT_RUNNER_RESOURCES, value_parser = parse_resources)]
    pub runner_resources: ResourceRequirements,
    /// Default requests and limits of the `sandbox` container, in the same form; an Agent's
    /// `sandbox.resources` is merged over them key by key when a Run is accepted.
    #[arg(long, env = "HERD_SANDBOX_RESOURCES", default_value = DEFAULT_SANDBOX_RESOURCES, value_parser = parse_resources)]
    pub sandbox_resources: ResourceRequirements,
    /// How long a Run's Pod that shows it will not start by itself (an image it cannot pull, a
    /// Secret its container needs, no node that fits it, a crash-looping sandbox) may take from
    /// its creation before the attempt fails with that reason (`runDefaults.retries` apply). A
    /// Pod that is only slow (`ContainerCreating`) waits for the Run's timeout.
    #[arg(long, env = "HERD_POD_START_TIMEOUT", value_parser = parse_duration, default_value = "5m")]
    pub pod_start_timeout: Duration,
}

/// The caps on active top-level Runs (a child Run counts against its parent's
/// `subagents.maxConcurrent` only).
#[derive(Args, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// Most top-level Runs active at once in one namespace; 0: unlimited.
    #[arg(long, env = "HERD_MAX_ACTIVE_PER_NAMESPACE", default_value_t = 100)]
    pub max_active_per_namespace: u32,
    /// Most top-level Runs active at once in all watched namespaces; 0: unlimited.
    #[arg(long, env = "HERD_MAX_ACTIVE", default_value_t = 500)]
    pub max_active: u32,
}

impl AdmissionConfig {
    /// The caps, 0 read as unlimited.
    pub fn caps(&self) -> Caps {
        let cap = |n: u32| (n > 0).then_some(n);
        Caps {
            per_namespace: cap(self.max_active_per_namespace),
            total: cap(self.max_active),
        }
    }
}

/// Who writes the run API's TLS Secret.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunApiTlsMode {
    /// The operator issues the Secret and renews it at two thirds of a certificate's life.
    Operator,
    /// Someone else (cert-manager) writes it; the operator never creates or changes it.
    External,
}

/// Log output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable lines.
    Text,
}

/// The Lease the replicas compete for.
#[derive(Args, Clone, Debug)]
pub struct LeaseConfig {
    /// Name of the Lease.
    #[arg(
        id = "lease-name",
        long = "lease-name",
        env = "HERD_LEASE_NAME",
        default_value = "herd-operator"
    )]
    pub name: String,
    /// Namespace of the Lease (the chart passes the operator's own namespace).
    #[arg(
        id = "lease-namespace",
        long = "lease-namespace",
        env = "HERD_LEASE_NAMESPACE",
        default_value = "herd-system"
    )]
    pub namespace: String,
    /// This replica's name in the Lease. Default: the pod name (`POD_NAME`), else the host
    /// name and process id.
    #[arg(
        id = "lease-identity",
        long = "lease-identity",
        env = "HERD_LEASE_IDENTITY"
    )]
    pub identity: Option<String>,
    /// How long the Lease stays valid after its holder last renewed it.
    #[arg(id = "lease-duration", long = "lease-duration", env = "HERD_LEASE_DURATION", value_parser = parse_duration, default_value = "15s")]
    pub duration: Duration,
    /// How long before expiry the holder renews; must be shorter than the duration.
    #[arg(id = "lease-renew-before", long = "lease-renew-before", env = "HERD_LEASE_RENEW_BEFORE", value_parser = parse_duration, default_value = "5s")]
    pub renew_before: Duration,
}

/// The operator's default model, used by Agents without `spec.model`.
#[derive(Args, Clone, Debug, Default)]
pub struct DefaultModelConfig {
    /// API of the default model: `openai`, `anthropic` or `scripted`.
    #[arg(id = "default-model-provider", long = "default-model-provider", env = "HERD_DEFAULT_MODEL_PROVIDER", value_parser = parse_provider)]
    pub provider: Option<Provider>,
    /// Name of the default model. Without it, Agents must set `spec.model`.
    #[arg(
        id = "default-model-name",
        long = "default-model-name",
        env = "HERD_DEFAULT_MODEL_NAME"
    )]
    pub name: Option<String>,
    /// Base URL of the default model's API.
    #[arg(
        id = "default-model-base-url",
        long = "default-model-base-url",
        env = "HERD_DEFAULT_MODEL_BASE_URL"
    )]
    pub base_url: Option<String>,
    /// Secret (in each Agent's namespace) holding the default model's API key.
    #[arg(
        id = "default-model-secret",
        long = "default-model-secret",
        env = "HERD_DEFAULT_MODEL_SECRET"
    )]
    pub api_key_secret: Option<String>,
    /// Key inside that Secret.
    #[arg(
        id = "default-model-secret-key",
        long = "default-model-secret-key",
        env = "HERD_DEFAULT_MODEL_SECRET_KEY",
        default_value = "api-key"
    )]
    pub api_key_secret_key: String,
}

impl DefaultModelConfig {
    /// The default model as an Agent's `spec.model`, when both its provider and its name are
    /// set (an empty name is no name).
    pub fn model(&self) -> Option<ModelSpec> {
        Some(ModelSpec {
            provider: self.provider?,
            name: self.name.clone().filter(|name| !name.is_empty())?,
            base_url: self.base_url.clone(),
            api_key_secret_ref: self.api_key_secret.clone().map(|name| SecretKeyRef {
                name,
                key: self.api_key_secret_key.clone(),
            }),
            temperature: None,
            max_tokens: None,
            context_window: None,
            supports_vision: None,
            supports_thinking: None,
            reasoning_effort: None,
            request_timeout: None,
            max_retries: None,
            egress_cidrs: None,
            script_from: None,
            pricing: None,
        })
    }
}

impl LeaseConfig {
    /// Lease timings in whole seconds (the Lease API's unit), checked so the lease library's
    /// own assertions can never fire on a user's flags.
    pub fn seconds(&self) -> Result<(u64, u64), String> {
        let duration = self.duration.as_secs();
        let renew_before = self.renew_before.as_secs();
        if renew_before == 0 {
            return Err("--lease-renew-before must be at least 1s".into());
        }
        if renew_before >= duration {
            return Err(format!(
                "--lease-renew-before ({renew_before}s) must be shorter than --lease-duration ({duration}s)"
            ));
        }
        Ok((duration, renew_before))
    }

    /// This replica's identity in the Lease.
    pub fn identity(&self) -> String {
        if let Some(identity) = self.identity.as_deref().filter(|i| !i.is_empty()) {
            return identity.to_owned();
        }
        if let Some(pod) = std::env::var("POD_NAME").ok().filter(|p| !p.is_empty()) {
            return pod;
        }
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "herd-operator".into());
        format!("{host}-{}", std::process::id())
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    herd_crds::duration::parse_duration(text).map_err(|e| e.to_string())
}

fn parse_provider(text: &str) -> Result<Provider, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|_| format!("unknown provider `{text}` (expected openai, anthropic or scripted)"))
}

impl Config {
    /// A configuration with every default (and the `HERD_*` environment), scoped to
    /// `namespaces`; empty means all namespaces. For tests and embedding.
    pub fn for_namespaces(namespaces: &[&str]) -> Result<Self, clap::Error> {
        let mut args = vec!["herd-operator".to_owned()];
        if !namespaces.is_empty() {
            args.push(format!("--watch-namespaces={}", namespaces.join(",")));
        }
        Config::try_parse_from(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, clap::Error> {
        Config::try_parse_from(std::iter::once("herd-operator").chain(args.iter().copied()))
    }

    #[test]
    fn defaults() {
        let config = parse(&[]).unwrap();
        assert!(config.watch_namespaces.is_empty());
        assert_eq!(config.concurrency, 16);
        assert_eq!(config.run_api_addr.to_string(), "0.0.0.0:8443");
        assert!(!config.metrics_secure, "plain /metrics unless asked");
        let secure = parse(&["--metrics-secure", "--metrics-addr=127.0.0.1:0"]).unwrap();
        assert!(secure.metrics_secure);
        assert_eq!(secure.metrics_addr.to_string(), "127.0.0.1:0");
        assert_eq!(config.lease.seconds(), Ok((15, 5)));
        assert_eq!(config.log_format, LogFormat::Json);
        assert_eq!(config.default_model.model(), None);
        assert_eq!(
            config.runs.runner_resources.limits.unwrap()["memory"].0,
            "1Gi"
        );
    }

    #[test]
    fn run_api_tls_mode() {
        assert_eq!(parse(&[]).unwrap().run_api_tls, RunApiTlsMode::Operator);
        let external = parse(&["--run-api-tls=external"]).unwrap();
        assert_eq!(external.run_api_tls, RunApiTlsMode::External);
        assert!(parse(&["--run-api-tls=certManager"]).is_err());
    }

    #[test]
    fn admission_caps() {
        let caps = parse(&[]).unwrap().admission.caps();
        assert_eq!(
            caps,
            Caps {
                per_namespace: Some(100),
                total: Some(500)
            }
        );
        let unlimited = parse(&["--max-active=0", "--max-active-per-namespace=7"]).unwrap();
        assert_eq!(
            unlimited.admission.caps(),
            Caps {
                per_namespace: Some(7),
                total: None
            }
        );
        assert!(parse(&["--max-active=-1"]).is_err());
    }

    #[test]
    fn runner_resources_flag() {
        let config = parse(&["--runner-resources=requests.cpu=1,limits.memory=2Gi"]).unwrap();
        let resources = config.runs.runner_resources;
        assert_eq!(resources.requests.unwrap()["cpu"].0, "1");
        assert_eq!(resources.limits.unwrap()["memory"].0, "2Gi");
        assert!(parse(&["--runner-resources=requests.cpu=lots"]).is_err());
    }

    #[test]
    fn sandbox_resources_flag() {
        let defaults = parse(&[]).unwrap().runs.sandbox_resources;
        assert_eq!(defaults.requests.unwrap()["memory"].0, "256Mi");
        assert_eq!(defaults.limits.unwrap()["memory"].0, "2Gi");
        let config = parse(&["--sandbox-resources=limits.ephemeral-storage=4Gi"]).unwrap();
        let resources = config.runs.sandbox_resources;
        assert_eq!(resources.requests, None);
        assert_eq!(resources.limits.unwrap()["ephemeral-storage"].0, "4Gi");
        assert!(parse(&["--sandbox-resources=requests.memory=4Gi,limits.memory=1Gi"]).is_err());
    }

    #[test]
    fn pod_start_timeout_flag() {
        assert_eq!(
            parse(&[]).unwrap().runs.pod_start_timeout,
            Duration::from_secs(300)
        );
        let config = parse(&["--pod-start-timeout=90s"]).unwrap();
        assert_eq!(config.runs.pod_start_timeout, Duration::from_secs(90));
        assert!(parse(&["--pod-start-timeout=soon"]).is_err());
    }

    #[test]
    fn namespaces_and_model_flags() {
        let config = parse(&[
            "--watch-namespaces=a,b",
            "--default-model-provider=openai",
            "--default-model-name=qwen",
            "--lease-duration=3s",
            "--lease-renew-before=1s",
        ])
        .unwrap();
        assert_eq!(config.watch_namespaces, ["a", "b"]);
        assert_eq!(config.default_model.provider, Some(Provider::Openai));
        assert!(config.default_model.model().is_some());
        assert_eq!(config.lease.seconds(), Ok((3, 1)));
        assert!(parse(&["--default-model-provider=bedrock"]).is_err());
    }

    #[test]
    fn lease_timings_are_checked() {
        let config = parse(&["--lease-duration=5s", "--lease-renew-before=5s"]).unwrap();
        assert!(config.lease.seconds().is_err());
        let config = parse(&["--lease-renew-before=500ms"]).unwrap();
        assert!(config.lease.seconds().is_err());
    }

    #[test]
    fn explicit_identity_wins() {
        let config = parse(&["--lease-identity=replica-a"]).unwrap();
        assert_eq!(config.lease.identity(), "replica-a");
    }

    #[test]
    fn for_namespaces_scopes() {
        assert_eq!(
            Config::for_namespaces(&["x"]).unwrap().watch_namespaces,
            ["x"]
        );
        assert!(
            Config::for_namespaces(&[])
                .unwrap()
                .watch_namespaces
                .is_empty()
        );
    }
}
