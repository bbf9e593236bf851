//! The CRDs on a real API server: they apply server-side (the suite's setup), every valid
//! example is accepted, every `examples/invalid/` file is rejected with the message its comment
//! names, every transition fixture is rejected on its patch, and answers are appended the way
//! docs/cluster.md documents.

use std::path::Path;

use anyhow::{Context, bail};
use herd_e2e::fixtures::{
    expected_message, read_yaml, read_yaml_documents, repo_root, subdirectories, yaml, yaml_files,
};
use herd_e2e::requests::{create_strict, get_object, json_patch, merge_patch};
use herd_e2e::{E2eTest, TestEnv};
use serde_json::json;

pub fn tests() -> Vec<E2eTest> {
    vec![
        E2eTest::shared(
            "crds::valid_examples_are_accepted",
            valid_examples_are_accepted,
        ),
        E2eTest::shared(
            "crds::invalid_examples_are_rejected_with_their_message",
            invalid_examples_are_rejected_with_their_message,
        ),
        E2eTest::shared(
            "crds::transitions_are_rejected_on_the_patch",
            transitions_are_rejected_on_the_patch,
        ),
        E2eTest::shared(
            "crds::answers_are_appended_with_a_json_patch",
            answers_are_appended_with_a_json_patch,
        ),
        E2eTest::shared(
            "crds::reserved_mcp_headers_are_rejected_in_any_case",
            reserved_mcp_headers_are_rejected_in_any_case,
        ),
        E2eTest::shared(
            "crds::approval_commands_must_compile_and_decisions_append",
            approval_commands_must_compile_and_decisions_append,
        ),
    ]
}

/// An approval command pattern that is no regular expression fails the CEL rule on the API
/// server (CEL compiles it when the rule runs), a good one passes; a decision is appended to
/// `spec.responses` like an answer, and one with an answer as well is refused.
async fn approval_commands_must_compile_and_decisions_append(env: TestEnv) -> anyhow::Result<()> {
    let client = env.client();
    let namespace = env.namespace();
    let agent = |name: &str, commands: serde_json::Value| {
        json!({
            "apiVersion": "herd.dev/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": name},
            "spec": {"model": {"provider": "openai", "name": "m"},
                     "approval": {"tools": ["bash"], "commands": commands}},
        })
    };
    if let Err(message) = create_strict(
        &client,
        namespace,
        &agent("approving", json!(["git push|kubectl", "^rm\\s"])),
    )
    .await?
    {
        bail!("an Agent with good command patterns was rejected: {message}");
    }
    match create_strict(&client, namespace, &agent("broken", json!(["git (push"]))).await? {
        Ok(_) => bail!("an Agent whose command pattern does not compile was accepted"),
        Err(message) if !message.contains("spec.approval.commands") => {
            bail!("the bad pattern was rejected for something else: {message}")
        }
        Err(_) => {}
    }
    let run = json!({
        "apiVersion": "herd.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": "approved"},
        "spec": {"agentRef": {"name": "approving"}, "task": "Clean up",
                 "approval": {"commands": ["make clean"]}},
    });
    if let Err(message) = create_strict(&client, namespace, &run).await? {
        bail!("create was rejected: {message}");
    }
    let append = |value: serde_json::Value| json!([{"op": "add", "path": "/spec/responses/-", "value": value}]);
    let decided = append(json!({"id": "a-call_1", "decision": "deny", "reason": "not now"}));
    if let Err(message) = json_patch(&client, namespace, "Run", "approved", &decided).await? {
        bail!("appending a decision was rejected: {message}");
    }
    let both = append(json!({"id": "a-call_2", "decision": "approve", "answer": "yes"}));
    match json_patch(&client, namespace, "Run", "approved", &both).await? {
        Ok(_) => bail!("a response with an answer and a decision was accepted"),
        Err(message) if !message.contains(herd_crds::approval::RESPONSE_KIND_MESSAGE) => {
            bail!("the response was rejected with {message:?}")
        }
        Err(_) => {}
    }
    Ok(())
}

