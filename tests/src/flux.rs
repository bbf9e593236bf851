//! Flux's custom health checks (`spec.healthCheckExprs` of a kustomize.toolkit.fluxcd.io/v1
//! Kustomization) as kustomize-controller evaluates them, with the `cel` crate for cel-go: the
//! object's top-level fields as variables, integers as CEL ints (as in Kubernetes'
//! unstructured objects), then Flux's order: a `status.observedGeneration` other than
//! `metadata.generation` is InProgress; else `inProgress`, `failed`, `current`, the first true
//! one decides and none true is InProgress; an expression that fails to evaluate makes the
//! status Unknown (kstatus's generic reader), which Flux polls again.
//!
//! Also what the chart ships: the expressions of `charts/herd/files/flux/kustomization.yaml`.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::fixtures::{read_yaml, repo_root};

/// One entry of `spec.healthCheckExprs`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthCheckExprs {
    /// The custom resource's API version.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// True when the resource is ready.
    pub current: String,
    /// True while it is being reconciled.
    #[serde(default)]
    pub in_progress: Option<String>,
    /// True when it failed.
    #[serde(default)]
    pub failed: Option<String>,
}

/// kstatus's verdicts as Flux reaches them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FluxStatus {
    /// Ready.
    Current,
    /// Still being reconciled (or nothing true yet).
    InProgress,
    /// Failed.
    Failed,
    /// An expression could not be evaluated; its error.
    Unknown(String),
}

/// The shipped snippet's entry for `kind`.
pub fn shipped_exprs(kind: &str) -> anyhow::Result<HealthCheckExprs> {
    let path = repo_root().join("charts/herd/files/flux/kustomization.yaml");
    let kustomization = read_yaml(&path)?;
    let entries: Vec<HealthCheckExprs> = serde_json::from_value(
        kustomization
            .pointer("/spec/healthCheckExprs")
            .cloned()
            .context("the snippet has no spec.healthCheckExprs")?,
    )?;
    entries
        .into_iter()
        .find(|e| e.kind == kind)
        .with_context(|| format!("the snippet has no entry for {kind}"))
}

/// Evaluates one expression on `object` as a boolean.
pub fn evaluate(expression: &str, object: &Value) -> anyhow::Result<bool> {
    let program = cel::Program::compile(expression)
        .map_err(|e| anyhow!("{expression:?} does not parse: {e}"))?;
    let mut context = cel::Context::default();
    let fields = object
        .as_object()
        .context("the object is not a JSON object")?;
    for (name, value) in fields {
        context.add_variable_from_value(name.clone(), cel_value(value));
    }
    match program.execute(&context) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => bail!("{expression:?} is not a boolean: {other:?}"),
        Err(e) => bail!("{expression:?} failed: {e}"),
    }
}

/// What Flux makes of `object` with these expressions.
pub fn flux_status(exprs: &HealthCheckExprs, object: &Value) -> FluxStatus {
    let observed = object
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    let generation = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    if let (Some(observed), Some(generation)) = (observed, generation)
        && observed != generation
    {
        return FluxStatus::InProgress;
    }
    let ordered = [
        (exprs.in_progress.as_deref(), FluxStatus::InProgress),
        (exprs.failed.as_deref(), FluxStatus::Failed),
        (Some(exprs.current.as_str()), FluxStatus::Current),
    ];
    for (expression, status) in ordered {
        let Some(expression) = expression else {
            continue;
        };
        match evaluate(expression, object) {
            Ok(true) => return status,
            Ok(false) => {}
            Err(e) => return FluxStatus::Unknown(format!("{e:#}")),
        }
    }
    FluxStatus::InProgress
}

