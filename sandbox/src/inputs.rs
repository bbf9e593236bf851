//! A Run's `inputs` in its pod: the kubelet mounts each input's ConfigMap read-only at
//! `/mnt/inputs/<i>` in the `sandbox` container only, and the sandbox copies its files into
//! `uploads/<path>` at the run's start (docs/runner.md), so the model can change them. The paths are
//! in the Run's spec, which the `agent` container has from the run API and the `sandbox` one
//! does not: the agent names them in one request.

use std::io;
use std::path::Path;

use super::io_error::io_error;
use super::paths::{Access, SandboxPaths, UPLOADS};
use super::protocol::{InputCopy, SandboxResponse};
use super::realpath::real_path;
use super::walk::is_configmap_internal;

fn error(message: impl Into<String>) -> SandboxResponse {
    SandboxResponse::Error {
        message: message.into(),
    }
}

/// Copies every input in `inputs` from its mount under `mounts` (`$HERD_ROOT/inputs`) into
/// `uploads/`, replacing files of the same name (a later attempt copies them again), and
/// converts the documents among them to Markdown siblings (`convert::uploads`).
pub(crate) fn install_inputs(
    paths: &SandboxPaths,
    mounts: Option<&Path>,
    inputs: &[InputCopy],
) -> SandboxResponse {
    if inputs.is_empty() {
        return SandboxResponse::Done { path: None };
    }
    let Some(mounts) = mounts else {
        return error("Error: this sandbox has no Run inputs mounted");
    };
    for input in inputs {
        if let Err(message) = install(paths, mounts, input) {
            return error(format!("{message} (spec.inputs[{}])", input.index));
        }
    }
    SandboxResponse::Done { path: None }
}

/// Copies one input; the error is a message for the run's failure, naming virtual paths only.
fn install(paths: &SandboxPaths, mounts: &Path, input: &InputCopy) -> Result<(), String> {
    let target = match input.path.as_deref().map(str::trim) {
        Some(folder) if !folder.is_empty() => format!("{UPLOADS}/{folder}"),
        _ => UPLOADS.to_owned(),
    };
    let resolved = paths
        .resolve(&target, Access::Write)
        .map_err(|refused| format!("Error: {refused}"))?;
    if !(resolved.virtual_path == UPLOADS
        || resolved.virtual_path.starts_with(&format!("{UPLOADS}/")))
    {
        return Err(format!("Error: {target} is not under {UPLOADS}"));
    }
    let source = mounts.join(input.index.to_string());
    let mount = format!("/mnt/inputs/{}", input.index);
    let unreadable = |failure: io::Error| io_error(&mount, &failure);
    let real_source = real_path(&source).map_err(unreadable)?;
    let entries = std::fs::read_dir(&source).map_err(unreadable)?;
    std::fs::create_dir_all(&resolved.host)
        .map_err(|failure| io_error(&resolved.virtual_path, &failure))?;
    let mut copied = Vec::new();
    for entry in entries {
        let entry = entry.map_err(unreadable)?;
        let name = entry.file_name();
        // The kubelet's atomic-writer bookkeeping (`..data`, `..2024_...`): the keys are the
        // symlinks beside it.
        if is_configmap_internal(&name) {
            continue;
        }
        let file = entry.path();
        if !is_file_within(&file, &real_source) {
            tracing::warn!(input = input.index, file = ?name, "not a file of the input: skipped");
            continue;
        }
        let name = name.to_string_lossy();
        let written = format!("{}/{name}", resolved.virtual_path);
        copy_replacing(&file, &resolved.host.join(name.as_ref()))
            .map_err(|failure| io_error(&written, &failure))?;
        copied.push(name.into_owned());
    }
    // Documents get their Markdown sibling here, in the sandbox container, so a hostile
    // upload is parsed where the run's tools run and not in the agent container.
    crate::convert::uploads::convert_uploads(&resolved.host, &copied);
    Ok(())
}

/// Whether `path` leads to a regular file inside the mount (the keys of a ConfigMap volume are
/// symlinks into its current `..data`).
fn is_file_within(path: &Path, real_mount: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|metadata| metadata.is_file())
        && real_path(path).is_ok_and(|real| real.starts_with(real_mount))
}

