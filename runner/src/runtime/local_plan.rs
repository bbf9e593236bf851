//! The plan of `herd-runner run`, from the manifests and the command line: which task, which
//! model key, which limits (command line > Run > Agent `runDefaults`). Pure: the files were
//! read and the environment captured before.

use std::time::Duration;

use herd_crds::agent::{AgentSpec, Provider, WebSearchProvider};
use herd_crds::duration::parse_duration;
use herd_crds::run::RunSpec;
use herd_crds::wire::Answer;
use serde::{Deserialize, Serialize};

use super::manifests::LocalManifests;
use crate::plan::{
    ApiKeys, EnvFacts, PlanError, PlanInputs, RunChoices, RunPlan, Standing, plan_run,
};
use herd_crds::run::ModelOverride;

/// Command-line choices that override the manifests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overrides {
    pub task: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub plan: bool,
    pub thinking: bool,
}

/// The plan of a local run. `api_key_env` is `--api-key-env`; without it the key comes from
/// the provider's usual variable (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`).
pub fn local_plan(
    manifests: &LocalManifests,
    overrides: &Overrides,
    api_key_env: Option<&str>,
    facts: &EnvFacts,
) -> Result<RunPlan, PlanError> {
    let agent = &manifests.agent.spec;
    let run = manifests.run.as_ref().map(|r| &r.spec);
    // In the order a user fixes them: the task, the model's key, the texts, the limits.
    let task = task(run, overrides)?;
    // A Run's `responses` answer the questions of its own task: a task of the command line's
    // gets its questions asked.
    let answers = run
        .filter(|run| run.task == task)
        .map(answers)
        .unwrap_or_default();
    let mut keys = keys(agent, api_key_env, overrides.base_url.as_deref(), facts)?;
    keys.mcp_headers = mcp_headers(manifests)?;
    let (soul, script) = texts(manifests)?;
    let time_left = timeout(agent, run)?;
    plan_run(PlanInputs {
        agent_name: manifests.agent_name(),
        agent,
        soul,
        script,
        choices: RunChoices {
            task,
            plan_mode: overrides
                .plan
                .then_some(true)
                .or(run.and_then(|r| r.plan_mode)),
            thinking: overrides
                .thinking
                .then_some(true)
                .or(run.and_then(|r| r.thinking)),
            model: model_override(run, overrides.model.as_deref()),
            base_url: overrides.base_url.clone(),
            subagent_type: None,
            answers,
            approval: run.and_then(|r| r.approval.clone()),
            input_timeout: run.and_then(|r| r.input_timeout.clone()),
        },
        standing: Standing {
            depth: 0,
            attempt: 1,
            time_left,
            max_model_calls: agent.run_defaults.max_model_calls,
            token_budget: agent.run_defaults.token_budget,
        },
        keys,
    })
}

/// The task: the command line's, else the Run's.
fn task(run: Option<&RunSpec>, overrides: &Overrides) -> Result<String, PlanError> {
    overrides
        .task
        .clone()
        .or_else(|| run.map(|r| r.task.clone()))
        .filter(|task| !task.trim().is_empty())
        .ok_or_else(|| {
            PlanError("no task: give it as the last argument, or -f a Run manifest".into())
        })
}

/// The texts `soulFrom` and `model.scriptFrom` point at, from the ConfigMaps given with -f.
fn texts(manifests: &LocalManifests) -> Result<(Option<String>, Option<String>), PlanError> {
    let agent = &manifests.agent.spec;
    let value_from = |field: &str, from| {
        manifests
            .value_from(field, from)
            .map_err(|error| PlanError(error.0))
    };
    let script = agent
        .model
        .as_ref()
        .and_then(|model| model.script_from.as_ref())
        .map(|from| value_from("spec.model.scriptFrom", from))
        .transpose()?;
    let soul = match (&agent.soul, &agent.soul_from) {
        (Some(soul), _) => Some(soul.clone()),
        (None, Some(from)) => Some(value_from("spec.soulFrom", from)?),
        (None, None) => None,
    };
    Ok((soul, script))
}

