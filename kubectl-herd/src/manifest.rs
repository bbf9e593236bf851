//! What `kubectl herd run` creates: the ConfigMap of the `--input` files (first, so the Run never
//! waits for it) and the Run with `generateName: <agent≤57>-`, which the API server completes
//! with five characters to at most 63, the longest Run name (it is used as a label value).

use std::collections::BTreeMap;

use herd_crds::run::{MAX_TASK, Run, RunSpec};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::json;

/// Most characters of the agent's name in a Run's `generateName`.
pub const RUN_PREFIX: usize = 57;
/// Most characters of the agent's name in the input ConfigMap's `generateName`.
const INPUTS_PREFIX: usize = 200;
/// Most bytes of the files of one `kubectl herd run`, as stored (a ConfigMap holds at most
/// 1 MiB; room is left for its metadata).
pub const MAX_INPUT_BYTES: usize = 1000 * 1024;
/// Most characters of a ConfigMap key.
const MAX_KEY: usize = 253;

/// `<agent, cut to at most keep characters>-`, never ending in `.-` or `--` (a cut name may
/// end in `.` or `-`, and a name part must end with a letter or digit).
fn prefix(agent: &str, keep: usize) -> String {
    let cut: String = agent.chars().take(keep).collect();
    let trimmed = cut.trim_end_matches(['.', '-']);
    let base = if trimmed.is_empty() { "run" } else { trimmed };
    format!("{base}-")
}

/// The `generateName` of a Run of `agent`.
pub fn run_generate_name(agent: &str) -> String {
    prefix(agent, RUN_PREFIX)
}

/// What `kubectl herd run` was asked to start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunRequest {
    /// The Agent's name.
    pub agent: String,
    /// The task.
    pub task: String,
    /// `--plan`: plan mode on.
    pub plan: bool,
    /// `--thinking`.
    pub thinking: bool,
    /// `--model`: the model instead of the Agent's.
    pub model: Option<String>,
    /// `--timeout`.
    pub timeout: Option<String>,
    /// `--input-timeout`.
    pub input_timeout: Option<String>,
    /// `--ttl`, in seconds.
    pub ttl_seconds: Option<u32>,
    /// `-l`: the Run's labels.
    pub labels: BTreeMap<String, String>,
    /// `--name`: the Run's name instead of a generated one.
    pub name: Option<String>,
    /// `--generate-name`: the prefix of the generated name instead of `<agent>-`.
    pub generate_name: Option<String>,
}

/// A `-l KEY=VALUE` label; or why it is not one.
pub fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!(
            "the label {text:?} is not KEY=VALUE (e.g. -l herd.dev/user=alice)"
        )),
    }
}

/// A duration flag's value checked as the API server checks it, e.g. `30m`; or why not.
pub fn check_duration(flag: &str, text: &str) -> Result<String, String> {
    herd_crds::duration::parse_duration(text)
        .map(|_| text.to_owned())
        .map_err(|e| format!("{flag} {text:?} is not a duration like 90s, 30m or 2h: {e}"))
}

/// `--ttl`'s value in seconds.
pub fn ttl_seconds(text: &str) -> Result<u32, String> {
    let duration = herd_crds::duration::parse_duration(text)
        .map_err(|e| format!("--ttl {text:?} is not a duration like 90s, 30m or 2h: {e}"))?;
    u32::try_from(duration.as_secs()).map_err(|_| format!("--ttl {text:?} is too long"))
}

/// Refuses a task the API server would refuse (or that says nothing).
pub fn check_task(task: &str) -> Result<(), String> {
    if task.trim().is_empty() {
        return Err("the task is empty: say what the agent should do".to_owned());
    }
    let chars = task.chars().count();
    if chars > MAX_TASK {
        return Err(format!(
            "the task has {chars} characters; a Run takes at most {MAX_TASK} (put long text in a \
             file and give it with --input)"
        ));
    }
    Ok(())
}

/// The Run to create, its inputs the ConfigMap `inputs` when there is one; or why not.
pub fn run_manifest(request: &RunRequest, inputs: Option<&str>) -> Result<Run, String> {
    check_task(&request.task)?;
    let mut spec = json!({"agentRef": {"name": request.agent}, "task": request.task});
    if request.plan {
        spec["planMode"] = json!(true);
    }
    if request.thinking {
        spec["thinking"] = json!(true);
    }
    if let Some(model) = &request.model {
        spec["model"] = json!({"name": model});
    }
    if let Some(timeout) = &request.timeout {
        spec["timeout"] = json!(timeout);
    }
    if let Some(timeout) = &request.input_timeout {
        spec["inputTimeout"] = json!(timeout);
    }
    if let Some(ttl) = request.ttl_seconds {
        spec["ttlSecondsAfterFinished"] = json!(ttl);
    }
    if let Some(name) = inputs {
        spec["inputs"] = json!([{"configMapRef": {"name": name}}]);
    }
    let spec: RunSpec = serde_json::from_value(spec).map_err(|e| e.to_string())?;
    let mut run = Run::new("", spec);
    let generate_name = match (&request.name, &request.generate_name) {
        (Some(_), _) => None,
        (None, Some(prefix)) => Some(prefix.clone()),
        (None, None) => Some(run_generate_name(&request.agent)),
    };
    run.metadata = ObjectMeta {
        name: request.name.clone(),
        generate_name,
        labels: (!request.labels.is_empty()).then(|| request.labels.clone()),
        ..ObjectMeta::default()
    };
    Ok(run)
}

