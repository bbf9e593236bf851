//! The `agent` container's environment, as the operator sets it (`desired_pod`): where the run
//! API, its token and CA are, which Run and attempt this pod serves, where the sandbox's
//! socket and the termination log are. The model's and the tools' keys are read by the plan
//! (`pod_plan`).

use std::path::PathBuf;

use crate::control::run_api::RunApiTarget;
use crate::plan::EnvFacts;

/// The socket of the `sandbox` container, when `HERD_SANDBOX_SOCKET` is unset.
pub const DEFAULT_SANDBOX_SOCKET: &str = "/run/herd/sandbox.sock";
/// Where the kubelet reads the termination message, when `HERD_TERMINATION_LOG` is unset.
pub const DEFAULT_TERMINATION_LOG: &str = "/dev/termination-log";

/// What `herd-runner pod` reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodEnv {
    /// The run API and this pod's Run.
    pub target: RunApiTarget,
    /// `HERD_TOKEN_FILE`: the projected service-account token (audience `herd.dev`).
    pub token_file: PathBuf,
    /// `HERD_CA_FILE`: the CA bundle the run API's certificate is checked against.
    pub ca_file: PathBuf,
    /// `HERD_ATTEMPT`: the Run's attempt this pod serves.
    pub attempt: u32,
    /// `HERD_SANDBOX_SOCKET`.
    pub sandbox_socket: PathBuf,
    /// `HERD_TERMINATION_LOG`.
    pub termination_log: PathBuf,
}

impl PodEnv {
    /// Reads the contract from `facts`; names every variable that is missing or wrong at once.
    pub fn from_facts(facts: &EnvFacts) -> Result<Self, String> {
        let mut problems = Vec::new();
        let mut required = |name: &str| match facts.var(name) {
            Some(value) => value.to_owned(),
            None => {
                problems.push(format!("{name} is unset"));
                String::new()
            }
        };
        let api_url = required("HERD_API_URL");
        let namespace = required("HERD_RUN_NAMESPACE");
        let name = required("HERD_RUN_NAME");
        let token_file = required("HERD_TOKEN_FILE");
        let ca_file = required("HERD_CA_FILE");
        let attempt_text = required("HERD_ATTEMPT");
        let attempt = match attempt_text.parse::<u32>() {
            Ok(attempt) if attempt >= 1 => attempt,
            _ => {
                if !attempt_text.is_empty() {
                    problems.push(format!(
                        "HERD_ATTEMPT '{attempt_text}' is not an attempt number (1, 2, ...)"
                    ));
                }
                0
            }
        };
        if !problems.is_empty() {
            return Err(format!(
                "herd-runner pod runs in a Run's pod, set up by the operator: {}",
                problems.join("; ")
            ));
        }
        let path_or = |name: &str, default: &str| PathBuf::from(facts.var(name).unwrap_or(default));
        Ok(PodEnv {
            target: RunApiTarget {
                api_url,
                namespace,
                name,
            },
            token_file: PathBuf::from(token_file),
            ca_file: PathBuf::from(ca_file),
            attempt,
            sandbox_socket: path_or("HERD_SANDBOX_SOCKET", DEFAULT_SANDBOX_SOCKET),
            termination_log: path_or("HERD_TERMINATION_LOG", DEFAULT_TERMINATION_LOG),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use herd_operator::decide::run_pod::{PodConfig, PodInputs, desired_pod};
    use herd_operator::decide::run_snapshot::Snapshot;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::plan::facts;

    /// The plain values of the `agent` container's environment in the operator's Pod.
    fn operators_agent_env() -> EnvFacts {
        let snapshot: Snapshot = serde_json::from_value(json!({
            "agentName": "helper",
            "agent": {"model": {"provider": "openai", "name": "m",
                                "apiKeySecretRef": {"name": "llm", "key": "api-key"}}},
            "run": {"planMode": false, "thinking": false, "timeoutSeconds": 1800,
                    "inputTimeoutSeconds": 3600, "maxModelCalls": 5, "retries": 0},
            "skills": [],
            "runnerImage": "runner:1",
            "sandboxImage": "sandbox:1",
            "depth": 0
        }))
        .unwrap();
        let pod = desired_pod(
            &PodInputs {
                run: "market-map",
                namespace: "team-a",
                owner: OwnerReference::default(),
                attempt: 2,
                snapshot: &snapshot,
                inputs: &[],
                skills: &[],
                time_left: Duration::from_secs(600),
                answers_given: 0,
                traceparent: None,
                egress_set: "0123456789abcdef",
            },
            &PodConfig {
                run_api_url: "https://herd-operator.herd-system.svc:8443".into(),
                runner_resources: Default::default(),
                otlp_endpoint: None,
            },
        );
        let spec = pod.spec.unwrap();
        let agent = spec.containers.iter().find(|c| c.name == "agent").unwrap();
        assert_eq!(
            agent.command.as_deref(),
            Some(&["herd-runner".to_owned(), "pod".to_owned()][..])
        );
        agent
            .env
            .iter()
            .flatten()
            .filter_map(|var| Some((var.name.clone(), var.value.clone()?)))
            .collect()
    }

    #[test]
    fn the_operators_pod_sets_everything_the_runner_reads() {
        let env = PodEnv::from_facts(&operators_agent_env()).unwrap();
        assert_eq!(
            env,
            PodEnv {
                target: RunApiTarget {
                    api_url: "https://herd-operator.herd-system.svc:8443".into(),
                    namespace: "team-a".into(),
                    name: "market-map".into(),
                },
                token_file: "/var/run/secrets/herd.dev/token".into(),
                ca_file: "/var/run/secrets/herd.dev/ca.crt".into(),
                attempt: 2,
                sandbox_socket: DEFAULT_SANDBOX_SOCKET.into(),
                termination_log: DEFAULT_TERMINATION_LOG.into(),
            }
        );
    }

    #[test]
    fn every_missing_or_wrong_variable_is_named_at_once() {
        let error = PodEnv::from_facts(&facts(&[
            ("HERD_API_URL", "https://a"),
            ("HERD_ATTEMPT", "zero"),
        ]))
        .unwrap_err();
        assert_eq!(
            error,
            "herd-runner pod runs in a Run's pod, set up by the operator: HERD_RUN_NAMESPACE is \
             unset; HERD_RUN_NAME is unset; HERD_TOKEN_FILE is unset; HERD_CA_FILE is unset; \
             HERD_ATTEMPT 'zero' is not an attempt number (1, 2, ...)"
        );
        let zero = PodEnv::from_facts(&facts(&[
            ("HERD_API_URL", "https://a"),
            ("HERD_RUN_NAMESPACE", "n"),
            ("HERD_RUN_NAME", "r"),
            ("HERD_TOKEN_FILE", "/t"),
            ("HERD_CA_FILE", "/c"),
            ("HERD_ATTEMPT", "0"),
            ("HERD_SANDBOX_SOCKET", "/tmp/s.sock"),
        ]));
        assert!(
            zero.unwrap_err()
                .ends_with("HERD_ATTEMPT '0' is not an attempt number (1, 2, ...)")
        );
    }
}
