//! Requests the framework makes (not the model): preparing the user-data folders, skill
//! discovery, uploads, whole-file reads for presented files and images, file facts, and
//! framework-written outputs. The `agent` container mounts neither workspace nor skills, so
//! all of this crosses the socket.

use std::io::{self, Read};
use std::path::Path;

use base64::Engine;
use sha2::{Digest, Sha256};

use super::io_error::io_error;
use super::paths::{Access, OUTPUTS, Root, SandboxPaths, UPLOADS, WORKSPACE};
use super::protocol::{SandboxResponse, SkillFile, UploadedFile};
use super::walk::{visible, walk};

/// A SKILL.md larger than this is not a skill description; it is skipped.
const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;

fn error(message: impl Into<String>) -> SandboxResponse {
    SandboxResponse::Error {
        message: message.into(),
    }
}

/// Creates `workspace/`, `uploads/` and `outputs/`.
pub(crate) fn prepare(paths: &SandboxPaths) -> SandboxResponse {
    for dir in [WORKSPACE, UPLOADS, OUTPUTS] {
        let resolved = match paths.resolve(dir, Access::Write) {
            Ok(resolved) => resolved,
            Err(refused) => return error(format!("Error: {refused}")),
        };
        if let Err(failure) = std::fs::create_dir_all(&resolved.host) {
            return error(io_error(dir, &failure));
        }
    }
    SandboxResponse::Done { path: None }
}

/// Every `<skill>/SKILL.md` under both skill roots, sorted by category then folder.
pub(crate) fn list_skills(paths: &SandboxPaths) -> SandboxResponse {
    let mut skills = Vec::new();
    for (category, root) in [
        ("public", Root::SkillsPublic),
        ("custom", Root::SkillsCustom),
    ] {
        for dir_name in sorted_names(paths.host_root(root)) {
            let virtual_path = format!("{}/{dir_name}/SKILL.md", root.virtual_prefix());
            let Ok(resolved) = paths.resolve(&virtual_path, Access::Read) else {
                tracing::warn!(path = %virtual_path, "skill file refused (symlink leaves its root)");
                continue;
            };
            let Ok(metadata) = std::fs::metadata(&resolved.host) else {
                continue;
            };
            if !metadata.is_file() || metadata.len() > MAX_SKILL_FILE_BYTES {
                tracing::warn!(path = %virtual_path, "skipping SKILL.md: not a file or over 1 MiB");
                continue;
            }
            match std::fs::read_to_string(&resolved.host) {
                Ok(content) => skills.push(SkillFile {
                    category: category.to_owned(),
                    dir_name,
                    path: virtual_path,
                    content,
                }),
                Err(failure) => {
                    tracing::warn!(path = %virtual_path, error = %failure, "unreadable SKILL.md");
                }
            }
        }
    }
    SandboxResponse::Skills { skills }
}

/// The regular files directly in `uploads/`, sorted by name.
pub(crate) fn list_uploads(paths: &SandboxPaths) -> SandboxResponse {
    let mut files = Vec::new();
    let Ok(uploads) = paths.resolve(UPLOADS, Access::Read) else {
        return SandboxResponse::Uploads { files };
    };
    for filename in sorted_names(&uploads.host) {
        let virtual_path = format!("{UPLOADS}/{filename}");
        let Ok(resolved) = paths.resolve(&virtual_path, Access::Read) else {
            continue;
        };
        if let Ok(metadata) = std::fs::metadata(&resolved.host)
            && metadata.is_file()
        {
            files.push(UploadedFile {
                filename,
                path: virtual_path,
                size: metadata.len(),
            });
        }
    }
    SandboxResponse::Uploads { files }
}

/// Files `outputs/` lists at the most: a child's deliverables, not a build tree.
pub(crate) const MAX_LISTED_OUTPUTS: usize = 1000;

