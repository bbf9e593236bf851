//! The CRDs on a real API server: they apply server-side, every valid example is accepted,
//! every `examples/invalid/` file is rejected with the message its comment names, and every
//! transition fixture is rejected on its patch. Skipped (visibly) without `KUBECONFIG`.

use anyhow::{Context, bail};
use herd_e2e::{
    TestNamespace, apply_crds, cluster_or_skip, create_strict, expected_message, merge_patch,
    repo_root, yaml, yaml_files,
};
use serde_json::Value;

#[tokio::test]
async fn valid_examples_are_accepted() -> anyhow::Result<()> {
    let Some(client) = cluster_or_skip("valid_examples_are_accepted").await? else {
        return Ok(());
    };
    apply_crds(&client).await?;
    let namespace = TestNamespace::create(&client, "valid").await?;
    let mut failures = Vec::new();
    for dir in ["agents", "skills", "runs"] {
        for path in yaml_files(&repo_root().join("examples").join(dir))? {
            let object = yaml(&std::fs::read_to_string(&path)?)?;
            if let Err(message) = create_strict(&client, &namespace.name, &object).await? {
                failures.push(format!("{}: {message}", path.display()));
            }
        }
    }
    namespace.delete().await?;
    if !failures.is_empty() {
        bail!("valid examples were rejected:\n{}", failures.join("\n"));
    }
    Ok(())
}

#[tokio::test]
async fn invalid_examples_are_rejected_with_their_message() -> anyhow::Result<()> {
    let Some(client) = cluster_or_skip("invalid_examples_are_rejected_with_their_message").await?
    else {
        return Ok(());
    };
    apply_crds(&client).await?;
    let namespace = TestNamespace::create(&client, "invalid").await?;
    let mut failures = Vec::new();
    for path in yaml_files(&repo_root().join("examples/invalid"))? {
        let text = std::fs::read_to_string(&path)?;
        let expected = expected_message(&text)
            .with_context(|| format!("{}: no `# expect:` comment", path.display()))?;
        match create_strict(&client, &namespace.name, &yaml(&text)?).await? {
            Ok(_) => failures.push(format!("{}: accepted", path.display())),
            Err(message) if !message.contains(&expected) => failures.push(format!(
                "{}: rejected with {message:?}, expected {expected:?}",
                path.display()
            )),
            Err(_) => {}
        }
    }
    namespace.delete().await?;
    if !failures.is_empty() {
        bail!("invalid examples misbehaved:\n{}", failures.join("\n"));
    }
    Ok(())
}

#[tokio::test]
async fn transitions_are_rejected_on_the_patch() -> anyhow::Result<()> {
    let Some(client) = cluster_or_skip("transitions_are_rejected_on_the_patch").await? else {
        return Ok(());
    };
    apply_crds(&client).await?;
    let namespace = TestNamespace::create(&client, "transitions").await?;
    let root = repo_root().join("tests/fixtures/transitions");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    dirs.retain(|path| path.is_dir());
    dirs.sort();
    let mut failures = Vec::new();
    for dir in dirs {
        if let Err(e) = transition(&client, &namespace.name, &dir).await {
            failures.push(format!("{}: {e:#}", dir.display()));
        }
    }
    namespace.delete().await?;
    if !failures.is_empty() {
        bail!("transition fixtures misbehaved:\n{}", failures.join("\n"));
    }
    Ok(())
}

async fn transition(
    client: &kube::Client,
    namespace: &str,
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    let create = yaml(&std::fs::read_to_string(dir.join("create.yaml"))?)?;
    let kind = create["kind"].as_str().unwrap_or_default().to_owned();
    let name = create["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if let Err(message) = create_strict(client, namespace, &create).await? {
        bail!("create was rejected: {message}");
    }
    let setup = dir.join("setup.yaml");
    if setup.exists() {
        let patch: Value = yaml(&std::fs::read_to_string(&setup)?)?;
        if let Err(message) = merge_patch(client, namespace, &kind, &name, &patch).await? {
            bail!("setup patch was rejected: {message}");
        }
    }
    let text = std::fs::read_to_string(dir.join("patch.yaml"))?;
    let expected = expected_message(&text).context("patch.yaml has no `# expect:` comment")?;
    match merge_patch(client, namespace, &kind, &name, &yaml(&text)?).await? {
        Ok(_) => bail!("the patch was accepted"),
        Err(message) if !message.contains(&expected) => {
            bail!("rejected with {message:?}, expected {expected:?}")
        }
        Err(_) => Ok(()),
    }
}