/// The ConfigMap holding `files` (name and bytes) as the Run's uploads: UTF-8 files in `data`,
/// others in `binaryData`, each under its file name; `None` without files.
pub fn inputs_config_map(
    agent: &str,
    files: &[(String, Vec<u8>)],
) -> Result<Option<ConfigMap>, String> {
    if files.is_empty() {
        return Ok(None);
    }
    let mut data = BTreeMap::new();
    let mut binary = BTreeMap::new();
    let mut stored = 0usize;
    for (name, bytes) in files {
        check_key(name)?;
        if data.contains_key(name) || binary.contains_key(name) {
            return Err(format!(
                "two files are named {name}: the agent gets them by name in uploads/, so names \
                 must differ"
            ));
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => {
                stored += name.len() + text.len();
                data.insert(name.clone(), text.to_owned());
            }
            Err(_) => {
                stored += name.len() + bytes.len().div_ceil(3) * 4;
                binary.insert(name.clone(), ByteString(bytes.clone()));
            }
        }
    }
    if stored > MAX_INPUT_BYTES {
        return Err(format!(
            "the files take {stored} bytes in a ConfigMap (binary files count as base64), over \
             its limit of {MAX_INPUT_BYTES}: give fewer or smaller files"
        ));
    }
    Ok(Some(ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}inputs-", prefix(agent, INPUTS_PREFIX))),
            ..ObjectMeta::default()
        },
        data: (!data.is_empty()).then_some(data),
        binary_data: (!binary.is_empty()).then_some(binary),
        ..ConfigMap::default()
    }))
}

/// A file name is its key in the ConfigMap: letters, digits, `-`, `_` and `.`, not `.` or `..`.
fn check_key(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= MAX_KEY
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "the file name {name:?} cannot be a ConfigMap key (letters, digits, '-', '_' and '.', \
             at most {MAX_KEY}): rename or copy the file"
        ))
    }
}

