//! Feeds objects taken from the API server to the shipped health checks: each Argo CD script
//! through `lua5.1` as Argo CD runs it, each Flux expression through the CEL evaluator, and
//! compares with what the object's state must give.

use std::io::Write as _;
use std::path::Path;

use anyhow::bail;
use herd_e2e::argo_cd::{run_health_script, script};
use herd_e2e::external_tools::LUA;
use herd_e2e::flux::{FluxStatus, evaluate, flux_status, shipped_exprs};
use serde_json::Value;

/// What Flux must make of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flux {
    /// The values of `inProgress`, `failed` and `current`, and the verdict.
    Evaluated([bool; 3], Verdict),
    /// No status yet: the expressions cannot be evaluated, so Flux says Unknown and polls again.
    Unevaluable,
}

/// Flux's verdict, without the error text of [`FluxStatus::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Ready.
    Current,
    /// Being reconciled.
    InProgress,
    /// Failed.
    Failed,
}

/// One object in one state, and what the health checks must say of it.
#[derive(Debug, Clone)]
pub struct Case {
    /// E.g. `Agent ready`, for messages.
    pub what: String,
    /// The object as the API server returned it.
    pub object: Value,
    /// Argo CD's status.
    pub argo_status: &'static str,
    /// Argo CD's message.
    pub argo_message: String,
    /// Flux's evaluation.
    pub flux: Flux,
}

impl Case {
    /// A case for `object`; `what` names it in messages.
    pub fn new(
        what: impl Into<String>,
        object: Value,
        argo: (&'static str, impl Into<String>),
        flux: Flux,
    ) -> Case {
        Case {
            what: what.into(),
            object,
            argo_status: argo.0,
            argo_message: argo.1.into(),
            flux,
        }
    }
}

/// Checks every case with both tools, failing with every mismatch at once. Argo CD's part is
/// skipped (said on stderr) when `lua5.1` is missing outside CI.
pub fn check(test: &str, cases: &[Case]) -> anyhow::Result<()> {
    let lua = LUA.find(test)?;
    let mut failures = Vec::new();
    for case in cases {
        let kind = case.object["kind"].as_str().unwrap_or_default();
        let mut said = Vec::new();
        if let Some(lua) = &lua {
            match check_argo(lua, kind, case) {
                Ok(line) => said.push(line),
                Err(e) => failures.push(format!("{}: Argo CD: {e:#}", case.what)),
            }
        }
        match check_flux(kind, case) {
            Ok(line) => said.push(line),
            Err(e) => failures.push(format!("{}: Flux: {e:#}", case.what)),
        }
        let _ = writeln!(
            std::io::stderr(),
            "{test}: {}: {}",
            case.what,
            said.join("; ")
        );
    }
    if !failures.is_empty() {
        let objects: Vec<String> = cases
            .iter()
            .filter(|c| {
                failures
                    .iter()
                    .any(|f| f.starts_with(&format!("{}:", c.what)))
            })
            .map(|c| format!("{}: {}", c.what, c.object))
            .collect();
        bail!(
            "{}\n\nthe objects:\n{}",
            failures.join("\n"),
            objects.join("\n")
        );
    }
    Ok(())
}

fn check_argo(lua: &Path, kind: &str, case: &Case) -> anyhow::Result<String> {
    let health = run_health_script(lua, &script(kind)?, &case.object)?;
    let said = format!("Argo CD {} {:?}", health.status, health.message);
    if health.status != case.argo_status || health.message != case.argo_message {
        bail!(
            "said {} {:?}, expected {} {:?}",
            health.status,
            health.message,
            case.argo_status,
            case.argo_message
        );
    }
    Ok(said)
}

fn check_flux(kind: &str, case: &Case) -> anyhow::Result<String> {
    let exprs = shipped_exprs(kind)?;
    let in_progress = exprs.in_progress.clone().unwrap_or_default();
    let failed = exprs.failed.clone().unwrap_or_default();
    let named = [
        ("inProgress", &in_progress),
        ("failed", &failed),
        ("current", &exprs.current),
    ];
    let values: Vec<anyhow::Result<bool>> = named
        .iter()
        .map(|(_, expression)| evaluate(expression, &case.object))
        .collect();
    let status = flux_status(&exprs, &case.object);
    match case.flux {
        Flux::Evaluated(expected, verdict) => {
            for ((name, _), (value, expected)) in named.iter().zip(values.iter().zip(expected)) {
                match value {
                    Ok(value) if *value == expected => {}
                    Ok(value) => bail!("{name} is {value}, expected {expected}"),
                    Err(e) => bail!("{name}: {e:#}"),
                }
            }
            let wanted = match verdict {
                Verdict::Current => FluxStatus::Current,
                Verdict::InProgress => FluxStatus::InProgress,
                Verdict::Failed => FluxStatus::Failed,
            };
            if status != wanted {
                bail!("Flux says {status:?}, expected {wanted:?}");
            }
        }
        Flux::Unevaluable => {
            if let Some(((name, _), _)) = named.iter().zip(&values).find(|(_, v)| v.is_ok()) {
                bail!("{name} could be evaluated on an object without status");
            }
            if !matches!(status, FluxStatus::Unknown(_)) {
                bail!("Flux says {status:?}, expected Unknown");
            }
        }
    }
    let values: Vec<String> = named
        .iter()
        .zip(&values)
        .map(|((name, _), v)| match v {
            Ok(v) => format!("{name}={v}"),
            Err(_) => format!("{name}=error"),
        })
        .collect();
    Ok(format!("Flux {status:?} ({})", values.join(" ")))
}