async fn valid_examples_are_accepted(env: TestEnv) -> anyhow::Result<()> {
    let client = env.client();
    let mut failures = Vec::new();
    let mut created = 0;
    for dir in ["agents", "skills", "runs"] {
        for path in yaml_files(&repo_root().join("examples").join(dir))? {
            for object in read_yaml_documents(&path)? {
                match create_strict(&client, env.namespace(), &object).await? {
                    Ok(_) => created += 1,
                    Err(message) => failures.push(format!("{}: {message}", path.display())),
                }
            }
        }
    }
    if !failures.is_empty() {
        bail!("valid examples were rejected:\n{}", failures.join("\n"));
    }
    if created < 5 {
        bail!("only {created} examples found");
    }
    Ok(())
}

async fn invalid_examples_are_rejected_with_their_message(env: TestEnv) -> anyhow::Result<()> {
    let client = env.client();
    let mut failures = Vec::new();
    let files = yaml_files(&repo_root().join("examples/invalid"))?;
    for path in &files {
        let text = std::fs::read_to_string(path)?;
        let expected = expected_message(&text)
            .with_context(|| format!("{}: no `# expect:` comment", path.display()))?;
        match create_strict(&client, env.namespace(), &yaml(&text)?).await? {
            Ok(_) => failures.push(format!("{}: accepted", path.display())),
            Err(message) if !message.contains(&expected) => failures.push(format!(
                "{}: rejected with {message:?}, expected {expected:?}",
                path.display()
            )),
            Err(_) => {}
        }
    }
    if !failures.is_empty() {
        bail!("invalid examples misbehaved:\n{}", failures.join("\n"));
    }
    if files.len() < 10 {
        bail!("only {} invalid examples found", files.len());
    }
    Ok(())
}

async fn transitions_are_rejected_on_the_patch(env: TestEnv) -> anyhow::Result<()> {
    let mut failures = Vec::new();
    let dirs = subdirectories(&repo_root().join("tests/fixtures/transitions"))?;
    for dir in &dirs {
        if let Err(e) = transition(&env, dir).await {
            failures.push(format!("{}: {e:#}", dir.display()));
        }
    }
    if !failures.is_empty() {
        bail!("transition fixtures misbehaved:\n{}", failures.join("\n"));
    }
    if dirs.len() < 5 {
        bail!("only {} transition fixtures found", dirs.len());
    }
    Ok(())
}

async fn transition(env: &TestEnv, dir: &Path) -> anyhow::Result<()> {
    let client = env.client();
    let namespace = env.namespace();
    let create = read_yaml(&dir.join("create.yaml"))?;
    let kind = create["kind"].as_str().unwrap_or_default().to_owned();
    let name = create["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if let Err(message) = create_strict(&client, namespace, &create).await? {
        bail!("create was rejected: {message}");
    }
    let setup = dir.join("setup.yaml");
    if setup.exists() {
        let patch = read_yaml(&setup)?;
        if let Err(message) = merge_patch(&client, namespace, &kind, &name, &patch).await? {
            bail!("setup patch was rejected: {message}");
        }
    }
    let text = std::fs::read_to_string(dir.join("patch.yaml"))?;
    let expected = expected_message(&text).context("patch.yaml has no `# expect:` comment")?;
    match merge_patch(&client, namespace, &kind, &name, &yaml(&text)?).await? {
        Ok(_) => bail!("the patch was accepted"),
        Err(message) if !message.contains(&expected) => {
            bail!("rejected with {message:?}, expected {expected:?}")
        }
        Err(_) => Ok(()),
    }
}