/// The files under `outputs/`, as virtual paths, sorted; entries whose name starts with a dot
/// (the framework's `.tool-results/`, editors' files) and links leaving it are left out.
pub(crate) fn list_outputs(paths: &SandboxPaths) -> SandboxResponse {
    let Ok(outputs) = paths.resolve(OUTPUTS, Access::Read) else {
        return SandboxResponse::Outputs { paths: Vec::new() };
    };
    let listed = walk(&outputs.host, &outputs.host, None)
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
        .filter_map(|entry| {
            let relative = entry.path().strip_prefix(&outputs.host).ok()?;
            let parts: Vec<&str> = relative
                .components()
                .map(|part| part.as_os_str().to_str())
                .collect::<Option<_>>()?;
            (!parts.iter().any(|part| part.starts_with('.')))
                .then(|| format!("{OUTPUTS}/{}", parts.join("/")))
        })
        .take(MAX_LISTED_OUTPUTS)
        .collect();
    SandboxResponse::Outputs { paths: listed }
}

/// Visible entry names of a directory (none if it is missing), sorted; hidden files and
/// ConfigMap internals left out.
fn sorted_names(dir: &Path) -> Vec<String> {
    let real_root = super::realpath::real_path(dir).unwrap_or_else(|_| dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|entry| visible(&entry.path(), &real_root))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// A whole file as base64, refused over `max_bytes`.
pub(crate) fn read_file(paths: &SandboxPaths, path: &str, max_bytes: u64) -> SandboxResponse {
    let resolved = match paths.resolve(path, Access::Read) {
        Ok(resolved) => resolved,
        Err(refused) => return error(format!("Error: {refused}")),
    };
    let virtual_path = &resolved.virtual_path;
    let file = match std::fs::File::open(&resolved.host) {
        Ok(file) => file,
        Err(failure) => return error(io_error(virtual_path, &failure)),
    };
    let size = match file.metadata() {
        Ok(metadata) if metadata.is_dir() => {
            return error(format!("Error: {virtual_path} is a directory"));
        }
        Ok(metadata) => metadata.len(),
        Err(failure) => return error(io_error(virtual_path, &failure)),
    };
    if size > max_bytes {
        return error(format!(
            "Error: {virtual_path} is {size} bytes, over the {max_bytes}-byte limit"
        ));
    }
    // The file may grow between stat and read; never hold more than the limit.
    let mut data = Vec::new();
    if let Err(failure) = file
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut data)
    {
        return error(io_error(virtual_path, &failure));
    }
    if data.len() as u64 > max_bytes {
        return error(format!(
            "Error: {virtual_path} is over the {max_bytes}-byte limit"
        ));
    }
    SandboxResponse::File {
        size: data.len() as u64,
        data_base64: base64::engine::general_purpose::STANDARD.encode(&data),
    }
}

/// Whether a file exists, its size and SHA-256 (directories: no hash).
pub(crate) fn file_info(paths: &SandboxPaths, path: &str) -> SandboxResponse {
    let resolved = match paths.resolve(path, Access::Read) {
        Ok(resolved) => resolved,
        Err(refused) => return error(format!("Error: {refused}")),
    };
    let metadata = match std::fs::metadata(&resolved.host) {
        Ok(metadata) => metadata,
        Err(failure) if failure.kind() == io::ErrorKind::NotFound => {
            return SandboxResponse::FileInfo {
                exists: false,
                size: 0,
                sha256: None,
            };
        }
        Err(failure) => return error(io_error(&resolved.virtual_path, &failure)),
    };
    if metadata.is_dir() {
        return SandboxResponse::FileInfo {
            exists: true,
            size: 0,
            sha256: None,
        };
    }
    match hash_file(&resolved.host) {
        Ok(sha256) => SandboxResponse::FileInfo {
            exists: true,
            size: metadata.len(),
            sha256: Some(sha256),
        },
        Err(failure) => error(io_error(&resolved.virtual_path, &failure)),
    }
}