/// The owner reference that makes a Run own its input ConfigMap (deleted with it).
pub fn owned_by_run(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "herd.dev/v1alpha1".to_owned(),
        kind: "Run".to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        controller: None,
        block_owner_deletion: None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn request(task: &str, plan: bool) -> RunRequest {
        RunRequest {
            agent: "researcher".into(),
            task: task.into(),
            plan,
            ..RunRequest::default()
        }
    }

    #[test]
    fn every_option_lands_in_the_spec_or_metadata() {
        let asked = RunRequest {
            thinking: true,
            model: Some("big".into()),
            timeout: Some("30m".into()),
            input_timeout: Some("2h".into()),
            ttl_seconds: Some(3600),
            labels: BTreeMap::from([("herd.dev/user".to_owned(), "alice".to_owned())]),
            name: Some("mine".into()),
            ..request("Go.", false)
        };
        let run = run_manifest(&asked, None).unwrap();
        assert_eq!(
            serde_json::to_value(&run.spec).unwrap(),
            json!({"agentRef": {"name": "researcher"}, "task": "Go.", "thinking": true,
                "model": {"name": "big"}, "timeout": "30m", "inputTimeout": "2h",
                "ttlSecondsAfterFinished": 3600, "responses": [], "cancel": false})
        );
        assert_eq!(run.metadata.name.as_deref(), Some("mine"));
        assert_eq!(run.metadata.generate_name, None);
        assert_eq!(run.metadata.labels.unwrap()["herd.dev/user"], "alice");
        let prefixed = RunRequest {
            generate_name: Some("nightly-".into()),
            ..request("Go.", false)
        };
        assert_eq!(
            run_manifest(&prefixed, None)
                .unwrap()
                .metadata
                .generate_name
                .as_deref(),
            Some("nightly-")
        );
    }

    #[test]
    fn labels_and_durations_are_checked() {
        assert_eq!(parse_label("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_label("=b").is_err() && parse_label("ab").is_err());
        assert_eq!(check_duration("--timeout", "30m"), Ok("30m".into()));
        assert!(
            check_duration("--timeout", "soon")
                .unwrap_err()
                .contains("--timeout")
        );
        assert_eq!(ttl_seconds("1h"), Ok(3600));
        assert!(ttl_seconds("x").is_err());
    }

    #[test]
    fn the_run_is_generated_from_the_agent_name() {
        let run = run_manifest(&request("Compare Rust and Go.", false), None).unwrap();
        assert_eq!(run.metadata.generate_name.as_deref(), Some("researcher-"));
        assert_eq!(run.metadata.name, None);
        assert_eq!(
            serde_json::to_value(&run.spec).unwrap(),
            json!({"agentRef": {"name": "researcher"}, "task": "Compare Rust and Go.",
                "responses": [], "cancel": false})
        );
    }

    #[test]
    fn plan_mode_and_inputs() {
        let run =
            run_manifest(&request("Plan it.", true), Some("researcher-inputs-x1y2z")).unwrap();
        assert_eq!(run.spec.plan_mode, Some(true));
        assert_eq!(run.spec.inputs.len(), 1);
        assert_eq!(
            run.spec.inputs[0].config_map_ref.name,
            "researcher-inputs-x1y2z"
        );
        assert_eq!(run.spec.inputs[0].path, None, "straight into uploads/");
    }

    #[test]
    fn empty_and_huge_tasks_are_refused() {
        assert!(
            run_manifest(&request("  ", false), None)
                .unwrap_err()
                .contains("empty")
        );
        let huge = "x".repeat(MAX_TASK + 1);
        let why = run_manifest(&request(&huge, false), None).unwrap_err();
        assert!(
            why.contains("at most 32768") && why.contains("--input"),
            "{why}"
        );
        assert!(run_manifest(&request(&"x".repeat(MAX_TASK), false), None).is_ok());
    }

    #[test]
    fn long_agent_names_are_cut_to_fit_63() {
        let long = "a".repeat(63);
        assert_eq!(run_generate_name(&long), format!("{}-", "a".repeat(57)));
        let dotted = format!("{}.b", "a".repeat(56));
        assert_eq!(run_generate_name(&dotted), format!("{}-", "a".repeat(56)));
        assert_eq!(run_generate_name("a-b"), "a-b-");
        assert_eq!(run_generate_name("---"), "run-");
    }

    #[test]
    fn text_and_binary_files() {
        let files = vec![
            ("notes.md".to_owned(), b"# Notes".to_vec()),
            ("plot.png".to_owned(), vec![0x89, 0x50, 0xff]),
        ];
        let cm = inputs_config_map("researcher", &files).unwrap().unwrap();
        assert_eq!(
            cm.metadata.generate_name.as_deref(),
            Some("researcher-inputs-")
        );
        assert_eq!(cm.data.unwrap()["notes.md"], "# Notes");
        assert_eq!(
            cm.binary_data.unwrap()["plot.png"].0,
            vec![0x89, 0x50, 0xff]
        );
        assert_eq!(inputs_config_map("researcher", &[]).unwrap(), None);
    }

    #[test]
    fn bad_names_duplicates_and_too_much_are_refused() {
        for name in ["", ".", "..", "a b", "ü.txt", &"x".repeat(254)] {
            let why = inputs_config_map("a", &[(name.to_owned(), vec![])]).unwrap_err();
            assert!(why.contains("ConfigMap key"), "{name}: {why}");
        }
        let twice = vec![
            ("a.md".to_owned(), vec![]),
            ("a.md".to_owned(), vec![1, 255]),
        ];
        assert!(
            inputs_config_map("a", &twice)
                .unwrap_err()
                .contains("two files")
        );
        let big = vec![("big.bin".to_owned(), vec![0xffu8; 800 * 1024])];
        let why = inputs_config_map("a", &big).unwrap_err();
        assert!(why.contains("over its limit"), "{why}");
        let fits = vec![("big.txt".to_owned(), vec![b'x'; 900 * 1024])];
        assert!(inputs_config_map("a", &fits).is_ok());
    }

    #[test]
    fn the_owner_is_the_run() {
        let owner = owned_by_run("researcher-x1y2z", "u-1");
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Run", "u-1"));
        assert_eq!(
            owner.controller, None,
            "the operator's controller references stay its own"
        );
    }

    proptest! {
        #[test]
        fn generated_names_fit_and_end_well(agent in "[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?") {
            let prefix = run_generate_name(&agent);
            // The API server adds five characters.
            prop_assert!(prefix.len() + 5 <= 63);
            let stem = prefix.trim_end_matches('-');
            prop_assert!(!stem.is_empty());
            prop_assert!(stem.ends_with(|c: char| c.is_ascii_alphanumeric()), "{}", prefix);
        }
    }
}
