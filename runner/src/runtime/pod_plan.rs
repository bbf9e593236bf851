//! The plan of a Run's pod, from the run API's `RunConfig` (what the operator snapshotted at
//! admission) and the `agent` container's environment. Pure, like `local_plan`, so the same
//! manifests plan the same run in a pod and on a laptop.

use std::collections::BTreeMap;
use std::time::Duration;

use herd_crds::agent::{AgentSpec, header_env_var};
use herd_crds::wire::RunConfig;

use crate::plan::{
    ApiKeys, EnvFacts, PlanError, PlanInputs, RunChoices, RunPlan, Standing, plan_run,
};

/// The `agent` container's variable holding the model's key (from `apiKeySecretRef`).
pub const MODEL_KEY_VAR: &str = "HERD_MODEL_API_KEY";
/// The `agent` container's variable holding the search engine's key.
pub const WEB_SEARCH_KEY_VAR: &str = "HERD_WEB_SEARCH_API_KEY";

/// The plan of the Run `config` describes.
pub fn pod_plan(config: &RunConfig, facts: &EnvFacts) -> Result<RunPlan, PlanError> {
    let run = &config.run;
    let mcp_headers = mcp_headers(&config.agent, facts)?;
    plan_run(PlanInputs {
        agent_name: config.agent_name.clone(),
        agent: &config.agent,
        soul: config.agent.soul.clone(),
        script: config.script.clone(),
        choices: RunChoices {
            task: run.task.clone(),
            plan_mode: run.plan_mode,
            thinking: run.thinking,
            model: run.model.clone(),
            base_url: None,
            subagent_type: run.subagent_type.clone(),
            answers: config.responses.clone(),
            approval: run.approval.clone(),
            input_timeout: run.input_timeout.clone(),
        },
        standing: Standing {
            depth: config.depth,
            attempt: config.attempt,
            time_left: Duration::from_secs(config.seconds_left),
            max_model_calls: config.max_model_calls,
            token_budget: config.token_budget,
        },
        keys: ApiKeys {
            model: facts.var(MODEL_KEY_VAR).map(str::to_owned),
            web_search: facts.var(WEB_SEARCH_KEY_VAR).map(str::to_owned),
            mcp_headers,
        },
    })
}

/// The MCP headers' values, from the variables the operator fed from their Secrets.
fn mcp_headers(
    agent: &AgentSpec,
    facts: &EnvFacts,
) -> Result<BTreeMap<(usize, usize), String>, PlanError> {
    let mut values = BTreeMap::new();
    let servers = agent.mcp.iter().flat_map(|mcp| mcp.servers.iter());
    for (i, server) in servers.enumerate() {
        for (j, header) in server.headers.iter().enumerate() {
            let var = header_env_var(i, j);
            let value = facts.var(&var).ok_or_else(|| {
                PlanError(format!(
                    "spec.mcp.servers[{i}].headers[{j}]: {var} is unset or empty (Secret {} key \
                     {} holds the value of header {})",
                    header.secret_key_ref.name, header.secret_key_ref.key, header.name
                ))
            })?;
            values.insert((i, j), value.to_owned());
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::plan::facts;
    use crate::runtime::local_plan::{Overrides, local_plan};
    use crate::runtime::manifests::LocalManifests;

    fn repository(path: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
    }

    fn fixture(name: &str) -> RunConfig {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/runtime/fixtures")
            .join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn the_pods_run_config_plans_what_the_same_manifests_plan_locally() {
        let manifests =
            LocalManifests::load(&[repository("examples/local/researcher.yaml")]).unwrap();
        let local = local_plan(&manifests, &Overrides::default(), None, &facts(&[])).unwrap();
        let pod = pod_plan(&fixture("researcher.run-config.json"), &facts(&[])).unwrap();
        assert_eq!(pod, local);
        // The comparison compared something real.
        assert_eq!(pod.agent_name, "researcher");
        assert!(pod.model.script.as_deref().unwrap_or("").contains("rules:"));
        assert_eq!(pod.answers.len(), 1);
        assert!(pod.subagents.is_some() && pod.plan_mode && pod.memory.enabled);
    }

    #[test]
    fn keys_from_the_pods_secrets_plan_like_the_users_variables() {
        let manifests =
            LocalManifests::load(&[repository("examples/local/all-features.yaml")]).unwrap();
        let overrides = Overrides {
            task: Some("Map the European market for heat pumps.".into()),
            ..Overrides::default()
        };
        let laptop = facts(&[
            ("OPENAI_API_KEY", "sk-test"),
            ("SEARXNG_API_KEY", "sx-test"),
        ]);
        let local = local_plan(&manifests, &overrides, None, &laptop).unwrap();
        let pod_env = facts(&[(MODEL_KEY_VAR, "sk-test"), (WEB_SEARCH_KEY_VAR, "sx-test")]);
        let pod = pod_plan(&fixture("all-features.run-config.json"), &pod_env).unwrap();
        assert_eq!(pod, local);
        assert_eq!(pod.model.api_key.as_deref(), Some("sk-test"));
        assert_eq!(pod.context_window(), Some(4096));
        assert!(pod.web_search.is_some() && pod.tool_groups.is_some());
    }

    #[test]
    fn mcp_header_values_come_from_their_variables() {
        let mut config = fixture("researcher.run-config.json");
        config.agent.mcp = Some(
            serde_saphyr::from_str(
                "servers:\n- {name: time, command: [t]}\n- {name: docs, url: 'http://d/mcp', \
                 headers: [{name: X-Api-Key, secretKeyRef: {name: k, key: v}}]}",
            )
            .unwrap(),
        );
        let error = pod_plan(&config, &facts(&[])).unwrap_err();
        assert!(
            error
                .0
                .starts_with("spec.mcp.servers[1].headers[0]: HERD_MCP_1_HEADER_0 is unset"),
            "{error}"
        );
        let plan = pod_plan(&config, &facts(&[("HERD_MCP_1_HEADER_0", "s3cret")])).unwrap();
        let crate::plan::McpTransport::Http { headers, .. } = &plan.mcp.servers[1].transport else {
            panic!("docs is an HTTP server");
        };
        assert_eq!(headers[0].value, "s3cret");
    }

    #[test]
    fn a_child_runs_with_what_its_parent_left_it() {
        let mut config = fixture("researcher.run-config.json");
        config.depth = 1;
        config.attempt = 2;
        config.seconds_left = 42;
        config.max_model_calls = 7;
        config.token_budget = Some(9000);
        config.run.subagent_type = Some("general-purpose".into());
        let plan = pod_plan(&config, &facts(&[])).unwrap();
        assert_eq!(plan.depth, 1);
        assert_eq!(plan.attempt, 2);
        assert_eq!(plan.time_left, Duration::from_secs(42));
        assert_eq!(plan.max_model_calls, 7);
        assert_eq!(plan.token_budget, Some(9000));
        assert!(!plan.clarification);
        assert!(!plan.delegates_at(plan.depth), "maxDepth 1 is reached");
    }
}
