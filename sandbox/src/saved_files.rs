//! The workspace's files as a suspended Run keeps them: a Pod whose workspace is an `emptyDir`
//! saves every file under `workspace/` and `outputs/` with its checkpoint before it ends, and
//! the attempt that resumes writes them back. `uploads/` is left out: every attempt copies the
//! Run's inputs there again.

use std::path::Path;

use base64::Engine as _;

use super::paths::{Access, OUTPUTS, SandboxPaths, WORKSPACE};
use super::protocol::{SandboxResponse, SavedFile};
use super::walk::walk;

/// Most files one save takes.
pub(crate) const MAX_SAVED_FILES: usize = 10_000;

fn error(message: impl Into<String>) -> SandboxResponse {
    SandboxResponse::Error {
        message: message.into(),
    }
}

/// Every regular file under `workspace/` and `outputs/`, refused when they hold more than
/// `max_bytes` together or number more than [`MAX_SAVED_FILES`].
pub(crate) fn save_files(paths: &SandboxPaths, max_bytes: u64) -> SandboxResponse {
    let mut files = Vec::new();
    let mut total: u64 = 0;
    for dir in [WORKSPACE, OUTPUTS] {
        let Ok(root) = paths.resolve(dir, Access::Read) else {
            continue;
        };
        for entry in walk(&root.host, &root.host, None).filter_map(Result::ok) {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Some(path) = virtual_path(dir, &root.host, entry.path()) else {
                continue;
            };
            let metadata = match std::fs::metadata(entry.path()) {
                Ok(metadata) => metadata,
                Err(failure) => return error(format!("cannot read {path}: {failure}")),
            };
            total = total.saturating_add(metadata.len());
            if total > max_bytes {
                return error(format!(
                    "the workspace's files hold more than {max_bytes} bytes"
                ));
            }
            if files.len() >= MAX_SAVED_FILES {
                return error(format!(
                    "the workspace holds more than {MAX_SAVED_FILES} files"
                ));
            }
            let bytes = match std::fs::read(entry.path()) {
                Ok(bytes) => bytes,
                Err(failure) => return error(format!("cannot read {path}: {failure}")),
            };
            files.push(SavedFile {
                path,
                data_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
                executable: is_executable(&metadata),
            });
        }
    }
    SandboxResponse::SavedFiles { files }
}

/// Writes saved files back, creating folders; only under `workspace/` and `outputs/`.
pub(crate) fn restore_files(paths: &SandboxPaths, files: &[SavedFile]) -> SandboxResponse {
    for file in files {
        let inside = [WORKSPACE, OUTPUTS]
            .iter()
            .any(|dir| file.path.starts_with(&format!("{dir}/")));
        if !inside {
            return error(format!(
                "{} is not under {WORKSPACE}/ or {OUTPUTS}/",
                file.path
            ));
        }
        let resolved = match paths.resolve(&file.path, Access::Write) {
            Ok(resolved) => resolved,
            Err(refused) => return error(format!("{}: {refused}", file.path)),
        };
        let bytes = match base64::engine::general_purpose::STANDARD.decode(&file.data_base64) {
            Ok(bytes) => bytes,
            Err(failure) => return error(format!("{} is not base64: {failure}", file.path)),
        };
        let written = resolved
            .host
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&resolved.host, bytes))
            .and_then(|()| set_executable(&resolved.host, file.executable));
        if let Err(failure) = written {
            return error(format!("cannot write {}: {failure}", file.path));
        }
    }
    SandboxResponse::Done { path: None }
}

/// The virtual path of `host` under the folder `dir` whose host path is `root`.
fn virtual_path(dir: &str, root: &Path, host: &Path) -> Option<String> {
    let relative = host.strip_prefix(root).ok()?;
    let parts: Vec<&str> = relative
        .components()
        .map(|part| part.as_os_str().to_str())
        .collect::<Option<_>>()?;
    Some(format!("{dir}/{}", parts.join("/")))
}

