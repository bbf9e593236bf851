//! Writing `status.report`: composed from a live GET of the Run and applied whole by
//! server-side apply as `herd-runapi`, conditional on the `resourceVersion` read, so a replica
//! whose cache is behind can never drop a question or a result. A conflict re-reads and composes
//! again; a report the API server refuses as stale is re-read and dropped.

use herd_crds::rules::REPORT_NOT_STALE_MESSAGE;
use herd_crds::run::{Run, RunReport};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};

use super::failure::Failure;

/// The field manager of `status.report`.
pub const FIELD_MANAGER: &str = "herd-runapi";
/// Writes tried before giving up on a Run that keeps changing.
const TRIES: u32 = 8;

/// What a write did.
#[derive(Clone, Debug, PartialEq)]
pub enum Written<T> {
    /// The report was applied; what `compose` said with it.
    Applied(T),
    /// `compose` found nothing to write (stale, or already stored); what it said.
    Skipped(T),
}

/// The decision of `compose` about the live Run.
pub type Composed<T> = Result<(Option<RunReport>, T), Failure>;

/// Reads the Run live, asks `compose` for the report to write (none: skip), and applies it
/// under the version read; retried on conflicts.
pub async fn write_report<T>(
    client: &Client,
    namespace: &str,
    name: &str,
    mut compose: impl FnMut(&Run) -> Composed<T>,
) -> Result<Written<T>, Failure> {
    let api: Api<Run> = Api::namespaced(client.clone(), namespace);
    for _ in 0..TRIES {
        let live = api
            .get_opt(name)
            .await
            .map_err(|e| Failure::kube("reading the Run", &e))?
            .ok_or_else(|| Failure::not_found(format!("Run {namespace}/{name} is gone")))?;
        let (report, said) = compose(&live)?;
        let Some(report) = report else {
            return Ok(Written::Skipped(said));
        };
        let body = serde_json::json!({
            "apiVersion": "herd.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name, "resourceVersion": live.resource_version()},
            "status": {"report": report},
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api.patch_status(name, &params, &Patch::Apply(&body)).await {
            Ok(_) => return Ok(Written::Applied(said)),
            // Changed since read, or refused as stale by the CRD's rule: read again.
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 422 => {
                if status.code == 422 && !status.message.contains(REPORT_NOT_STALE_MESSAGE) {
                    return Err(Failure::internal(format!(
                        "the API server refused the report: {}",
                        status.message
                    )));
                }
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                return Err(Failure::not_found(format!(
                    "Run {namespace}/{name} is gone"
                )));
            }
            Err(error) => return Err(Failure::kube("writing status.report", &error)),
        }
    }
    Err(Failure::unavailable(format!(
        "Run {namespace}/{name} changed {TRIES} times while its report was written"
    )))
}
