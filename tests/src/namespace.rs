//! A namespace of its own for each test, so tests can run side by side on one API server.

use anyhow::Context;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use rand::RngCore;
use serde_json::json;

/// Label on every namespace the suite creates, so leftovers on an existing cluster are easy
/// to find: `kubectl delete ns -l herd.dev/e2e=true`.
pub const NAMESPACE_LABEL: &str = "herd.dev/e2e";

/// `herd-e2e-<test>-<random>`: a DNS label (≤ 63 characters) unique per test and run.
pub fn namespace_name(test: &str) -> String {
    let mut slug = String::new();
    for c in test.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let mut suffix = [0u8; 3];
    rand::rng().fill_bytes(&mut suffix);
    let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    // "herd-e2e-" (9) + slug + "-" + 6 hex characters.
    let slug: String = slug.trim_matches('-').chars().take(63 - 9 - 7).collect();
    format!("herd-e2e-{}-{suffix}", slug.trim_end_matches('-'))
}

/// The Pod Security Standard a test namespace enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSecurity {
    /// No label: the cluster's default (privileged).
    Unset,
    /// `pod-security.kubernetes.io/enforce: restricted`.
    Restricted,
}

/// Creates a labelled namespace named after `test`; returns its name.
pub async fn create_namespace(
    client: &Client,
    test: &str,
    pod_security: PodSecurity,
) -> anyhow::Result<String> {
    let name = namespace_name(test);
    let mut labels = json!({NAMESPACE_LABEL: "true"});
    if pod_security == PodSecurity::Restricted {
        labels["pod-security.kubernetes.io/enforce"] = json!("restricted");
    }
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels}
    }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(name)
}

/// Starts deleting a namespace and everything in it (the controller manager finishes it).
pub async fn delete_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::background())
        .await
        .with_context(|| format!("deleting namespace {name}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn is_dns_label(name: &str) -> bool {
        name.len() <= 63
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !name.starts_with('-')
            && !name.ends_with('-')
    }

    #[test]
    fn names_carry_the_test_and_differ_per_call() {
        let a = namespace_name("crds::valid_examples_are_accepted");
        assert!(
            a.starts_with("herd-e2e-crds-valid-examples-are-accepted-"),
            "{a}"
        );
        assert_ne!(a, namespace_name("crds::valid_examples_are_accepted"));
    }

    proptest! {
        #[test]
        fn every_name_is_a_dns_label(test in ".{0,100}") {
            let name = namespace_name(&test);
            prop_assert!(is_dns_label(&name), "{}", name);
        }
    }
}
