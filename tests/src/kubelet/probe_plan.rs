//! A container's probes as the kubelet reads them (defaults, named ports), and the counting
//! of results against their thresholds; [`super::prober`] runs them.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::env::POD_IP;
use super::lifecycle::ProbeResult;

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// `startupProbe`: until it passes, the container is not started (and nothing after a
    /// sidecar starts); the others wait for it.
    Startup,
    /// `readinessProbe`.
    Readiness,
    /// `livenessProbe`.
    Liveness,
}

/// What a probe does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Runs a command in the container.
    Exec(Vec<String>),
    /// Connects to a TCP port.
    Tcp {
        /// The host (the Pod's address by default).
        host: String,
        /// The port.
        port: u16,
    },
    /// An HTTP GET answered with a status from 200 to 399.
    Http {
        /// The host (the Pod's address by default).
        host: String,
        /// The port.
        port: u16,
        /// The path (with its query).
        path: String,
        /// Extra request headers.
        headers: Vec<(String, String)>,
    },
    /// A probe this node cannot run (it always fails); why.
    Unsupported(String),
}

/// One probe, with its defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePlan {
    /// Which probe.
    pub kind: ProbeKind,
    /// What it does.
    pub check: Check,
    /// `initialDelaySeconds` (0).
    pub initial_delay: Duration,
    /// `periodSeconds` (10).
    pub period: Duration,
    /// `timeoutSeconds` (1).
    pub timeout: Duration,
    /// `successThreshold` (1).
    pub success_threshold: u32,
    /// `failureThreshold` (3).
    pub failure_threshold: u32,
}

/// The probes of `container`, startup first.
pub fn probe_plans(container: &Container) -> Vec<ProbePlan> {
    [
        (ProbeKind::Startup, &container.startup_probe),
        (ProbeKind::Readiness, &container.readiness_probe),
        (ProbeKind::Liveness, &container.liveness_probe),
    ]
    .into_iter()
    .filter_map(|(kind, probe)| Some(probe_plan(kind, probe.as_ref()?, container)))
    .collect()
}

fn probe_plan(kind: ProbeKind, probe: &Probe, container: &Container) -> ProbePlan {
    let seconds = |value: Option<i32>, default: u64| {
        Duration::from_secs(
            value
                .and_then(|v| u64::try_from(v).ok())
                .filter(|v| *v > 0)
                .unwrap_or(default),
        )
    };
    let count = |value: Option<i32>, default: u32| {
        value
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v > 0)
            .unwrap_or(default)
    };
    ProbePlan {
        kind,
        check: check(probe, container),
        initial_delay: Duration::from_secs(
            probe
                .initial_delay_seconds
                .and_then(|v| u64::try_from(v).ok())
                .unwrap_or(0),
        ),
        period: seconds(probe.period_seconds, 10),
        timeout: seconds(probe.timeout_seconds, 1),
        success_threshold: count(probe.success_threshold, 1),
        failure_threshold: count(probe.failure_threshold, 3),
    }
}

fn check(probe: &Probe, container: &Container) -> Check {
    if let Some(exec) = &probe.exec {
        let command = exec.command.clone().unwrap_or_default();
        if command.is_empty() {
            return Check::Unsupported("an exec probe without a command".to_owned());
        }
        return Check::Exec(command);
    }
    if let Some(tcp) = &probe.tcp_socket {
        return match port(&tcp.port, container) {
            Ok(port) => Check::Tcp {
                host: host(tcp.host.as_deref()),
                port,
            },
            Err(why) => Check::Unsupported(why),
        };
    }
    if let Some(http) = &probe.http_get {
        if http
            .scheme
            .as_deref()
            .is_some_and(|s| !s.eq_ignore_ascii_case("HTTP"))
        {
            return Check::Unsupported(
                "local-kubelet runs only plain-HTTP httpGet probes".to_owned(),
            );
        }
        return match port(&http.port, container) {
            Ok(port) => Check::Http {
                host: host(http.host.as_deref()),
                port,
                path: http
                    .path
                    .clone()
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| "/".to_owned()),
                headers: http
                    .http_headers
                    .iter()
                    .flatten()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect(),
            },
            Err(why) => Check::Unsupported(why),
        };
    }
    Check::Unsupported("local-kubelet runs exec, tcpSocket and httpGet probes only".to_owned())
}

fn host(host: Option<&str>) -> String {
    host.filter(|h| !h.is_empty()).unwrap_or(POD_IP).to_owned()
}

/// A port by number, or by the name of one of the container's ports.
fn port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port)
            .ok_or_else(|| format!("the container has no port named {name:?}"))?,
    };
    u16::try_from(number).map_err(|_| format!("port {number} is out of range"))
}

/// Counts one probe's results against its thresholds.
#[derive(Debug, Clone)]
pub struct Counter {
    kind: ProbeKind,
    success_threshold: u32,
    failure_threshold: u32,
    successes: u32,
    failures: u32,
    ready: bool,
    done: bool,
}

impl Counter {
    /// A counter for `plan`.
    pub fn new(plan: &ProbePlan) -> Counter {
        Counter {
            kind: plan.kind,
            // A startup or liveness probe passes on one success, whatever it says.
            success_threshold: match plan.kind {
                ProbeKind::Readiness => plan.success_threshold,
                _ => 1,
            },
            failure_threshold: plan.failure_threshold,
            successes: 0,
            failures: 0,
            ready: false,
            done: false,
        }
    }

