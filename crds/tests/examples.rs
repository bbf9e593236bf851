//! The manifests under `examples/` and `tests/fixtures/transitions/`: valid ones parse into the
//! Rust types and pass every rule (the ConfigMaps an example carries for its Agent aside);
//! invalid ones fail offline with the message their comment names, and the pure-Rust
//! `validate()` agrees with the CEL evaluation.

mod common;

use std::path::{Path, PathBuf};

use common::{cel_create, cel_update, expected_message, merge_patch, repo_root, yaml, yaml_files};
use herd_crds::manifest::{Manifest, parse_document, parse_manifests};
use herd_crds::rules;
use serde_json::Value;

/// The CEL messages a `tests/fixtures/transitions/` fixture shows: the update-time rules, and
/// the date-time rule.
const TRANSITION_MESSAGES: [&str; 6] = [
    rules::RUN_SPEC_IMMUTABLE_MESSAGE,
    rules::CANCEL_STAYS_MESSAGE,
    rules::RESPONSES_APPEND_ONLY_MESSAGE,
    rules::RESPONSE_IMMUTABLE_MESSAGE,
    rules::REPORT_NOT_STALE_MESSAGE,
    rules::DATE_TIME_SUFFIX,
];

/// The message of the one CEL rule that neither an example nor a transition shows.
const UNSHOWN_CEL_MESSAGE: &str = herd_crds::approval::COMMAND_REGEXES_MESSAGE;

/// The create-time CEL messages: an `examples/invalid/` file per message.
const CREATE_TIME_MESSAGES: [&str; 32] = [
    rules::DURATION_MESSAGE,
    rules::NAME_63_MESSAGE,
    rules::SKILL_NAME_MESSAGE,
    rules::SOUL_EXCLUSIVE_MESSAGE,
    rules::MAX_CONCURRENT_MESSAGE,
    rules::MAX_TOTAL_MESSAGE,
    rules::MAX_DEPTH_MESSAGE,
    rules::RETRIES_MESSAGE,
    rules::EGRESS_CIDRS_MESSAGE,
    rules::PARENT_WITH_TYPE_MESSAGE,
    rules::SKILL_REFS_SUFFIX,
    rules::RELATIVE_PATH_SUFFIX,
    rules::CIDRS_SUFFIX,
    rules::QUANTITY_SUFFIX,
    rules::DURATION_UP_TO_168H_SUFFIX,
    rules::DURATION_UP_TO_720H_SUFFIX,
    rules::AGENT_REF_NAME_SUFFIX,
    rules::DNS_SUBDOMAIN_SUFFIX,
    rules::TOLERATION_OPERATOR_SUFFIX,
    rules::IMAGE_SUFFIX,
    rules::NODE_SELECTOR_SUFFIX,
    rules::CONFIG_KEY_SUFFIX,
    rules::HTTP_URL_SUFFIX,
    rules::MCP_SERVER_NAME_SUFFIX,
    rules::MCP_TRANSPORT_MESSAGE,
    rules::MCP_HTTP_ONLY_MESSAGE,
    rules::MCP_STDIO_ONLY_MESSAGE,
    rules::HEADER_NAME_SUFFIX,
    rules::MCP_HEADER_NOT_RESERVED_SUFFIX,
    rules::ENV_NAME_SUFFIX,
    herd_crds::approval::TOOL_PATTERNS_MESSAGE,
    herd_crds::approval::RESPONSE_KIND_MESSAGE,
];

fn examples() -> PathBuf {
    repo_root().join("examples")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn valid_example_files() -> Vec<PathBuf> {
    let files: Vec<PathBuf> = ["agents", "skills", "runs"]
        .iter()
        .flat_map(|dir| yaml_files(&examples().join(dir)))
        .collect();
    assert!(
        files.len() >= 5,
        "expected the example manifests, found {files:?}"
    );
    files
}

/// The Herd documents of a valid example file, parsed. Besides them a file may hold only the
/// ConfigMaps its Agent reads (a scripted model's script), which are no Herd kind.
fn herd_documents(path: &Path) -> Vec<(Value, Manifest)> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(&read(path))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut herd = Vec::new();
    for (i, document) in documents.into_iter().enumerate() {
        if document["apiVersion"] == "v1" && document["kind"] == "ConfigMap" {
            continue;
        }
        let manifest = parse_document(i + 1, document.clone())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        herd.push((document, manifest));
    }
    herd
}