/// The way docs/cluster.md answers: a JSON patch appending to `spec.responses`. A second answer
/// sent as a merge patch replaces the whole list and is refused as append-only.
async fn answers_are_appended_with_a_json_patch(env: TestEnv) -> anyhow::Result<()> {
    let client = env.client();
    let namespace = env.namespace();
    let run = json!({
        "apiVersion": "herd.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": "questions"},
        "spec": {"agentRef": {"name": "researcher"}, "task": "Ask twice"},
    });
    if let Err(message) = create_strict(&client, namespace, &run).await? {
        bail!("create was rejected: {message}");
    }
    let append = |id: &str, answer: &str| json!([{"op": "add", "path": "/spec/responses/-", "value": {"id": id, "answer": answer}}]);
    for (id, answer) in [("q1", "Engineers"), ("q2", "Europe")] {
        if let Err(message) =
            json_patch(&client, namespace, "Run", "questions", &append(id, answer)).await?
        {
            bail!("appending answer {id} was rejected: {message}");
        }
    }
    let merge = json!({"spec": {"responses": [{"id": "q3", "answer": "Yes"}]}});
    match merge_patch(&client, namespace, "Run", "questions", &merge).await? {
        Ok(_) => bail!("a merge patch replacing the answers was accepted"),
        Err(message) if !message.contains(herd_crds::rules::RESPONSES_APPEND_ONLY_MESSAGE) => {
            bail!("the merge patch was rejected with {message:?}")
        }
        Err(_) => {}
    }
    let stored = get_object(&client, namespace, "Run", "questions").await?;
    let ids: Vec<&str> = stored["spec"]["responses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str())
        .collect();
    if ids != ["q1", "q2"] {
        bail!("stored answers are {ids:?}, expected q1 and q2");
    }
    Ok(())
}

/// An MCP header the client sets itself or a hop-by-hop one is refused by the API server's
/// rule in any case, with the words local runs use; names that merely look alike are accepted.
async fn reserved_mcp_headers_are_rejected_in_any_case(env: TestEnv) -> anyhow::Result<()> {
    use herd_crds::rules::{MCP_HEADER_NOT_RESERVED_SUFFIX, RESERVED_HEADERS, quoted};
    let client = env.client();
    let agent = |index: usize, header: &str| {
        json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Agent",
            "metadata": {"name": format!("reserved-header-{index}")},
            "spec": {"mcp": {"servers": [{"name": "docs", "url": "https://mcp.example.com/mcp",
                "headers": [{"name": header, "secretKeyRef": {"name": "k", "key": "v"}}]}]}},
        })
    };
    // Each name as listed, lowercased, uppercased and with its case flipped letter by letter.
    let mut reserved: Vec<String> = Vec::new();
    for name in RESERVED_HEADERS
        .iter()
        .chain(&["Mcp-Session-Id", "Mcp-Protocol-Version"])
    {
        let alternating: String = name
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    c.to_ascii_lowercase()
                } else {
                    c.to_ascii_uppercase()
                }
            })
            .collect();
        reserved.extend([
            (*name).to_owned(),
            name.to_ascii_lowercase(),
            name.to_ascii_uppercase(),
            alternating,
        ]);
    }
    let mut failures = Vec::new();
    for (index, name) in reserved.iter().enumerate() {
        let expected = quoted(name, MCP_HEADER_NOT_RESERVED_SUFFIX);
        match create_strict(&client, env.namespace(), &agent(index, name)).await? {
            Ok(_) => failures.push(format!("{name}: accepted")),
            Err(message)
                if !message.contains(&expected)
                    || !message.contains("spec.mcp.servers[0].headers[0].name") =>
            {
                failures.push(format!("{name}: rejected with {message:?}"))
            }
            Err(_) => {}
        }
    }
    let lookalikes = [
        "Authorization",
        "X-Api-Key",
        "X-Content-Type",
        "Hosts",
        "Mcp",
        "Tea",
    ];
    for (index, name) in lookalikes.iter().enumerate() {
        if let Err(message) = create_strict(
            &client,
            env.namespace(),
            &agent(reserved.len() + index, name),
        )
        .await?
        {
            failures.push(format!("{name}: rejected with {message:?}"));
        }
    }
    if !failures.is_empty() {
        bail!("reserved MCP headers misbehaved:\n{}", failures.join("\n"));
    }
    Ok(())
}
