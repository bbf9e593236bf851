//! `kubectl herd result RUN [-o DIR]`: the whole answer from ConfigMap `<run>-result`
//! (`answer.md`), and with `-o` the files the agent presented (`files.json` = `[{key, path,
//! size}]`, the bytes in `binaryData[key]`), written under DIR at their place in `outputs/`.

use std::path::{Component, Path, PathBuf};

use herd_crds::report::StopReason;
use herd_crds::run::Run;
use herd_crds::terminal_text::{for_terminal, one_line};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use serde::Deserialize;

use crate::connect::Cluster;
use crate::error::{CliError, api_error};
use crate::io::Io;
use crate::outcome::{EXIT_ANSWERED, EXIT_STOPPED, Outcome, outcome};
use crate::runs::get_run;
use crate::view::{phase_name, view};

/// Where presented files live, in the runner's paths.
pub const OUTPUTS: &str = "/mnt/user-data/outputs/";
/// The key of the whole answer.
pub const ANSWER_KEY: &str = "answer.md";
/// The key of the file list.
pub const FILES_KEY: &str = "files.json";

/// One entry of `files.json`.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
struct FileEntry {
    key: String,
    path: String,
}

/// A presented file: its path under `outputs/` and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Presented<'a> {
    /// Where it goes under the output folder.
    pub relative: PathBuf,
    /// Its content.
    pub bytes: &'a [u8],
}

/// The name of a Run's result ConfigMap.
pub fn result_name(run: &str) -> String {
    format!("{run}-result")
}

/// How `run` ended, when it has an answer to read: the stop reason; else what to do.
pub fn answered(run: &Run) -> Result<Option<StopReason>, String> {
    let name = run.name_any();
    match outcome(run) {
        Outcome::Answered(stop) => Ok(stop),
        Outcome::Failed { reason, message } => Err(format!(
            "Run {name} failed ({}: {}): it has no answer (kubectl herd get {name})",
            one_line(&reason),
            one_line(&message)
        )),
        Outcome::Waiting(_) => Err(format!(
            "Run {name} has no result yet: it waits for an answer (kubectl herd answer {name} \
             \"...\")"
        )),
        Outcome::Going => Err(format!(
            "Run {name} has no result yet: it is {} (kubectl herd follow {name})",
            phase_name(view(run).phase)
        )),
    }
}

/// Whether `config_map` is owned by the Run whose uid is `uid`.
pub fn owned_by(config_map: &ConfigMap, uid: &str) -> bool {
    config_map
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Run" && o.uid == uid)
}

/// A presented file's place under the output folder: its path under `outputs/`, refused unless
/// it is a plain relative path that stays inside.
pub fn relative_output(path: &str) -> Result<PathBuf, String> {
    let rest = path
        .strip_prefix(OUTPUTS)
        .ok_or_else(|| format!("{path:?} is not under {OUTPUTS}"))?;
    let mut relative = PathBuf::new();
    for part in rest.split('/') {
        let plain = !part.is_empty() && part != "." && part != ".." && !part.contains('\0');
        if !plain
            || !matches!(
                Path::new(part).components().next(),
                Some(Component::Normal(_))
            )
        {
            return Err(format!("{path:?} is not a plain file path"));
        }
        relative.push(part);
    }
    Ok(relative)
}

/// The presented files a result ConfigMap lists, in order.
pub fn presented_files(config_map: &ConfigMap) -> Result<Vec<Presented<'_>>, String> {
    let name = config_map.name_any();
    let Some(listing) = config_map.data.as_ref().and_then(|d| d.get(FILES_KEY)) else {
        return Ok(Vec::new());
    };
    let entries: Vec<FileEntry> = serde_json::from_str(listing)
        .map_err(|e| format!("ConfigMap {name} has an unreadable {FILES_KEY}: {e}"))?;
    entries
        .iter()
        .map(|entry| {
            let relative = relative_output(&entry.path)
                .map_err(|why| format!("ConfigMap {name} lists a file that {why}"))?;
            let bytes = config_map
                .binary_data
                .as_ref()
                .and_then(|b| b.get(&entry.key))
                .ok_or_else(|| {
                    format!(
                        "ConfigMap {name} lists {} but holds no {}",
                        entry.path, entry.key
                    )
                })?;
            Ok(Presented {
                relative,
                bytes: bytes.0.as_slice(),
            })
        })
        .collect()
}

/// A Run's answer as `result` and `--follow` print it.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The whole answer (`answer.md`), else the text in the Run's status.
    pub text: String,
    /// The result ConfigMap, when there is one.
    pub config_map: Option<ConfigMap>,
    /// Whether `text` is the status's, cut at 16 KiB, because the ConfigMap is gone.
    pub cut: bool,
}