/// Copies `from` to `to`; a symlink at `to` is replaced, never written through.
fn copy_replacing(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(to) {
        Ok(metadata) if metadata.file_type().is_symlink() => std::fs::remove_file(to)?,
        Ok(_) | Err(_) => {}
    }
    std::fs::copy(from, to).map(drop)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::paths::SandboxRoots;

    /// A ConfigMap volume as the kubelet's atomic writer lays it out.
    fn config_map_volume(dir: &Path, files: &[(&str, &str)]) {
        let version = dir.join("..2026_01_02_03_04_05.000000001");
        std::fs::create_dir_all(&version).unwrap();
        for (name, text) in files {
            std::fs::write(version.join(name), text).unwrap();
            symlink(format!("..data/{name}"), dir.join(name)).unwrap();
        }
        symlink(version.file_name().unwrap(), dir.join("..data")).unwrap();
    }

    fn setup() -> (tempfile::TempDir, SandboxPaths, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let roots = SandboxRoots::under(&base);
        std::fs::create_dir_all(roots.user_data.join("uploads")).unwrap();
        let paths = SandboxPaths::new(&roots).unwrap();
        (dir, paths, base.join("inputs"))
    }

    fn copy(index: usize, path: Option<&str>) -> InputCopy {
        InputCopy {
            index,
            path: path.map(str::to_owned),
        }
    }

    #[test]
    fn each_input_lands_in_its_folder_without_the_kubelets_bookkeeping() {
        let (_dir, paths, mounts) = setup();
        config_map_volume(&mounts.join("0"), &[("data.csv", "a,b\n1,2\n")]);
        config_map_volume(
            &mounts.join("1"),
            &[("q1.md", "# Q1\n"), ("q2.md", "# Q2\n")],
        );
        let uploads = paths
            .host_root(crate::paths::Root::UserData)
            .join("uploads");
        std::fs::write(uploads.join("data.csv"), "an older copy").unwrap();
        let answer = install_inputs(
            &paths,
            Some(&mounts),
            &[copy(0, None), copy(1, Some("reports/2026"))],
        );
        assert_eq!(answer, SandboxResponse::Done { path: None });
        assert_eq!(
            std::fs::read_to_string(uploads.join("data.csv")).unwrap(),
            "a,b\n1,2\n"
        );
        assert_eq!(
            std::fs::read_to_string(uploads.join("reports/2026/q2.md")).unwrap(),
            "# Q2\n"
        );
        let mut names: Vec<String> = std::fs::read_dir(&uploads)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["data.csv", "reports"]);
        assert!(
            !std::fs::symlink_metadata(uploads.join("data.csv"))
                .unwrap()
                .file_type()
                .is_symlink(),
            "a copy the model may change, not a link into the read-only mount"
        );
    }

    #[test]
    fn paths_leaving_uploads_links_out_of_the_mount_and_missing_mounts_are_refused() {
        let (dir, paths, mounts) = setup();
        config_map_volume(&mounts.join("0"), &[("a.txt", "a")]);
        let answer = install_inputs(&paths, Some(&mounts), &[copy(0, Some("../workspace"))]);
        assert!(
            matches!(&answer, SandboxResponse::Error { message }
                if message.starts_with("Error: '..' is not allowed")
                    && message.ends_with("(spec.inputs[0])")),
            "{answer:?}"
        );
        let answer = install_inputs(&paths, Some(&mounts), &[copy(3, None)]);
        assert!(
            matches!(&answer, SandboxResponse::Error { message }
                if message == "Error: /mnt/inputs/3 does not exist (spec.inputs[3])"),
            "{answer:?}"
        );
        let answer = install_inputs(&paths, None, &[copy(0, None)]);
        assert!(matches!(answer, SandboxResponse::Error { .. }));
        assert_eq!(
            install_inputs(&paths, None, &[]),
            SandboxResponse::Done { path: None }
        );

        std::fs::write(dir.path().join("secret"), "s").unwrap();
        symlink(dir.path().join("secret"), mounts.join("0/leak")).unwrap();
        std::fs::create_dir(mounts.join("0/folder")).unwrap();
        let answer = install_inputs(&paths, Some(&mounts), &[copy(0, Some("in"))]);
        assert_eq!(answer, SandboxResponse::Done { path: None });
        let copied = paths
            .host_root(crate::paths::Root::UserData)
            .join("uploads/in");
        assert!(copied.join("a.txt").is_file());
        assert!(!copied.join("leak").exists() && !copied.join("folder").exists());
    }
}