/// JSON as CEL sees Kubernetes' unstructured objects: integers are ints.
fn cel_value(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(cel_value).collect())),
        Value::Object(fields) => {
            let map: HashMap<cel::objects::Key, cel::Value> = fields
                .iter()
                .map(|(k, v)| (cel::objects::Key::String(Arc::new(k.clone())), cel_value(v)))
                .collect();
            cel::Value::Map(cel::objects::Map { map: Arc::new(map) })
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn exprs() -> HealthCheckExprs {
        HealthCheckExprs {
            api_version: "example.com/v1".into(),
            kind: "Thing".into(),
            in_progress: Some("status.phase == 'Working'".into()),
            failed: Some("status.phase == 'Broken' || status.phase == 'Working'".into()),
            current: "has(status.phase) && status.phase != 'Idle'".into(),
        }
    }

    fn thing(phase: &str) -> Value {
        json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "phase": phase}})
    }

    #[test]
    fn the_first_true_expression_decides_in_fluxs_order() {
        assert_eq!(
            flux_status(&exprs(), &thing("Working")),
            FluxStatus::InProgress
        );
        assert_eq!(flux_status(&exprs(), &thing("Broken")), FluxStatus::Failed);
        assert_eq!(flux_status(&exprs(), &thing("Done")), FluxStatus::Current);
        assert_eq!(
            flux_status(&exprs(), &thing("Idle")),
            FluxStatus::InProgress
        );
    }

    #[test]
    fn a_generation_not_observed_is_in_progress_before_any_expression() {
        let stale = json!({"metadata": {"generation": 3},
            "status": {"observedGeneration": 2, "phase": "Broken"}});
        assert_eq!(flux_status(&exprs(), &stale), FluxStatus::InProgress);
        let unobserved = json!({"metadata": {"generation": 3}, "status": {"phase": "Done"}});
        assert_eq!(flux_status(&exprs(), &unobserved), FluxStatus::Current);
    }

    #[test]
    fn an_expression_that_cannot_be_evaluated_is_unknown() {
        let no_status = json!({"metadata": {"generation": 1}});
        assert!(matches!(
            flux_status(&exprs(), &no_status),
            FluxStatus::Unknown(_)
        ));
        let not_bool = HealthCheckExprs {
            current: "status.phase".into(),
            in_progress: None,
            failed: None,
            ..exprs()
        };
        assert!(matches!(
            flux_status(&not_bool, &thing("Done")),
            FluxStatus::Unknown(e) if e.contains("not a boolean")
        ));
    }

    #[test]
    fn integers_are_ints_and_lists_of_maps_work_with_macros() {
        let object = json!({"metadata": {"generation": 5, "labels": {"herd.dev/run": "x"}},
            "status": {"observedGeneration": 5,
                "conditions": [{"type": "Ready", "status": "True"}]}});
        for (expression, expected) in [
            ("status.observedGeneration == metadata.generation", true),
            ("metadata.generation == 5", true),
            ("metadata.labels['herd.dev/run'] == 'x'", true),
            ("has(status.missing)", false),
            (
                "status.conditions.exists(c, c.type == 'Ready' && c.status in ['True'])",
                true,
            ),
            ("status.conditions.exists(c, c.type == 'Stalled')", false),
        ] {
            assert_eq!(
                evaluate(expression, &object).unwrap(),
                expected,
                "{expression}"
            );
        }
        assert!(evaluate("(", &object).is_err());
    }

    #[test]
    fn the_chart_readme_shows_the_shipped_kustomization() {
        let readme = std::fs::read_to_string(repo_root().join("charts/herd/README.md")).unwrap();
        let shown: Vec<Value> = crate::fixtures::fenced_blocks(&readme, "yaml")
            .iter()
            .map(|block| crate::fixtures::yaml(block).unwrap())
            .filter(|document| document["kind"] == "Kustomization")
            .collect();
        let shipped = read_yaml(&repo_root().join("charts/herd/files/flux/kustomization.yaml"));
        assert_eq!(
            shown,
            [shipped.unwrap()],
            "the Kustomization of charts/herd/README.md differs from files/flux/kustomization.yaml"
        );
    }

    #[test]
    fn the_snippet_is_a_kustomization_with_an_entry_per_kind() {
        let path = repo_root().join("charts/herd/files/flux/kustomization.yaml");
        let kustomization = read_yaml(&path).unwrap();
        assert_eq!(
            kustomization["apiVersion"],
            "kustomize.toolkit.fluxcd.io/v1"
        );
        assert_eq!(kustomization["kind"], "Kustomization");
        assert_eq!(kustomization["spec"]["wait"], true);
        for kind in ["Agent", "Skill", "Run", "Schedule", "Budget"] {
            let entry = shipped_exprs(kind).unwrap();
            assert_eq!(entry.api_version, "herd.dev/v1alpha1");
            for expression in [
                Some(&entry.current),
                entry.in_progress.as_ref(),
                entry.failed.as_ref(),
            ]
            .into_iter()
            .flatten()
            {
                cel::Program::compile(expression)
                    .unwrap_or_else(|e| panic!("{kind}: {expression:?}: {e}"));
            }
        }
    }
}