/// The answer of the answered `run`.
pub async fn read_answer(cluster: &Cluster, run: &Run) -> Result<Answer, CliError> {
    let config_map = read_result(cluster, run).await?;
    let whole = config_map
        .as_ref()
        .and_then(|cm| cm.data.as_ref())
        .and_then(|d| d.get(ANSWER_KEY))
        .cloned();
    let result = run
        .status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .and_then(|r| r.result.as_ref());
    let (text, cut) = match whole {
        Some(text) => (text, false),
        None => (
            result.map(|r| r.text.clone()).unwrap_or_default(),
            result.is_some_and(|r| r.truncated),
        ),
    };
    Ok(Answer {
        text,
        config_map,
        cut,
    })
}

/// Prints `answer` on stdout (a warning first on stderr when it is cut).
pub fn print_answer(name: &str, answer: &Answer, io: &mut Io<'_>) {
    if answer.cut {
        let _ = writeln!(
            io.stderr,
            "warning: ConfigMap {} is gone; the answer below is cut at 16 KiB",
            result_name(name)
        );
    }
    let _ = writeln!(io.stdout, "{}", for_terminal(answer.text.trim_end()));
}

/// The exit code of an answered Run, with the `stopped:` line on stderr when a limit cut it.
pub fn stopped(stop: Option<StopReason>, io: &mut Io<'_>) -> u8 {
    match stop {
        Some(reason) if reason != StopReason::Completed && reason.is_answer() => {
            let _ = writeln!(io.stderr, "stopped: {reason:?} (the answer is partial)");
            EXIT_STOPPED
        }
        _ => EXIT_ANSWERED,
    }
}

/// Prints the answer of the Run `name` and writes its files under `output`; the exit code (4
/// when a limit stopped the Run).
pub async fn result(
    cluster: &Cluster,
    name: &str,
    output: Option<&Path>,
    io: &mut Io<'_>,
) -> Result<u8, CliError> {
    let run = get_run(cluster, name).await?;
    let stop = answered(&run).map_err(CliError::new)?;
    let answer = read_answer(cluster, &run).await?;
    print_answer(name, &answer, io);
    if let Some(dir) = output {
        let Some(config_map) = &answer.config_map else {
            return Err(CliError::new(format!(
                "ConfigMap {} is gone (deleted by hand, or with an earlier Run of that name): \
                 the files of Run {name} cannot be read",
                result_name(name)
            )));
        };
        write_files(config_map, dir, io)?;
    }
    Ok(stopped(stop, io))
}

/// The result ConfigMap of `run`, `None` when there is none; refused when it is not this Run's.
async fn read_result(cluster: &Cluster, run: &Run) -> Result<Option<ConfigMap>, CliError> {
    let name = result_name(&run.name_any());
    let object = format!("ConfigMap {name}");
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let target = cluster.target("reading", &object, "the Run's result is gone");
    let Some(config_map) = config_maps
        .get_opt(&name)
        .await
        .map_err(|e| api_error(&e, target))?
    else {
        return Ok(None);
    };
    let uid = run.uid().unwrap_or_default();
    if !owned_by(&config_map, &uid) {
        return Err(CliError::new(format!(
            "ConfigMap {name} is not Run {}'s (another object owns it): not reading it",
            run.name_any()
        )));
    }
    Ok(Some(config_map))
}

