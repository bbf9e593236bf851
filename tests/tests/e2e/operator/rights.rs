//! The operator's effective rights, as the API server computes them, against a committed table:
//! `tests/fixtures/operator-rights/{cluster,namespaced}.txt`. A ServiceAccount is bound to the
//! chart's RBAC files exactly as the suite's operators are (`release-role.yaml` in its own
//! namespace, the release namespace; `role.yaml` in a separate watched namespace or
//! `clusterrole.yaml` cluster-wide), and a SelfSubjectRulesReview made with its token lists its
//! rules in the release namespace, the watched namespace and an unrelated one (`kube-system`).
//! What every authenticated identity may do anyway (an unbound ServiceAccount's rules: discovery,
//! self reviews) is left out, so the table holds only what Herd's RBAC grants.
//!
//! Any new right must change that table in the same commit: `HERD_UPDATE_RIGHTS=1` rewrites the
//! tables from the API server (review the diff). Whatever the tables say, no Lease and no
//! Secret write may be granted outside the release namespace, and no CRD read beyond Herd's.

use std::collections::BTreeSet;

use anyhow::{Context, bail, ensure};
use herd_e2e::TestEnv;
use herd_e2e::namespace::{PodSecurity, create_namespace, delete_namespace};
use herd_e2e::operator_rbac::{operator_token, operator_token_watching};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::SelfSubjectRulesReview;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::support::Rbac;

/// The CRDs Herd owns, the only ones the operator may read.
const HERD_CRDS: [&str; 5] = [
    "agents.herd.dev",
    "skills.herd.dev",
    "runs.herd.dev",
    "schedules.herd.dev",
    "budgets.herd.dev",
];
/// Verbs that write.
const WRITES: [&str; 7] = [
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "escalate",
    "*",
];
/// A ServiceAccount bound to nothing: what any identity may do.
const BASELINE: &str = "herd-rights-baseline";

/// Computes the operator's rights under `rbac` and compares them with the table.
pub async fn rights_match_the_table(env: TestEnv, rbac: Rbac) -> anyhow::Result<()> {
    let admin = env.client();
    let release = env.namespace().to_owned();
    let watched = create_namespace(&admin, "rights-watched", PodSecurity::Unset).await?;
    let result = check(&env, &admin, &release, &watched, rbac).await;
    delete_namespace(&admin, &watched).await?;
    result
}

async fn check(
    env: &TestEnv,
    admin: &Client,
    release: &str,
    watched: &str,
    rbac: Rbac,
) -> anyhow::Result<()> {
    let token = match rbac {
        Rbac::ClusterWide => operator_token(admin, release, rbac, 600).await?,
        Rbac::Namespaced => operator_token_watching(admin, release, rbac, &[watched], 600).await?,
    };
    let operator = env.cluster().client_with_token(&token).await?;
    let baseline = env
        .cluster()
        .client_with_token(&baseline_token(admin, release).await?)
        .await?;

    let mut table = BTreeSet::new();
    for (label, namespace) in [
        ("release", release),
        ("watched", watched),
        ("unrelated", "kube-system"),
    ] {
        let anyone = rules(&baseline, namespace).await?;
        for rule in rules(&operator, namespace).await? {
            if !anyone.contains(&rule) {
                table.insert(format!("{label} {rule}"));
            }
        }
    }

    for line in &table {
        let fields: Vec<&str> = line.split(' ').collect();
        let [scope, group, resource, verb, name] = fields[..] else {
            continue;
        };
        let writes = WRITES.contains(&verb);
        if scope != "release" {
            ensure!(
                !(group == "coordination.k8s.io" || resource == "*"),
                "a Lease right outside the release namespace: {line}"
            );
            ensure!(
                !(resource == "secrets" && writes),
                "a Secret write outside the release namespace: {line}"
            );
        }
        if resource == "customresourcedefinitions" || resource == "*" {
            ensure!(
                HERD_CRDS.contains(&name) && !writes,
                "a CRD right beyond reading Herd's own: {line}"
            );
        }
        ensure!(group != "*" && verb != "*", "a wildcard right: {line}");
    }

    let file = herd_e2e::fixtures::repo_root().join(format!(
        "tests/fixtures/operator-rights/{}.txt",
        match rbac {
            Rbac::ClusterWide => "cluster",
            Rbac::Namespaced => "namespaced",
        }
    ));
    let actual: Vec<&str> = table.iter().map(String::as_str).collect();
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    let expected: Vec<&str> = committed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if actual == expected {
        return Ok(());
    }
    if std::env::var_os("HERD_UPDATE_RIGHTS").is_some() {
        let header: String = committed
            .lines()
            .take_while(|l| l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&file, format!("{header}{}\n", actual.join("\n")))
            .with_context(|| file.display().to_string())?;
        return Ok(());
    }
    bail!(
        "the operator's rights differ from {} (HERD_UPDATE_RIGHTS=1 rewrites it):\n{}",
        file.display(),
        actual.join("\n")
    )
}

/// A token for a ServiceAccount of `namespace` bound to nothing.
async fn baseline_token(admin: &Client, namespace: &str) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": BASELINE}}))?;
    accounts.create(&PostParams::default(), &account).await?;
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 600}}))?;
    let token: TokenRequest = accounts
        .create_subresource("token", BASELINE, &PostParams::default(), &request)
        .await?;
    token
        .status
        .map(|s| s.token)
        .context("the TokenRequest has no token")
}

/// The caller's rules in `namespace`, one `group resource verb name` line per combination
/// (`core` for the core group, `-` for no resourceNames, `url <path> <verb>` for non-resource
/// rules).
async fn rules(client: &Client, namespace: &str) -> anyhow::Result<BTreeSet<String>> {
    let review: SelfSubjectRulesReview =
        serde_json::from_value(json!({"spec": {"namespace": namespace}}))?;
    let reviewed = Api::<SelfSubjectRulesReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    let status = reviewed.status.context("the review has no status")?;
    ensure!(
        !status.incomplete,
        "the review is incomplete: {:?}",
        status.evaluation_error
    );
    let mut lines = BTreeSet::new();
    for rule in status.resource_rules {
        let groups = rule.api_groups.unwrap_or_default();
        let resources = rule.resources.unwrap_or_default();
        let names = match rule.resource_names.unwrap_or_default() {
            names if names.is_empty() => vec!["-".to_owned()],
            names => names,
        };
        for group in &groups {
            let group = if group.is_empty() { "core" } else { group };
            for resource in &resources {
                for verb in &rule.verbs {
                    for name in &names {
                        lines.insert(format!("{group} {resource} {verb} {name}"));
                    }
                }
            }
        }
    }
    for rule in status.non_resource_rules {
        for url in rule.non_resource_urls.unwrap_or_default() {
            for verb in &rule.verbs {
                lines.insert(format!("url {url} {verb}"));
            }
        }
    }
    Ok(lines)
}
