//! Installing Herd's CRDs on the test API server.

use std::time::Duration;

use anyhow::Context;
use herd_crds::generate::crds;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};

use crate::requests::FIELD_MANAGER;
use crate::wait::wait_for;

/// Applies the three CRDs server-side (as `kubectl apply --server-side` does) and waits until
/// the API server serves them. A CRD whose CEL rules are too costly is refused here.
pub async fn apply_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::new();
    for (file, crd) in crds()? {
        let name = crd.name_any();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("applying {file}"))?;
        names.push(name);
    }
    for name in names {
        wait_for(
            &format!("CRD {name} to be established"),
            Duration::from_secs(30),
            || async {
                let crd = api.get(&name).await?;
                let established = crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                Ok(established.then_some(()))
            },
        )
        .await?;
    }
    Ok(())
}