fn write_files(config_map: &ConfigMap, dir: &Path, io: &mut Io<'_>) -> Result<(), CliError> {
    let files = presented_files(config_map).map_err(CliError::new)?;
    if files.is_empty() {
        let _ = writeln!(io.stderr, "no files were presented");
        return Ok(());
    }
    for file in files {
        let target = dir.join(&file.relative);
        let failed = |e: std::io::Error| {
            CliError::new(format!(
                "cannot write {}: {e} (choose another -o folder)",
                target.display()
            ))
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(failed)?;
        }
        if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(CliError::new(format!(
                "{} is a symbolic link: not writing through it (choose another -o folder)",
                target.display()
            )));
        }
        std::fs::write(&target, file.bytes).map_err(failed)?;
        let _ = writeln!(
            io.stderr,
            "wrote {} ({} bytes)",
            for_terminal(&target.display().to_string()),
            file.bytes.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use herd_crds::condition::ConditionStatus;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use proptest::prelude::*;

    use super::*;
    use crate::testing::{question_run, run_with};

    fn result_config_map(listing: &str, binary: &[(&str, &[u8])]) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("r-result".into());
        cm.data = Some(BTreeMap::from([
            (ANSWER_KEY.to_owned(), "The answer.".to_owned()),
            (FILES_KEY.to_owned(), listing.to_owned()),
        ]));
        cm.binary_data = Some(
            binary
                .iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                .collect(),
        );
        cm
    }

    #[test]
    fn presented_files_come_in_their_listed_order() {
        let cm = result_config_map(
            r#"[{"key":"f-0","path":"/mnt/user-data/outputs/brief.md","size":7},
                {"key":"f-1","path":"/mnt/user-data/outputs/img/plot.png","size":3}]"#,
            &[("f-0", b"# Brief"), ("f-1", &[0, 159, 255])],
        );
        let files = presented_files(&cm).unwrap();
        assert_eq!(
            files,
            vec![
                Presented {
                    relative: PathBuf::from("brief.md"),
                    bytes: b"# Brief"
                },
                Presented {
                    relative: PathBuf::from("img/plot.png"),
                    bytes: &[0, 159, 255]
                },
            ]
        );
        assert_eq!(presented_files(&ConfigMap::default()).unwrap(), vec![]);
        assert_eq!(
            presented_files(&result_config_map("[]", &[])).unwrap(),
            vec![]
        );
    }

    #[test]
    fn broken_listings_are_errors_that_name_the_config_map() {
        let garbled = result_config_map("not json", &[]);
        assert!(
            presented_files(&garbled)
                .unwrap_err()
                .starts_with("ConfigMap r-result has an unreadable files.json")
        );
        let missing = result_config_map(
            r#"[{"key":"f-0","path":"/mnt/user-data/outputs/a","size":1}]"#,
            &[],
        );
        assert_eq!(
            presented_files(&missing).unwrap_err(),
            "ConfigMap r-result lists /mnt/user-data/outputs/a but holds no f-0"
        );
        let escaping = result_config_map(
            r#"[{"key":"f-0","path":"/mnt/user-data/outputs/../../etc/passwd","size":1}]"#,
            &[("f-0", b"x")],
        );
        assert!(
            presented_files(&escaping)
                .unwrap_err()
                .contains("not a plain file path")
        );
    }

    #[test]
    fn only_plain_paths_under_outputs_are_written() {
        assert_eq!(
            relative_output("/mnt/user-data/outputs/a/b.md"),
            Ok(PathBuf::from("a/b.md"))
        );
        for refused in [
            "/mnt/user-data/outputs/",
            "/mnt/user-data/outputs/../x",
            "/mnt/user-data/outputs/a//b",
            "/mnt/user-data/outputs/./a",
            "/mnt/user-data/outputs//etc/passwd",
            "/mnt/user-data/workspace/a",
            "outputs/a",
        ] {
            assert!(relative_output(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn only_answered_runs_have_a_result() {
        assert_eq!(
            answered(&run_with(
                Some((ConditionStatus::True, "Succeeded")),
                Some(StopReason::LoopDetected),
                None
            )),
            Ok(Some(StopReason::LoopDetected))
        );
        assert_eq!(
            answered(&run_with(
                Some((ConditionStatus::False, "TimedOut")),
                None,
                None
            ))
            .unwrap_err(),
            "Run r failed (TimedOut: said TimedOut): it has no answer (kubectl herd get r)"
        );
        assert_eq!(
            answered(&run_with(
                Some((ConditionStatus::Unknown, "Running")),
                None,
                None
            ))
            .unwrap_err(),
            "Run r has no result yet: it is Running (kubectl herd follow r)"
        );
        assert!(
            answered(&question_run("q", &[]))
                .unwrap_err()
                .contains("kubectl herd answer r")
        );
    }

    #[test]
    fn ownership_is_by_uid() {
        let mut cm = ConfigMap::default();
        assert!(!owned_by(&cm, "u"));
        cm.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "herd.dev/v1alpha1".into(),
            kind: "Run".into(),
            name: "r".into(),
            uid: "u".into(),
            ..OwnerReference::default()
        }]);
        assert!(owned_by(&cm, "u"));
        assert!(!owned_by(&cm, "v"));
    }

    proptest! {
        #[test]
        fn accepted_paths_stay_inside(path in "(/mnt/user-data/outputs/)?[a-z./]{0,20}") {
            if let Ok(relative) = relative_output(&path) {
                prop_assert!(relative.components().all(|c| matches!(c, Component::Normal(_))));
                prop_assert!(relative.components().count() >= 1);
            }
        }
    }
}
