//! The run API's TLS on the real API server: the Secret and the namespace's CA copy before the
//! first Pod, and renewal with the bundle copied by the operator's timer, with no Pod at all.

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::run_fixtures::{WAIT, container, create_agent, create_run};
use super::support::{Clients, http_get, start_leader, test_config};
use herd_e2e::wait::wait_for;

/// Whether `bundle` verifies `leaf` for `name` now, as a Run pod's client would.
fn verifies(bundle: &str, leaf: &str, name: &str) -> anyhow::Result<()> {
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots.add(cert?)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(roots.into(), provider)
            .build()?;
    let leaf = CertificateDer::from_pem_slice(leaf.as_bytes())?;
    verifier.verify_server_cert(
        &leaf,
        &[],
        &ServerName::try_from(name.to_owned())?,
        &[],
        UnixTime::now(),
    )?;
    Ok(())
}

/// The agent container has `--runner-resources`; the active-pods gauge counts the Pod. Before the first Pod: the run API's TLS Secret (CA and a leaf for `--run-api-dns-names` and
/// the URL's IP) and the namespace's CA ConfigMap, a stale copy replaced; the bundle verifies
/// the leaf.
pub async fn run_api_tls_precedes_the_pod(clients: Clients) -> anyhow::Result<()> {
    let cms: Api<ConfigMap> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let stale: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "herd-run-api-ca"}, "data": {"ca.crt": "stale"},
    }))?;
    cms.create(&PostParams::default(), &stale).await?;
    let mut config = test_config(&[&clients.namespace], &clients.namespace, "only")?;
    config.runs.run_api_url = "https://10.9.8.7:8443".into();
    config.runs.run_api_dns_names = vec!["herd-clients.operator.e2e.svc".into()];
    config.runs.runner_resources = herd_operator::decide::runner_resources::parse_resources(
        "requests.cpu=100m,limits.memory=512Mi",
    )
    .map_err(anyhow::Error::msg)?;
    let running = start_leader(config, clients.operator).await?;
    create_agent(&clients.admin, &clients.namespace).await?;
    create_run(&clients.admin, &clients.namespace, "tls").await?;
    let pods: Api<Pod> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let pod = wait_for("the Run's Pod", WAIT, || async {
        Ok(pods.get_opt("tls-1").await?)
    })
    .await?;

    let pod_json = serde_json::to_value(&pod)?;
    let resources = &container(&pod_json, "containers", "agent")?["resources"];
    ensure!(
        // The API server defaults a missing request to the limit.
        *resources
            == json!({"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}}),
        "--runner-resources: {resources}"
    );
    wait_for("the active-pods gauge at 1", WAIT, || async {
        let (_, text) = http_get(running.http_addr, "/metrics").await?;
        Ok(text.contains("herd_run_active_pods 1").then_some(()))
    })
    .await?;
    let secrets: Api<Secret> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let secret = secrets.get("herd-run-api-tls").await?;
    ensure!(secret.type_.as_deref() == Some("kubernetes.io/tls"));
    let data = |key: &str| -> anyhow::Result<String> {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .with_context(|| format!("no {key}"))?;
        Ok(String::from_utf8(bytes.0.clone())?)
    };
    let (bundle, leaf) = (data("ca.crt")?, data("tls.crt")?);
    data("tls.key")?;
    verifies(&bundle, &leaf, "herd-clients.operator.e2e.svc")?;
    verifies(&bundle, &leaf, "10.9.8.7")?;
    ensure!(
        verifies(&bundle, &leaf, "elsewhere.svc").is_err(),
        "only its names"
    );

    let copy = cms.get("herd-run-api-ca").await?;
    ensure!(
        copy.data.as_ref().and_then(|d| d.get("ca.crt")) == Some(&bundle),
        "the namespace's copy is the Secret's bundle"
    );
    let created = |meta: &kube::api::ObjectMeta| meta.creation_timestamp.clone();
    ensure!(
        created(&secret.metadata) <= created(&pod.metadata),
        "the Secret exists before the Pod"
    );
    let accounts: Api<ServiceAccount> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let policies: Api<NetworkPolicy> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    for labels in [
        secret.metadata.labels.clone(),
        copy.metadata.labels.clone(),
        accounts.get("herd-runner").await?.metadata.labels,
        policies
            .get("herd-runs-default-deny")
            .await?
            .metadata
            .labels,
    ] {
        let labels = labels.unwrap_or_default();
        ensure!(
            labels
                .get("app.kubernetes.io/managed-by")
                .map(String::as_str)
                == Some("herd-operator")
                && labels.get("herd.dev/per-namespace").map(String::as_str) == Some("true"),
            "{labels:?}"
        );
    }
    running.shutdown().await?;
    Ok(())
}

/// The operator's timer renews the TLS Secret when two thirds of its CA's life have passed, not
/// before, and copies the new bundle (which still trusts the old CA) into the namespace's
/// `herd-run-api-ca`, all without any Run or Pod.
pub async fn tls_is_renewed_and_copied_without_a_pod(clients: Clients) -> anyhow::Result<()> {
    use herd_operator::decide::run_api_tls::{
        CA_NOT_AFTER, CA_NOT_BEFORE, LEAF_NAMES, LEAF_NOT_AFTER, LEAF_NOT_BEFORE, leaf_names,
    };
    let config = test_config(&[&clients.namespace], &clients.namespace, "only")?;
    let names = leaf_names(&config.runs.run_api_dns_names, &config.runs.run_api_url).join(",");
    let now = jiff::Timestamp::now();
    let at = |seconds: i64| -> anyhow::Result<String> {
        Ok(now
            .checked_add(jiff::SignedDuration::from_secs(seconds))?
            .to_string())
    };
    // A CA valid from 6 s ago for 18 s: due 6 s from now; a fresh leaf.
    let due = now.checked_add(jiff::SignedDuration::from_secs(6))?;
    let old = "-----BEGIN CERTIFICATE-----\nT0xE\n-----END CERTIFICATE-----\n";
    let labels = json!({"app.kubernetes.io/managed-by": "herd-operator",
        "herd.dev/per-namespace": "true"});
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "herd-run-api-tls", "labels": labels, "annotations": {
            CA_NOT_BEFORE: at(-6)?, CA_NOT_AFTER: at(12)?,
            LEAF_NOT_BEFORE: at(-6)?, LEAF_NOT_AFTER: at(365 * 24 * 3600)?,
            LEAF_NAMES: names}},
        "type": "kubernetes.io/tls",
        "stringData": {"ca.crt": old, "ca.key": "old key", "tls.crt": "old leaf",
            "tls.key": "old leaf key"},
    }))?;
    let secrets: Api<Secret> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    secrets.create(&PostParams::default(), &secret).await?;
    let cms: Api<ConfigMap> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let copy: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "herd-run-api-ca", "labels": labels}, "data": {"ca.crt": old},
    }))?;
    cms.create(&PostParams::default(), &copy).await?;
    let bundle_of = |secret: &Secret| -> Option<String> {
        let bytes = secret.data.as_ref()?.get("ca.crt")?;
        String::from_utf8(bytes.0.clone()).ok()
    };

    let running = start_leader(config, clients.operator).await?;
    if jiff::Timestamp::now() < due.checked_sub(jiff::SignedDuration::from_secs(1))? {
        ensure!(
            bundle_of(&secrets.get("herd-run-api-tls").await?).as_deref() == Some(old),
            "renewed before two thirds of the CA's life"
        );
    }
    let bundle = wait_for("the CA renewed", WAIT, || async {
        let secret = secrets.get("herd-run-api-tls").await?;
        Ok(bundle_of(&secret).filter(|b| b != old))
    })
    .await?;
    ensure!(jiff::Timestamp::now() >= due, "renewed before it was due");
    ensure!(
        bundle.ends_with(old) && bundle.matches("BEGIN CERTIFICATE").count() == 2,
        "the new bundle keeps the old CA: {bundle}"
    );
    wait_for("the namespace's copy updated", WAIT, || async {
        let copy = cms.get("herd-run-api-ca").await?;
        Ok((copy.data.as_ref().and_then(|d| d.get("ca.crt")) == Some(&bundle)).then_some(()))
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    ensure!(
        pods.list(&Default::default()).await?.items.is_empty(),
        "no Pod was needed"
    );
    running.shutdown().await?;
    Ok(())
}

/// A `kubernetes.io/tls` Secret as cert-manager writes it: `ca.crt`, `tls.crt`, `tls.key`, from
/// a CA of its own, for `name`.
fn cert_manager_secret(name: &str) -> anyhow::Result<(Secret, String)> {
    use herd_operator::certificates::{new_ca, new_leaf};
    use herd_operator::decide::run_api_tls::Validity;
    let validity = Validity::starting(
        jiff::Timestamp::now(),
        std::time::Duration::from_secs(24 * 3600),
    )
    .context("validity")?;
    let ca = new_ca(validity)?;
    let leaf = new_leaf(&ca.key, &[name.to_owned()], validity)?;
    let secret = serde_json::from_value(json!({
        "metadata": {"name": "herd-run-api-tls",
            "annotations": {"cert-manager.io/certificate-name": "herd-run-api"}},
        "type": "kubernetes.io/tls",
        "stringData": {"ca.crt": ca.cert, "tls.crt": leaf.cert, "tls.key": leaf.key},
    }))?;
    Ok((secret, ca.cert))
}

/// With `--run-api-tls=external` the operator never writes `herd-run-api-tls`: without it the
/// operator leads but is not ready and makes none; once cert-manager writes it, the run API
/// serves its leaf, a Run's namespace gets its `ca.crt`, and a renewal reaches the namespace's
/// copy at once, the Secret untouched by the operator.
pub async fn external_tls_is_read_never_written(clients: Clients) -> anyhow::Result<()> {
    let mut config = test_config(&[&clients.namespace], &clients.namespace, "only")?;
    config.run_api_tls = herd_operator::config::RunApiTlsMode::External;
    let running = herd_operator::start(config, clients.operator).await?;
    let mut leader = running.leader.clone();
    tokio::time::timeout(WAIT, leader.wait_for(|l| *l)).await??;
    let (status, _) = wait_for("/readyz answering", WAIT, || async {
        Ok(http_get(running.http_addr, "/readyz").await.ok())
    })
    .await?;
    ensure!(status == 503, "ready without a certificate: {status}");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let secrets: Api<Secret> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    ensure!(
        secrets.get_opt("herd-run-api-tls").await?.is_none(),
        "the operator made the Secret cert-manager owns"
    );

    let (secret, first_ca) = cert_manager_secret("127.0.0.1")?;
    let written = secrets.create(&PostParams::default(), &secret).await?;
    wait_for("the operator ready", WAIT, || async {
        Ok(running.is_ready().then_some(()))
    })
    .await?;
    let https = reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(first_ca.as_bytes())?)
        .build()?;
    let url = format!("https://127.0.0.1:{}/", running.run_api_addr.port());
    https
        .get(&url)
        .send()
        .await
        .context("the run API does not serve cert-manager's leaf")?;

    create_agent(&clients.admin, &clients.namespace).await?;
    create_run(&clients.admin, &clients.namespace, "external").await?;
    let pods: Api<Pod> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    wait_for("the Run's Pod", WAIT, || async {
        Ok(pods.get_opt("external-1").await?)
    })
    .await?;
    let cms: Api<ConfigMap> = Api::namespaced(clients.admin.clone(), &clients.namespace);
    let copied = |bundle: String| {
        let cms = cms.clone();
        async move {
            let copy = cms.get("herd-run-api-ca").await?;
            Ok((copy.data.as_ref().and_then(|d| d.get("ca.crt")) == Some(&bundle)).then_some(()))
        }
    };
    wait_for("ca.crt copied", WAIT, || copied(first_ca.clone())).await?;

    let (mut renewed, second_ca) = cert_manager_secret("127.0.0.1")?;
    renewed.metadata.resource_version = written.metadata.resource_version.clone();
    let renewed = secrets
        .replace("herd-run-api-tls", &PostParams::default(), &renewed)
        .await?;
    wait_for("the renewed ca.crt copied", WAIT, || {
        copied(second_ca.clone())
    })
    .await?;
    let https = reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(second_ca.as_bytes())?)
        .build()?;
    wait_for("the renewed leaf served", WAIT, || async {
        Ok(https.get(&url).send().await.ok().map(|_| ()))
    })
    .await?;
    ensure!(
        secrets
            .get("herd-run-api-tls")
            .await?
            .metadata
            .resource_version
            == renewed.metadata.resource_version,
        "the operator changed cert-manager's Secret"
    );
    running.shutdown().await?;
    Ok(())
}
