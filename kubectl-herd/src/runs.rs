//! Reading Runs for a command, with errors that name the Run.

use herd_crds::run::Run;
use kube::api::Api;

use crate::connect::Cluster;
use crate::error::{CliError, Target, api_error};

/// What to do when a Run does not exist.
pub const RUN_NOT_FOUND: &str = "`kubectl herd get` lists the Runs there";

/// The Runs of the cluster's namespace.
pub fn runs(cluster: &Cluster) -> Api<Run> {
    Api::namespaced(cluster.client.clone(), &cluster.namespace)
}

/// The error target of the Run `name` while `doing`.
pub fn run_target<'a>(cluster: &'a Cluster, object: &'a str, doing: &'a str) -> Target<'a> {
    cluster.target(doing, object, RUN_NOT_FOUND)
}

/// Reads the Run `name`.
pub async fn get_run(cluster: &Cluster, name: &str) -> Result<Run, CliError> {
    let object = format!("Run {name}");
    runs(cluster)
        .get(name)
        .await
        .map_err(|e| api_error(&e, run_target(cluster, &object, "reading")))
}

/// The name of the Run `which` means: the one named, or with `--last` the newest top-level
/// Run of the namespace.
pub async fn which_run(
    cluster: &Cluster,
    which: &crate::cli::WhichRun,
) -> Result<String, CliError> {
    if let Some(name) = &which.run {
        return Ok(name.clone());
    }
    let list = runs(cluster)
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|e| api_error(&e, run_target(cluster, "the Runs", "listing")))?;
    crate::tree::newest_tops(&list.items)
        .first()
        .map(|run| kube::ResourceExt::name_any(*run))
        .ok_or_else(|| {
            CliError::new(format!(
                "--last: there are no Runs in namespace {} (start one with kubectl herd run)",
                cluster.namespace
            ))
        })
}