/// The model's key from `--api-key-env` or the provider's variable, the search engine's from
/// `<PROVIDER>_API_KEY`. Locally there is no operator default model, so the Agent needs one.
/// A model at its provider's public endpoint (no `baseURL`, no `--base-url`) without a key is
/// refused here: it could only fail, after retries.
fn keys(
    agent: &AgentSpec,
    api_key_env: Option<&str>,
    base_url: Option<&str>,
    facts: &EnvFacts,
) -> Result<ApiKeys, PlanError> {
    let Some(model) = &agent.model else {
        return Err(PlanError(
            "spec.model: the Agent names no model; locally there is no operator default, so set \
             spec.model"
                .into(),
        ));
    };
    let key_var = api_key_env.or_else(|| default_key_env(model.provider));
    let model_key = key_var.and_then(|var| facts.var(var)).map(str::to_owned);
    if let (Some(var), None) = (api_key_env, &model_key) {
        return Err(PlanError(format!(
            "--api-key-env {var}: the variable is not set or empty"
        )));
    }
    let public_endpoint = model.base_url.is_none() && base_url.is_none();
    if let (Some(var), None, true) = (key_var, &model_key, public_endpoint) {
        return Err(PlanError(format!(
            "spec.model: the {} model {} is at the provider's public endpoint, which needs a \
             key: set {var} (or name another variable with --api-key-env), or point \
             spec.model.baseURL or --base-url at a server of your own",
            format!("{:?}", model.provider).to_lowercase(),
            model.name
        )));
    }
    let search_key = agent
        .tools
        .as_ref()
        .and_then(|tools| tools.web_search.as_ref())
        .and_then(|search| facts.var(search_key_env(search.provider)))
        .map(str::to_owned);
    Ok(ApiKeys {
        model: model_key,
        web_search: search_key,
        ..ApiKeys::default()
    })
}

/// The MCP headers' values, from the Secrets given with -f.
fn mcp_headers(
    manifests: &LocalManifests,
) -> Result<std::collections::BTreeMap<(usize, usize), String>, PlanError> {
    let mut values = std::collections::BTreeMap::new();
    let spec = &manifests.agent.spec;
    let servers = spec.mcp.iter().flat_map(|mcp| mcp.servers.iter());
    for (i, server) in servers.enumerate() {
        for (j, header) in server.headers.iter().enumerate() {
            let field = format!("spec.mcp.servers[{i}].headers[{j}].secretKeyRef");
            let value = manifests
                .secret_value(&field, &header.secret_key_ref)
                .map_err(|error| PlanError(error.0))?;
            values.insert((i, j), value);
        }
    }
    Ok(values)
}

/// The Run's `timeout`, else the Agent's `runDefaults.timeout`: the whole run is ahead.
fn timeout(agent: &AgentSpec, run: Option<&RunSpec>) -> Result<Duration, PlanError> {
    let (field, text) = match run.and_then(|r| r.timeout.as_deref()) {
        Some(text) => ("spec.timeout", text),
        None => (
            "spec.runDefaults.timeout",
            agent.run_defaults.timeout.as_str(),
        ),
    };
    parse_duration(text).map_err(|error| PlanError(format!("{field}: {error}")))
}

/// The Run's `responses`, as answers to hand out before asking anyone.
pub(crate) fn answers(run: &RunSpec) -> Vec<Answer> {
    run.responses
        .iter()
        .map(herd_crds::wire::Answer::from)
        .collect()
}

/// The Run's `model` override merged with `--model`.
fn model_override(run: Option<&RunSpec>, cli_model: Option<&str>) -> Option<ModelOverride> {
    let from_run = run.and_then(|r| r.model.as_ref());
    if from_run.is_none() && cli_model.is_none() {
        return None;
    }
    Some(ModelOverride {
        name: cli_model
            .map(str::to_owned)
            .or_else(|| from_run.and_then(|m| m.name.clone())),
        temperature: from_run.and_then(|m| m.temperature),
        max_tokens: from_run.and_then(|m| m.max_tokens),
    })
}

