//! `.herd/run.json`: what a local run was started with, so `--resume` plans exactly the same
//! run (the same manifest texts, task and command-line choices) in a later process. Files that
//! hold a Secret are kept by path only and read again on resume: no secret is copied here.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::local_plan::Overrides;
use super::manifests::{LocalManifests, ManifestsError, holds_a_secret};

/// The record's file name in the work folder's `.herd/`.
pub const RUN_RECORD: &str = "run.json";

/// What is kept.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RunRecord {
    sources: Vec<(PathBuf, String)>,
    /// Files holding Secrets, read again on resume.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    secret_files: Vec<PathBuf>,
    /// The task as planned (from the command line or the Run).
    task: String,
    model: Option<String>,
    base_url: Option<String>,
    plan: bool,
    thinking: bool,
    api_key_env: Option<String>,
    /// When the run started (absent in records of older runners).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    started_at: Option<jiff::Timestamp>,
}

/// The record could not be read or written; the message says which file and why.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RecordError(pub String);

impl RunRecord {
    /// The record of a run planned from `manifests` with `overrides`, whose task became `task`.
    pub fn new(
        manifests: &LocalManifests,
        task: &str,
        overrides: &Overrides,
        api_key_env: Option<&str>,
    ) -> Self {
        let (secret, plain): (Vec<_>, Vec<_>) = manifests
            .sources
            .iter()
            .cloned()
            .partition(|(_, text)| holds_a_secret(text));
        RunRecord {
            sources: plain,
            secret_files: secret.into_iter().map(|(path, _)| path).collect(),
            task: task.to_owned(),
            model: overrides.model.clone(),
            base_url: overrides.base_url.clone(),
            plan: overrides.plan,
            thinking: overrides.thinking,
            api_key_env: api_key_env.map(str::to_owned),
            started_at: Some(jiff::Timestamp::now()),
        }
    }

    /// The task as planned.
    pub fn task(&self) -> &str {
        &self.task
    }

    /// When the run started, if the record says.
    pub fn started_at(&self) -> Option<jiff::Timestamp> {
        self.started_at
    }

    /// The manifests, parsed again from the texts kept and the Secret files read anew.
    pub fn manifests(&self) -> Result<LocalManifests, ManifestsError> {
        let mut sources = self.sources.clone();
        for path in &self.secret_files {
            let text = std::fs::read_to_string(path).map_err(|error| {
                ManifestsError(format!(
                    "cannot resume: {} (a Secret the run was started with): {error}",
                    path.display()
                ))
            })?;
            sources.push((path.clone(), text));
        }
        LocalManifests::from_sources(sources)
    }

    /// The command-line choices, with the task as planned.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            task: Some(self.task.clone()),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            plan: self.plan,
            thinking: self.thinking,
        }
    }

    /// `--api-key-env`, as given.
    pub fn api_key_env(&self) -> Option<&str> {
        self.api_key_env.as_deref()
    }

    /// Reads the record of the run in `state_dir`.
    pub fn read(state_dir: &Path) -> Result<Self, RecordError> {
        let path = state_dir.join(RUN_RECORD);
        let bytes = std::fs::read(&path).map_err(|error| {
            RecordError(format!(
                "cannot resume: {} is missing ({error}); --resume takes the work folder of a run \
                 that asked a question or was interrupted",
                path.display()
            ))
        })?;
        serde_json::from_slice(&bytes)
            .map_err(|error| RecordError(format!("{} is damaged: {error}", path.display())))
    }

    /// Writes the record into `state_dir`.
    pub fn write(&self, state_dir: &Path) -> Result<(), RecordError> {
        let path = state_dir.join(RUN_RECORD);
        let json =
            serde_json::to_vec_pretty(self).map_err(|error| RecordError(error.to_string()))?;
        std::fs::write(&path, json)
            .map_err(|error| RecordError(format!("cannot write {}: {error}", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::plan::facts;
    use crate::runtime::local_plan::local_plan;

    #[test]
    fn a_resumed_run_plans_exactly_what_the_first_run_planned() -> anyhow::Result<()> {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/local/all-features.yaml");
        let manifests = LocalManifests::load(&[path])?;
        let overrides = Overrides {
            task: Some("Compare heat pumps".into()),
            model: Some("bigger".into()),
            base_url: Some("http://127.0.0.1:9999/v1".into()),
            plan: false,
            thinking: true,
        };
        let facts = facts(&[("OPENAI_API_KEY", "sk-test")]);
        let first = local_plan(&manifests, &overrides, None, &facts)?;
        let dir = tempfile::tempdir()?;
        RunRecord::new(&manifests, &first.task, &overrides, None).write(dir.path())?;

        let record = RunRecord::read(dir.path())?;
        let resumed = local_plan(
            &record.manifests()?,
            &record.overrides(),
            record.api_key_env(),
            &facts,
        )?;
        assert_eq!(resumed, first);
        Ok(())
    }

    #[test]
    fn secret_files_are_kept_by_path_and_read_again_on_resume() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let agent = dir.path().join("agent.yaml");
        std::fs::write(
            &agent,
            "apiVersion: herd.dev/v1alpha1\nkind: Agent\nmetadata: {name: a}\nspec:\n  \
             model: {provider: openai, name: q, baseURL: 'http://h:1/v1'}\n  \
             mcp: {servers: [{name: docs, url: 'http://d/mcp', headers: [{name: X-Key, \
             secretKeyRef: {name: docs, key: token}}]}]}\n",
        )?;
        let secret = dir.path().join("secret.yaml");
        std::fs::write(
            &secret,
            "apiVersion: v1\nkind: Secret\nmetadata: {name: docs, labels: \
             {herd.dev/model-credentials: 'true'}}\nstringData: {token: s3cret-value}\n",
        )?;
        let manifests = LocalManifests::load(&[agent, secret.clone()])?;
        let overrides = Overrides {
            task: Some("t".into()),
            ..Overrides::default()
        };
        let first = local_plan(&manifests, &overrides, None, &facts(&[]))?;
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state)?;
        RunRecord::new(&manifests, &first.task, &overrides, None).write(&state)?;
        let written = std::fs::read_to_string(state.join(RUN_RECORD))?;
        assert!(!written.contains("s3cret-value"), "{written}");
        let record = RunRecord::read(&state)?;
        let resumed = local_plan(&record.manifests()?, &record.overrides(), None, &facts(&[]))?;
        assert_eq!(resumed, first);
        std::fs::remove_file(&secret)?;
        let error = record.manifests().unwrap_err();
        assert!(
            error.0.contains("a Secret the run was started with"),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn a_missing_or_damaged_record_says_what_to_do() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let missing = RunRecord::read(dir.path()).unwrap_err();
        assert!(
            missing.0.contains("--resume takes the work folder"),
            "{missing}"
        );
        std::fs::write(dir.path().join(RUN_RECORD), "{")?;
        let damaged = RunRecord::read(dir.path()).unwrap_err();
        assert!(damaged.0.contains("is damaged"), "{damaged}");
        Ok(())
    }
}