#[test]
fn valid_examples_parse_validate_and_pass_cel() {
    let mut kinds = Vec::new();
    for path in valid_example_files() {
        let documents = herd_documents(&path);
        assert!(!documents.is_empty(), "{}", path.display());
        for (document, manifest) in documents {
            kinds.push(manifest.kind());
            assert_eq!(
                cel_create(&document),
                Vec::<String>::new(),
                "{}",
                path.display()
            );
        }
    }
    for kind in ["Agent", "Skill", "Run"] {
        assert!(kinds.contains(&kind), "no {kind} example");
    }
}

#[test]
fn examples_cover_what_the_issue_asks_for() {
    let all: Vec<Manifest> = valid_example_files()
        .iter()
        .flat_map(|path| herd_documents(path))
        .map(|(_, manifest)| manifest)
        .collect();
    let agent = all
        .iter()
        .find_map(|m| match m {
            Manifest::Agent(a) if a.metadata.name.as_deref() == Some("researcher") => Some(a),
            _ => None,
        })
        .unwrap();
    assert!(agent.spec.soul.is_some());
    assert!(agent.spec.skills.as_ref().is_some_and(|s| !s.is_empty()));
    assert!(agent.spec.subagents.enabled);
    let skills = all
        .iter()
        .filter(|m| matches!(m, Manifest::Skill(_)))
        .count();
    assert!(skills >= 2);
    let mcp = all
        .iter()
        .find_map(|m| match m {
            Manifest::Agent(a) => a.spec.mcp.as_ref(),
            _ => None,
        })
        .expect("an Agent with MCP servers");
    assert!(
        mcp.servers
            .iter()
            .any(|s| s.url.is_some() && !s.headers.is_empty())
    );
    assert!(mcp.servers.iter().any(|s| s.command.is_some()));
    let plan_mode = all
        .iter()
        .any(|m| matches!(m, Manifest::Run(r) if r.spec.plan_mode == Some(true)));
    assert!(plan_mode, "no plan-mode Run");
    // Skills named by the Agent exist among the examples.
    for name in agent.spec.skills.iter().flatten() {
        assert!(
            all.iter().any(
                |m| matches!(m, Manifest::Skill(s) if s.metadata.name.as_deref() == Some(name))
            ),
            "skill {name} has no example"
        );
    }
}

/// `examples/gitops/`: a Kustomization listing every file of its folder, holding Skills and
/// Agents that parse and pass every rule, and the ConfigMaps they name; never a Run (a synced
/// Run deleted by its TTL would be created again) nor a Secret.
#[test]
fn gitops_example_is_a_kustomization_of_skills_and_agents() {
    let dir = examples().join("gitops");
    let kustomization_text = read(&dir.join("kustomization.yaml"));
    assert!(
        kustomization_text.contains("Runs do not belong in a synced repository"),
        "kustomization.yaml must say why Runs are not there"
    );
    let kustomization = yaml(&kustomization_text);
    assert_eq!(kustomization["kind"], "Kustomization");
    let mut listed: Vec<PathBuf> = kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| dir.join(r.as_str().expect("a file name")))
        .collect();
    listed.sort();
    let files: Vec<PathBuf> = yaml_files(&dir)
        .into_iter()
        .filter(|p| !p.ends_with("kustomization.yaml"))
        .collect();
    assert_eq!(
        listed, files,
        "kustomization.yaml lists every file of the folder"
    );

    let mut manifests = Vec::new();
    let mut config_maps = Vec::new();
    for path in &files {
        let text = read(path);
        let object = yaml(&text);
        match object["kind"].as_str() {
            Some("Skill" | "Agent") => {
                manifests.extend(
                    parse_manifests(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
                );
                assert_eq!(
                    cel_create(&object),
                    Vec::<String>::new(),
                    "{}",
                    path.display()
                );
            }
            Some("ConfigMap") => config_maps.push(object["metadata"]["name"].clone()),
            other => panic!(
                "{}: {other:?} does not belong in examples/gitops",
                path.display()
            ),
        }
    }
    let skills: Vec<&str> = manifests
        .iter()
        .filter(|m| m.kind() == "Skill")
        .map(Manifest::name)
        .collect();
    let agents: Vec<_> = manifests
        .iter()
        .filter_map(|m| match m {
            Manifest::Agent(a) => Some(a),
            _ => None,
        })
        .collect();
    assert!(
        !skills.is_empty() && !agents.is_empty(),
        "a Skill and an Agent"
    );
    for agent in agents {
        for skill in agent.spec.skills.iter().flatten() {
            assert!(
                skills.contains(&skill.as_str()),
                "skill {skill} is not in the folder"
            );
        }
        // The example runs offline: a scripted model whose script is in the folder.
        let model = serde_json::to_value(&agent.spec.model).unwrap();
        let name = model
            .pointer("/scriptFrom/configMapKeyRef/name")
            .expect("the Agent's scripted model names its ConfigMap");
        assert!(
            config_maps.contains(name),
            "ConfigMap {name} is not in the folder"
        );
    }
}

