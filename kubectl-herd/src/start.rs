//! `kubectl herd run AGENT TASK [--input FILE]... [options]`: creates the ConfigMap of the
//! files first, then the Run, then makes the Run the ConfigMap's owner (so it goes with it);
//! `run -f MANIFEST` creates the Run a manifest describes. The Agent is read first: a missing
//! one stops the command, one not ready is a warning (an error with `--wait`).

use std::path::Path;

use herd_crds::agent::Agent;
use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::reason::condition_type;
use herd_crds::run::Run;
use herd_crds::terminal_text::{for_terminal, one_line};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::connect::Cluster;
use crate::error::{CliError, Target, api_error};
use crate::manifest::{RunRequest, check_task, inputs_config_map, owned_by_run, run_manifest};
use crate::runs::runs;

/// Reads the `--input` files: their names and bytes.
pub fn read_files(paths: &[impl AsRef<Path>]) -> Result<Vec<(String, Vec<u8>)>, CliError> {
    paths
        .iter()
        .map(|path| {
            let path = path.as_ref();
            let shown = for_terminal(&path.display().to_string()).into_owned();
            if path.is_dir() {
                return Err(CliError::new(format!(
                    "{shown} is a folder: give its files one by one with --input"
                )));
            }
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| CliError::new(format!("{shown} has no usable file name")))?;
            let bytes = std::fs::read(path)
                .map_err(|e| CliError::new(format!("cannot read {shown}: {e}")))?;
            Ok((name.to_owned(), bytes))
        })
        .collect()
}

/// Creates the Run (and the ConfigMap of `files`), as a server-side dry run with `dry_run`;
/// the created Run, and a warning when the ConfigMap could not be given to it.
pub async fn start(
    cluster: &Cluster,
    request: &RunRequest,
    files: &[(String, Vec<u8>)],
    dry_run: bool,
) -> Result<(Run, Option<String>), CliError> {
    let namespace = cluster.namespace.as_str();
    // Checked first, so that files are never uploaded for a Run that cannot start.
    let config_map = inputs_config_map(&request.agent, files).map_err(CliError::new)?;
    check_task(&request.task).map_err(CliError::new)?;
    let post = PostParams {
        dry_run,
        ..PostParams::default()
    };

    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), namespace);
    let inputs = match &config_map {
        Some(config_map) => {
            let created = config_maps.create(&post, config_map).await.map_err(|e| {
                api_error(
                    &e,
                    Target {
                        doing: "creating",
                        object: "the ConfigMap of the --input files",
                        namespace,
                        not_found: "the namespace may not exist",
                    },
                )
            })?;
            Some(created.name_any())
        }
        None => None,
    };
    let run = run_manifest(request, inputs.as_deref()).map_err(CliError::new)?;
    let object = format!("a Run of Agent {}", request.agent);
    let created = match runs(cluster).create(&post, &run).await {
        Ok(created) => created,
        Err(error) => {
            if let Some(inputs) = inputs.as_ref().filter(|_| !dry_run) {
                // Nothing will use the files: leave nothing behind.
                let _ = config_maps.delete(inputs, &DeleteParams::default()).await;
            }
            return Err(api_error(
                &error,
                Target {
                    doing: "creating",
                    object: &object,
                    namespace,
                    not_found: "the namespace may not exist",
                },
            ));
        }
    };
    let warning = match inputs.as_ref().filter(|_| !dry_run) {
        Some(inputs) => own(&config_maps, inputs, &created).await.err(),
        None => None,
    };
    Ok((created, warning))
}

/// Refuses a Run of an Agent that does not exist: it would wait until its timeout. An Agent
/// that is not ready comes back as the sentence that says why. Someone who may not read Agents
/// is not stopped.
pub async fn check_agent(cluster: &Cluster, agent: &str) -> Result<Option<String>, CliError> {
    let agents: Api<Agent> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let object = format!("Agent {agent}");
    let target = cluster.target("reading", &object, "kubectl herd agents lists them");
    match agents.get_opt(agent).await {
        Ok(Some(found)) => Ok(not_ready(&found)),
        Ok(None) => Err(CliError::new(format!(
            "Agent {agent} not found in namespace {} ({}; create it first, or choose another -n)",
            cluster.namespace, target.not_found
        ))),
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(None),
        Err(error) => Err(api_error(&error, target)),
    }
}

/// Why `agent` is not ready, when its `Ready` condition says it is not (`None` while it is, or
/// before the operator looked at it).
pub fn not_ready(agent: &Agent) -> Option<String> {
    let conditions = agent.status.as_ref().map(|s| s.conditions.as_slice())?;
    let ready = find_condition(conditions, condition_type::READY)?;
    (ready.status == ConditionStatus::False).then(|| {
        format!(
            "Agent {} is not ready ({}): {}",
            one_line(&agent.name_any()),
            one_line(&ready.reason),
            one_line(&ready.message)
        )
    })
}

/// Reads the Run manifest of `run -f` (YAML or JSON; `-` is stdin).
pub fn read_manifest(path: &Path) -> Result<Run, CliError> {
    let shown = for_terminal(&path.display().to_string()).into_owned();
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|e| CliError::new(format!("cannot read {shown}: {e}")))?;
    parse_manifest(&text).map_err(|why| CliError::new(format!("{shown}: {why}")))
}

/// The Run a manifest's text describes; or why it is not one.
pub fn parse_manifest(text: &str) -> Result<Run, String> {
    let value: serde_json::Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?
    } else {
        serde_saphyr::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?
    };
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or_default();
    let api_version = value
        .get("apiVersion")
        .and_then(|k| k.as_str())
        .unwrap_or_default();
    if (api_version, kind) != ("herd.dev/v1alpha1", "Run") {
        return Err(format!(
            "holds a {kind:?} of {api_version:?}, not a Run of herd.dev/v1alpha1 (kubectl apply -f \
             creates other objects)"
        ));
    }
    let run: Run = serde_json::from_value(value).map_err(|e| format!("not a valid Run: {e}"))?;
    if run.metadata.name.is_none() && run.metadata.generate_name.is_none() {
        return Err("the Run has neither metadata.name nor metadata.generateName".into());
    }
    check_task(&run.spec.task)?;
    Ok(run)
}

/// Makes `run` the owner of the ConfigMap `inputs`; a warning when it cannot.
async fn own(config_maps: &Api<ConfigMap>, inputs: &str, run: &Run) -> Result<(), String> {
    let owner = owned_by_run(&run.name_any(), &run.uid().unwrap_or_default());
    let patch = json!({"metadata": {"ownerReferences": [owner]}});
    config_maps
        .patch(inputs, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(|e| {
            format!(
                "ConfigMap {inputs} holds the files but is not owned by Run {}: {} (delete it \
                 once the Run is done)",
                run.name_any(),
                herd_crds::terminal_text::one_line(&e.to_string())
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.md");
        std::fs::write(&path, "# Notes").unwrap();
        let files = read_files(&[&path]).unwrap();
        assert_eq!(files, vec![("notes.md".to_owned(), b"# Notes".to_vec())]);
    }

    #[test]
    fn folders_and_missing_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let why = read_files(&[dir.path()]).unwrap_err();
        assert!(
            why.message
                .ends_with("is a folder: give its files one by one with --input"),
            "{why}"
        );
        let missing = dir.path().join("gone.md");
        let why = read_files(&[&missing]).unwrap_err();
        assert!(
            why.message.starts_with("cannot read ") && why.message.contains("gone.md"),
            "{why}"
        );
    }
}