    /// Whether the probe has nothing more to say (a startup probe that passed, a startup or
    /// liveness probe that failed for good).
    pub fn done(&self) -> bool {
        self.done
    }

    /// One result; what changed, if anything.
    pub fn observe(&mut self, ok: bool) -> Option<ProbeResult> {
        if self.done {
            return None;
        }
        if ok {
            self.successes = self.successes.saturating_add(1);
            self.failures = 0;
        } else {
            self.failures = self.failures.saturating_add(1);
            self.successes = 0;
        }
        match self.kind {
            ProbeKind::Startup if ok => {
                self.done = true;
                Some(ProbeResult::Started)
            }
            ProbeKind::Startup | ProbeKind::Liveness
                if !ok && self.failures >= self.failure_threshold =>
            {
                self.done = true;
                Some(ProbeResult::Failed)
            }
            ProbeKind::Readiness
                if ok && !self.ready && self.successes >= self.success_threshold =>
            {
                self.ready = true;
                Some(ProbeResult::Ready(true))
            }
            ProbeKind::Readiness
                if !ok && self.ready && self.failures >= self.failure_threshold =>
            {
                self.ready = false;
                Some(ProbeResult::Ready(false))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::test_support::container;
    use serde_json::json;

    #[test]
    fn herds_sandbox_probe_with_its_settings_and_the_defaults() {
        let c = container(json!({"name": "sandbox", "startupProbe": {
            "exec": {"command": ["herd-runner", "sandbox", "--ready"]},
            "periodSeconds": 1, "failureThreshold": 60}}));
        assert_eq!(
            probe_plans(&c),
            [ProbePlan {
                kind: ProbeKind::Startup,
                check: Check::Exec(vec![
                    "herd-runner".into(),
                    "sandbox".into(),
                    "--ready".into()
                ]),
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(1),
                timeout: Duration::from_secs(1),
                success_threshold: 1,
                failure_threshold: 60,
            }]
        );
    }

    #[test]
    fn network_probes_resolve_named_ports_and_refuse_https_and_grpc() {
        let c = container(json!({"name": "web",
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"port": "http", "path": "/healthz",
                "httpHeaders": [{"name": "X-A", "value": "b"}]}},
            "livenessProbe": {"tcpSocket": {"port": 9000, "host": "localhost"}}}));
        let plans = probe_plans(&c);
        assert_eq!(
            plans[0].check,
            Check::Http {
                host: "127.0.0.1".into(),
                port: 8080,
                path: "/healthz".into(),
                headers: vec![("X-A".into(), "b".into())]
            }
        );
        assert_eq!(
            plans[1].check,
            Check::Tcp {
                host: "localhost".into(),
                port: 9000
            }
        );
        let https = container(json!({"name": "c", "readinessProbe": {"httpGet":
            {"port": 1, "scheme": "HTTPS"}}}));
        assert!(matches!(
            probe_plans(&https)[0].check,
            Check::Unsupported(_)
        ));
        let grpc = container(json!({"name": "c", "livenessProbe": {"grpc": {"port": 1}}}));
        assert!(matches!(probe_plans(&grpc)[0].check, Check::Unsupported(_)));
        let unnamed = container(json!({"name": "c", "livenessProbe": {"tcpSocket":
            {"port": "nope"}}}));
        assert!(matches!(
            probe_plans(&unnamed)[0].check,
            Check::Unsupported(_)
        ));
    }

    fn plan(kind: ProbeKind, success: u32, failure: u32) -> ProbePlan {
        ProbePlan {
            kind,
            check: Check::Exec(vec!["true".into()]),
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold: success,
            failure_threshold: failure,
        }
    }

    #[test]
    fn a_startup_probe_passes_once_or_fails_after_its_threshold() {
        let mut passes = Counter::new(&plan(ProbeKind::Startup, 1, 3));
        assert_eq!(passes.observe(false), None);
        assert_eq!(passes.observe(true), Some(ProbeResult::Started));
        assert!(passes.done());
        assert_eq!(passes.observe(false), None);
        let mut fails = Counter::new(&plan(ProbeKind::Startup, 1, 2));
        assert_eq!(fails.observe(false), None);
        assert_eq!(fails.observe(false), Some(ProbeResult::Failed));
    }

    #[test]
    fn readiness_changes_after_consecutive_results() {
        let mut c = Counter::new(&plan(ProbeKind::Readiness, 2, 2));
        assert_eq!(c.observe(true), None);
        assert_eq!(c.observe(false), None, "not ready yet: nothing changes");
        assert_eq!(c.observe(true), None);
        assert_eq!(c.observe(true), Some(ProbeResult::Ready(true)));
        assert_eq!(c.observe(false), None);
        assert_eq!(c.observe(true), None, "a success resets the failures");
        assert_eq!(c.observe(false), None);
        assert_eq!(c.observe(false), Some(ProbeResult::Ready(false)));
        assert!(!c.done());
    }

    #[test]
    fn liveness_fails_after_consecutive_failures() {
        let mut c = Counter::new(&plan(ProbeKind::Liveness, 1, 2));
        assert_eq!(c.observe(false), None);
        assert_eq!(c.observe(true), None);
        assert_eq!(c.observe(false), None);
        assert_eq!(c.observe(false), Some(ProbeResult::Failed));
        assert!(c.done());
    }
}