fn hash_file(path: &Path) -> io::Result<String> {
    let mut hasher = Sha256::new();
    io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Writes a framework-produced file under `outputs/` (relative paths are taken from there).
pub(crate) fn write_output(paths: &SandboxPaths, path: &str, content: &[u8]) -> SandboxResponse {
    let trimmed = path.trim();
    let full = if trimmed.starts_with('/') {
        trimmed.to_owned()
    } else {
        format!("{OUTPUTS}/{trimmed}")
    };
    let resolved = match paths.resolve(&full, Access::Write) {
        Ok(resolved) => resolved,
        Err(refused) => return error(format!("Error: {refused}")),
    };
    if !resolved.virtual_path.starts_with(&format!("{OUTPUTS}/")) {
        return error(format!(
            "Error: framework files go under {OUTPUTS}/, not {}",
            resolved.virtual_path
        ));
    }
    if let Some(parent) = resolved.host.parent()
        && let Err(failure) = std::fs::create_dir_all(parent)
    {
        return error(io_error(&resolved.virtual_path, &failure));
    }
    match std::fs::write(&resolved.host, content) {
        Ok(()) => SandboxResponse::Done {
            path: Some(resolved.virtual_path),
        },
        Err(failure) => error(io_error(&resolved.virtual_path, &failure)),
    }
}

/// Writes base64-encoded bytes under `outputs/`, as [`write_output`] does.
pub(crate) fn write_output_base64(
    paths: &SandboxPaths,
    path: &str,
    data_base64: &str,
) -> SandboxResponse {
    match base64::engine::general_purpose::STANDARD.decode(data_base64) {
        Ok(bytes) => write_output(paths, path, &bytes),
        Err(failure) => error(format!(
            "Error: the bytes for {path} are not base64: {failure}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::paths::{PathError, SandboxRoots};

    fn setup() -> io::Result<(tempfile::TempDir, SandboxRoots, SandboxPaths)> {
        let dir = tempfile::tempdir()?;
        let base = dir.path().canonicalize()?;
        let roots = SandboxRoots::under(&base.join("root"));
        let paths = SandboxPaths::new(&roots)?;
        assert_eq!(prepare(&paths), SandboxResponse::Done { path: None });
        Ok((dir, roots, paths))
    }

    #[test]
    fn prepare_creates_the_three_folders() -> io::Result<()> {
        let (_dir, roots, _paths) = setup()?;
        for sub in ["workspace", "uploads", "outputs"] {
            assert!(roots.user_data.join(sub).is_dir());
        }
        Ok(())
    }

    #[test]
    fn skills_are_found_in_both_roots_including_configmap_trees() -> io::Result<()> {
        let (dir, roots, paths) = setup()?;
        std::fs::create_dir_all(roots.skills_public.join("research"))?;
        std::fs::write(
            roots.skills_public.join("research/SKILL.md"),
            "public skill",
        )?;
        std::fs::create_dir_all(roots.skills_public.join("no-skill-file"))?;
        let review = roots.skills_custom.join("review");
        std::fs::create_dir_all(review.join("..2024_01"))?;
        std::fs::write(review.join("..2024_01/SKILL.md"), "custom skill")?;
        symlink("..2024_01", review.join("..data"))?;
        symlink("..data/SKILL.md", review.join("SKILL.md"))?;
        let evil = roots.skills_custom.join("evil");
        std::fs::create_dir_all(&evil)?;
        std::fs::write(dir.path().join("outside.md"), "stolen")?;
        symlink(dir.path().join("outside.md"), evil.join("SKILL.md"))?;

        let SandboxResponse::Skills { skills } = list_skills(&paths) else {
            panic!("not a skills response");
        };
        assert_eq!(
            skills,
            vec![
                SkillFile {
                    category: "public".into(),
                    dir_name: "research".into(),
                    path: "/mnt/skills/public/research/SKILL.md".into(),
                    content: "public skill".into(),
                },
                SkillFile {
                    category: "custom".into(),
                    dir_name: "review".into(),
                    path: "/mnt/skills/custom/review/SKILL.md".into(),
                    content: "custom skill".into(),
                },
            ]
        );
        Ok(())
    }

    #[test]
    fn outputs_are_listed_deep_without_hidden_entries_or_escaping_links() -> io::Result<()> {
        let (dir, roots, paths) = setup()?;
        let outputs = roots.user_data.join("outputs");
        std::fs::create_dir_all(outputs.join("notes/deep"))?;
        std::fs::create_dir_all(outputs.join(".tool-results"))?;
        std::fs::write(outputs.join("notes/deep/b.md"), "b")?;
        std::fs::write(outputs.join("a.md"), "a")?;
        std::fs::write(outputs.join(".tool-results/call_1.txt"), "big")?;
        std::fs::write(outputs.join("notes/.draft.swp"), "x")?;
        std::fs::write(dir.path().join("secret"), "x")?;
        std::os::unix::fs::symlink(dir.path().join("secret"), outputs.join("escape"))?;
        assert_eq!(
            list_outputs(&paths),
            SandboxResponse::Outputs {
                paths: vec![
                    "/mnt/user-data/outputs/a.md".into(),
                    "/mnt/user-data/outputs/notes/deep/b.md".into(),
                ]
            }
        );
        Ok(())
    }

    #[test]
    fn uploads_are_listed_with_sizes() -> io::Result<()> {
        let (_dir, roots, paths) = setup()?;
        std::fs::write(roots.user_data.join("uploads/b.csv"), "1,2\n")?;
        std::fs::write(roots.user_data.join("uploads/a.pdf"), "%PDF")?;
        std::fs::create_dir_all(roots.user_data.join("uploads/folder"))?;
        assert_eq!(
            list_uploads(&paths),
            SandboxResponse::Uploads {
                files: vec![
                    UploadedFile {
                        filename: "a.pdf".into(),
                        path: "/mnt/user-data/uploads/a.pdf".into(),
                        size: 4,
                    },
                    UploadedFile {
                        filename: "b.csv".into(),
                        path: "/mnt/user-data/uploads/b.csv".into(),
                        size: 4,
                    },
                ]
            }
        );
        Ok(())
    }

    #[test]
    fn whole_files_are_read_within_the_limit() -> io::Result<()> {
        let (_dir, roots, paths) = setup()?;
        std::fs::write(roots.user_data.join("outputs/chart.png"), b"\x89PNG")?;
        assert_eq!(
            read_file(&paths, "/mnt/user-data/outputs/chart.png", 4),
            SandboxResponse::File {
                data_base64: "iVBORw==".into(),
                size: 4
            }
        );
        assert_eq!(
            read_file(&paths, "/mnt/user-data/outputs/chart.png", 3),
            SandboxResponse::Error {
                message: "Error: /mnt/user-data/outputs/chart.png is 4 bytes, over the \
                          3-byte limit"
                    .into()
            }
        );
        assert_eq!(
            read_file(&paths, "/etc/passwd", 100),
            SandboxResponse::Error {
                message: format!("Error: {}", PathError::Outside("/etc/passwd".into()))
            }
        );
        Ok(())
    }

    #[test]
    fn file_info_reports_existence_size_and_hash() -> io::Result<()> {
        let (_dir, roots, paths) = setup()?;
        std::fs::write(roots.user_data.join("workspace/a.txt"), "abc")?;
        assert_eq!(
            file_info(&paths, "a.txt"),
            SandboxResponse::FileInfo {
                exists: true,
                size: 3,
                sha256: Some(crate::tools::sha256_hex(b"abc")),
            }
        );
        assert_eq!(
            file_info(&paths, "missing.txt"),
            SandboxResponse::FileInfo {
                exists: false,
                size: 0,
                sha256: None
            }
        );
        Ok(())
    }

    #[test]
    fn framework_writes_only_go_under_outputs() -> io::Result<()> {
        let (_dir, roots, paths) = setup()?;
        assert_eq!(
            write_output(&paths, "tool-results/call_1.txt", b"big result"),
            SandboxResponse::Done {
                path: Some("/mnt/user-data/outputs/tool-results/call_1.txt".into())
            }
        );
        assert_eq!(
            std::fs::read_to_string(roots.user_data.join("outputs/tool-results/call_1.txt"))?,
            "big result"
        );
        assert!(matches!(
            write_output(&paths, "/mnt/user-data/workspace/x", b"x"),
            SandboxResponse::Error { .. }
        ));
        assert!(matches!(
            write_output(&paths, "/mnt/user-data/outputs", b"x"),
            SandboxResponse::Error { .. }
        ));
        assert_eq!(
            write_output_base64(&paths, "child-1/chart.png", "iVBORw=="),
            SandboxResponse::Done {
                path: Some("/mnt/user-data/outputs/child-1/chart.png".into())
            }
        );
        assert_eq!(
            std::fs::read(roots.user_data.join("outputs/child-1/chart.png"))?,
            b"\x89PNG"
        );
        assert!(matches!(
            write_output_base64(&paths, "child-1/x", "not base64!"),
            SandboxResponse::Error { .. }
        ));
        assert!(matches!(
            write_output_base64(&paths, "child-1/../../workspace/x", "eA=="),
            SandboxResponse::Error { .. }
        ));
        Ok(())
    }
}