/// The environment variable holding a provider's key when `--api-key-env` is not given.
fn default_key_env(provider: Provider) -> Option<&'static str> {
    match provider {
        Provider::Openai => Some("OPENAI_API_KEY"),
        Provider::Anthropic => Some("ANTHROPIC_API_KEY"),
        Provider::Scripted => None,
    }
}

/// Locally a search engine's key is `<PROVIDER>_API_KEY`.
fn search_key_env(provider: WebSearchProvider) -> &'static str {
    match provider {
        WebSearchProvider::Searxng => "SEARXNG_API_KEY",
        WebSearchProvider::Tavily => "TAVILY_API_KEY",
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::plan::facts;

    fn manifests(yaml: &str) -> LocalManifests {
        LocalManifests::from_sources(vec![(PathBuf::from("test.yaml"), yaml.to_owned())]).unwrap()
    }

    const AGENT: &str = "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata: {name: a}\nspec:\n  \
        model: {provider: openai, name: qwen, baseURL: 'http://localhost:8080/v1', supportsThinking: true}\n";

    #[test]
    fn command_line_beats_run_beats_agent_defaults() {
        let files = manifests(&format!(
            "{AGENT}  runDefaults: {{planMode: false, thinking: true, timeout: 10m}}\n---\n\
             apiVersion: herd.dev/v1alpha1\nkind: Run\nmetadata: {{name: r}}\nspec:\n  \
             agentRef: {{name: a}}\n  task: from run\n  planMode: true\n  thinking: false\n  \
             timeout: 1h\n"
        ));
        let none = facts(&[]);
        let plan = local_plan(&files, &Overrides::default(), None, &none).unwrap();
        assert_eq!(plan.task, "from run");
        assert!(plan.plan_mode);
        assert!(!plan.options.thinking);
        assert_eq!(plan.time_left, Duration::from_secs(3600));
        let overrides = Overrides {
            task: Some("from cli".into()),
            thinking: true,
            ..Overrides::default()
        };
        let plan = local_plan(&files, &overrides, None, &none).unwrap();
        assert_eq!(plan.task, "from cli");
        assert!(plan.options.thinking);
        let agent_only = manifests(&format!(
            "{AGENT}  runDefaults: {{planMode: false, thinking: true, timeout: 10m}}\n"
        ));
        let plan = local_plan(&agent_only, &overrides, None, &none).unwrap();
        assert_eq!(plan.time_left, Duration::from_secs(600));
        assert_eq!(plan.max_model_calls, 50);
    }

    #[test]
    fn a_missing_task_and_a_missing_model_are_explained() {
        let error =
            local_plan(&manifests(AGENT), &Overrides::default(), None, &facts(&[])).unwrap_err();
        assert!(error.0.contains("no task"), "{error}");
        let no_model = manifests(
            "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata: {name: a}\nspec: {}\n",
        );
        let overrides = Overrides {
            task: Some("t".into()),
            ..Overrides::default()
        };
        let error = local_plan(&no_model, &overrides, None, &facts(&[])).unwrap_err();
        assert!(
            error.0.contains("locally there is no operator default"),
            "{error}"
        );
    }

    #[test]
    fn keys_come_from_the_providers_variables_or_the_one_named() {
        let files = manifests(&format!(
            "{AGENT}  tools: {{webSearch: {{provider: tavily}}}}\n"
        ));
        let overrides = Overrides {
            task: Some("t".into()),
            ..Overrides::default()
        };
        let env = facts(&[
            ("OPENAI_API_KEY", "sk-default"),
            ("MY_KEY", "sk-mine"),
            ("TAVILY_API_KEY", "tvly-key"),
        ]);
        let plan = local_plan(&files, &overrides, None, &env).unwrap();
        assert_eq!(plan.model.api_key.as_deref(), Some("sk-default"));
        let search = plan.web_search.as_ref().unwrap();
        assert_eq!(search.api_key.as_deref(), Some("tvly-key"));
        let named = local_plan(&files, &overrides, Some("MY_KEY"), &env).unwrap();
        assert_eq!(named.model.api_key.as_deref(), Some("sk-mine"));
        let error = local_plan(&files, &overrides, Some("UNSET_KEY"), &env).unwrap_err();
        assert_eq!(
            error.0,
            "--api-key-env UNSET_KEY: the variable is not set or empty"
        );
    }

    #[test]
    fn a_runs_responses_answer_its_own_task_only() {
        let files = manifests(&format!(
            "{AGENT}---\napiVersion: herd.dev/v1alpha1\nkind: Run\nmetadata: {{name: r}}\n\
             spec:\n  agentRef: {{name: a}}\n  task: from run\n  responses:\n  \
             - {{id: q-1, answer: EU}}\n"
        ));
        let none = facts(&[]);
        let own = local_plan(&files, &Overrides::default(), None, &none).unwrap();
        assert_eq!(own.answers.len(), 1);
        // As a resumed run plans: the task as recorded.
        let recorded = Overrides {
            task: Some("from run".into()),
            ..Overrides::default()
        };
        assert_eq!(
            local_plan(&files, &recorded, None, &none)
                .unwrap()
                .answers
                .len(),
            1
        );
        let other = Overrides {
            task: Some("something else".into()),
            ..Overrides::default()
        };
        assert!(
            local_plan(&files, &other, None, &none)
                .unwrap()
                .answers
                .is_empty()
        );
    }

    #[test]
    fn the_public_endpoint_without_a_key_is_refused_before_any_call() {
        let public = manifests(
            "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata: {name: a}\nspec:\n  \
             model: {provider: openai, name: gpt-4o}\n",
        );
        let overrides = Overrides {
            task: Some("t".into()),
            ..Overrides::default()
        };
        let error = local_plan(&public, &overrides, None, &facts(&[])).unwrap_err();
        assert!(
            error.0.starts_with(
                "spec.model: the openai model gpt-4o is at the provider's public endpoint"
            ) && error.0.contains("set OPENAI_API_KEY"),
            "{error}"
        );
        let keyed = facts(&[("OPENAI_API_KEY", "sk-1")]);
        assert!(local_plan(&public, &overrides, None, &keyed).is_ok());
        let own_server = Overrides {
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            ..overrides.clone()
        };
        assert!(local_plan(&public, &own_server, None, &facts(&[])).is_ok());
        let local = manifests(AGENT);
        assert!(local_plan(&local, &overrides, None, &facts(&[])).is_ok());
    }

    #[test]
    fn an_unknown_search_engine_is_refused_with_the_manifest() {
        let error = LocalManifests::from_sources(vec![(
            PathBuf::from("agent.yaml"),
            format!("{AGENT}  tools: {{webSearch: {{provider: bing}}}}\n"),
        )])
        .unwrap_err();
        assert!(error.0.contains("bing"), "{error}");
        assert!(error.0.contains("searxng"), "{error}");
    }

    #[test]
    fn soul_and_script_come_from_the_configmaps_given() {
        let files = manifests(
            "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata: {name: a}\nspec:\n  \
             model: {provider: scripted, name: s, scriptFrom: {configMapKeyRef: {name: cm, key: script}}}\n  \
             soulFrom: {configMapKeyRef: {name: cm, key: soul}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata:\n  \
             script: 'rules: []'\n  soul: Be brief.\n",
        );
        let overrides = Overrides {
            task: Some("t".into()),
            ..Overrides::default()
        };
        let plan = local_plan(&files, &overrides, None, &facts(&[])).unwrap();
        assert_eq!(plan.soul.as_deref(), Some("Be brief."));
        assert_eq!(plan.model.script.as_deref(), Some("rules: []"));
    }

    #[test]
    fn model_overrides_merge_run_and_command_line() {
        assert_eq!(model_override(None, None), None);
        let run: RunSpec = serde_saphyr::from_str(
            "agentRef: {name: a}\ntask: t\nmodel: {name: big, temperature: 0.2}",
        )
        .unwrap();
        let merged = model_override(Some(&run), Some("small")).unwrap();
        assert_eq!(merged.name.as_deref(), Some("small"));
        assert_eq!(merged.temperature, Some(0.2));
    }
}