fn is_executable(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    metadata.permissions().mode() & 0o111 != 0
}

fn set_executable(path: &Path, executable: bool) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if !executable {
        return Ok(());
    }
    let mut permissions = std::fs::metadata(path)?.permissions();
    permissions.set_mode(permissions.mode() | 0o755);
    std::fs::set_permissions(path, permissions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_services::prepare;
    use crate::paths::SandboxRoots;

    fn sandbox() -> (tempfile::TempDir, SandboxRoots, SandboxPaths) {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let roots = SandboxRoots::under(&base.join("root"));
        let paths = SandboxPaths::new(&roots).unwrap();
        assert_eq!(prepare(&paths), SandboxResponse::Done { path: None });
        (dir, roots, paths)
    }

    fn saved(paths: &SandboxPaths, max_bytes: u64) -> Vec<SavedFile> {
        match save_files(paths, max_bytes) {
            SandboxResponse::SavedFiles { files } => files,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_workspace_and_outputs_travel_to_another_sandbox_uploads_stay() {
        let (_a, roots, paths) = sandbox();
        let data = &roots.user_data;
        std::fs::create_dir_all(data.join("workspace/src")).unwrap();
        std::fs::write(data.join("workspace/src/notes.md"), "draft one").unwrap();
        std::fs::write(data.join("workspace/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
        set_executable(&data.join("workspace/run.sh"), true).unwrap();
        std::fs::write(data.join("outputs/report.bin"), [0u8, 159, 146, 150]).unwrap();
        std::fs::write(data.join("uploads/input.csv"), "a,b").unwrap();
        let files = saved(&paths, 1024);
        let listed: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            listed,
            [
                "/mnt/user-data/workspace/run.sh",
                "/mnt/user-data/workspace/src/notes.md",
                "/mnt/user-data/outputs/report.bin",
            ]
        );

        let (_b, other_roots, other) = sandbox();
        assert_eq!(
            restore_files(&other, &files),
            SandboxResponse::Done { path: None }
        );
        let back = &other_roots.user_data;
        assert_eq!(
            std::fs::read_to_string(back.join("workspace/src/notes.md")).unwrap(),
            "draft one"
        );
        assert_eq!(
            std::fs::read(back.join("outputs/report.bin")).unwrap(),
            [0u8, 159, 146, 150]
        );
        let script = std::fs::metadata(back.join("workspace/run.sh")).unwrap();
        assert!(is_executable(&script));
        assert!(!is_executable(
            &std::fs::metadata(back.join("workspace/src/notes.md")).unwrap()
        ));
        assert_eq!(saved(&other, 1024), files, "the same files once more");
    }

    #[test]
    fn too_many_bytes_are_refused_with_the_limit() {
        let (_dir, roots, paths) = sandbox();
        std::fs::write(roots.user_data.join("workspace/big"), vec![b'x'; 2048]).unwrap();
        let SandboxResponse::Error { message } = save_files(&paths, 1024) else {
            panic!("not refused");
        };
        assert!(message.contains("more than 1024 bytes"), "{message}");
    }

    #[test]
    fn a_restore_writes_nowhere_else() {
        let (_dir, _roots, paths) = sandbox();
        for path in [
            "/mnt/user-data/uploads/x",
            "/etc/passwd",
            "/mnt/user-data/workspace/../../escape",
        ] {
            let file = SavedFile {
                path: path.to_owned(),
                data_base64: String::new(),
                executable: false,
            };
            assert!(
                matches!(
                    restore_files(&paths, &[file]),
                    SandboxResponse::Error { .. }
                ),
                "{path}"
            );
        }
        let broken = SavedFile {
            path: "/mnt/user-data/workspace/a".into(),
            data_base64: "not base64!".into(),
            executable: false,
        };
        assert!(matches!(
            restore_files(&paths, &[broken]),
            SandboxResponse::Error { .. }
        ));
    }
}