#[test]
fn invalid_examples_fail_offline_with_their_message() {
    let files = yaml_files(&examples().join("invalid"));
    let mut covered = Vec::new();
    for path in &files {
        let text = read(path);
        let expected = expected_message(&text);
        let offline = match parse_manifests(&text) {
            Ok(_) => panic!("{}: parse_manifests accepted it", path.display()),
            Err(e) => e.to_string(),
        };
        assert!(
            offline.contains(&expected),
            "{}: parse_manifests said {offline:?}, expected {expected:?}",
            path.display()
        );
        // Files whose message is not a CEL rule's (enum values, unknown fields) are checked by
        // the parser only: the offline evaluator knows nothing of enums or pruning.
        let mut cel_messages = CREATE_TIME_MESSAGES
            .iter()
            .chain(&TRANSITION_MESSAGES)
            .chain(&[UNSHOWN_CEL_MESSAGE]);
        if let Some(message) = cel_messages.find(|m| expected.contains(*m)) {
            let cel = cel_create(&yaml(&text));
            assert!(
                cel.iter().any(|e| e.contains(*message)),
                "{}: validate() and CEL disagree: CEL said {cel:?}",
                path.display()
            );
            covered.push(*message);
        }
    }
    for message in CREATE_TIME_MESSAGES {
        assert!(
            covered.contains(&message),
            "no examples/invalid file for the rule {message:?}"
        );
    }
}

/// One create-then-patch fixture: the object after create, an optional accepted patch, and the
/// patch that must be rejected with its message.
struct Transition {
    name: String,
    create: Value,
    setup: Option<Value>,
    patch: Value,
    expected: String,
}

fn transitions() -> Vec<Transition> {
    let root = repo_root().join("tests/fixtures/transitions");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let patch_text = read(&dir.join("patch.yaml"));
            let setup = dir.join("setup.yaml");
            Transition {
                name: dir.display().to_string(),
                create: yaml(&read(&dir.join("create.yaml"))),
                setup: setup.exists().then(|| yaml(&read(&setup))),
                patch: yaml(&patch_text),
                expected: expected_message(&patch_text),
            }
        })
        .collect()
}

#[test]
fn transition_fixtures_are_rejected_on_the_patch() {
    let all = transitions();
    assert!(all.len() >= 5);
    let mut covered = Vec::new();
    for t in all {
        let create_text = serde_saphyr::to_string(&t.create).unwrap();
        parse_manifests(&create_text).unwrap_or_else(|e| panic!("{}: {e}", t.name));
        assert_eq!(cel_create(&t.create), Vec::<String>::new(), "{}", t.name);
        let mut current = t.create.clone();
        if let Some(setup) = &t.setup {
            let mut next = current.clone();
            merge_patch(&mut next, setup);
            assert_eq!(
                cel_update(&current, &next),
                Vec::<String>::new(),
                "{}",
                t.name
            );
            current = next;
        }
        let mut next = current.clone();
        merge_patch(&mut next, &t.patch);
        let errors = cel_update(&current, &next);
        assert!(
            errors.iter().any(|e| e.contains(&t.expected)),
            "{}: expected {:?}, CEL said {errors:?}",
            t.name,
            t.expected
        );
        covered.push(t.expected);
    }
    for message in TRANSITION_MESSAGES {
        assert!(
            covered.iter().any(|c| c.contains(message)),
            "no transition fixture for {message:?}"
        );
    }
}

#[test]
fn schedule_examples_read_as_schedules_and_pass_cel() {
    let files = yaml_files(&examples().join("schedules"));
    assert_eq!(files.len(), 2, "{files:?}");
    let mut one_shot = 0;
    for path in files {
        let document = yaml(&read(&path));
        let schedule: herd_crds::schedule::Schedule = serde_json::from_value(document.clone())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            cel_create(&document),
            Vec::<String>::new(),
            "{}",
            path.display()
        );
        one_shot += usize::from(schedule.spec.at.is_some());
    }
    assert_eq!(one_shot, 1, "a weekday timetable and a one-shot at");
}
