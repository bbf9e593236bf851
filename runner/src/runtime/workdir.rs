//! The local work folder of `herd-runner run`: the sandbox roots, the built-in and custom
//! skills, the uploads, and `.herd/` (run record, checkpoint).

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use herd_crds::skill::Skill;
use herd_sandbox::SandboxRoots;
use include_dir::{Dir, include_dir};

/// The built-in skills, compiled into the binary so a lone `herd-runner` has them.
static PUBLIC_SKILLS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../skills/public");

/// A prepared work folder.
#[derive(Clone, Debug)]
pub struct Workdir {
    pub root: PathBuf,
    pub roots: SandboxRoots,
}

impl Workdir {
    /// Creates (or reuses) the folder and its layout.
    pub fn prepare(root: &Path) -> io::Result<Self> {
        let roots = SandboxRoots::under(root);
        for dir in ["workspace", "uploads", "outputs"] {
            fs::create_dir_all(roots.user_data.join(dir))?;
        }
        fs::create_dir_all(&roots.skills_custom)?;
        fs::create_dir_all(Self::state_dir_of(root))?;
        if !roots.skills_public.exists() {
            fs::create_dir_all(&roots.skills_public)?;
            PUBLIC_SKILLS.extract(&roots.skills_public)?;
        }
        Ok(Workdir {
            root: root.to_path_buf(),
            roots,
        })
    }

    /// `.herd/` inside the work folder: run record and checkpoint.
    pub fn state_dir(&self) -> PathBuf {
        Self::state_dir_of(&self.root)
    }

    /// `.herd/` inside the work folder `root`, prepared or not.
    pub fn state_dir_of(root: &Path) -> PathBuf {
        root.join(".herd")
    }

    /// Host path of a virtual `/mnt/user-data/...` path, for showing the user where files are.
    pub fn host_path(&self, virtual_path: &str) -> Option<PathBuf> {
        let rest = virtual_path.strip_prefix("/mnt/user-data/")?;
        safe_relative(rest).map(|relative| self.roots.user_data.join(relative))
    }

    /// Writes the enabled Skill manifests as `skills/custom/<name>/` folders.
    pub fn install_skills(&self, skills: &[Skill]) -> io::Result<()> {
        for skill in skills.iter().filter(|skill| skill.spec.enabled) {
            let name = skill.metadata.name.as_deref().unwrap_or_default();
            let dir = self.roots.skills_custom.join(name);
            fs::create_dir_all(&dir)?;
            fs::write(dir.join("SKILL.md"), &skill.spec.content)?;
            for (path, text) in &skill.spec.files {
                let relative = safe_relative(path).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("Skill/{name}: spec.files: '{path}' must be a relative path without '..'"),
                    )
                })?;
                let target = dir.join(relative);
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent)?;
                }
                fs::write(target, text)?;
            }
        }
        Ok(())
    }

    /// Copies `files` into `uploads/` (or `uploads/<folder>/`), keeping their names, and
    /// converts the documents among them to Markdown siblings (`convert::uploads`).
    pub fn add_uploads(&self, folder: Option<&str>, files: &[(String, Vec<u8>)]) -> io::Result<()> {
        let mut dir = self.roots.user_data.join("uploads");
        if let Some(folder) = folder {
            let relative = safe_relative(folder).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("inputs: '{folder}' must be a relative path without '..'"),
                )
            })?;
            dir = dir.join(relative);
        }
        fs::create_dir_all(&dir)?;
        let mut names = Vec::with_capacity(files.len());
        for (name, bytes) in files {
            let file = safe_relative(name)
                .filter(|p| p.components().count() == 1)
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("inputs: '{name}' is not a plain file name"),
                    )
                })?;
            fs::write(dir.join(file), bytes)?;
            names.push(name.clone());
        }
        herd_sandbox::convert_uploads(&dir, &names);
        Ok(())
    }
}

/// `path` as a relative path that stays inside its base, or `None`.
fn safe_relative(path: &str) -> Option<PathBuf> {
    let path = Path::new(path);
    let normal = path
        .components()
        .all(|component| matches!(component, Component::Normal(_)));
    (normal && !path.as_os_str().is_empty()).then(|| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// An upload's whole way: `add_uploads` converts on arrival, and the uploads listing the
    /// model reads (through the same sandbox as the tools) names the Markdown with its upload,
    /// or why there is none.
    #[tokio::test]
    async fn converted_and_refused_uploads_are_listed_with_their_outcome() {
        use herd_sandbox::{InProcessExecutor, SandboxHost};

        use crate::agent::Middleware as _;
        use crate::middleware::uploads::Uploads;
        use crate::thread::ThreadState;

        let dir = tempfile::tempdir().unwrap();
        let workdir = Workdir::prepare(dir.path()).unwrap();
        let html = b"<html><body><h1>Quarterly report</h1><p>Revenue grew.</p></body></html>";
        workdir
            .add_uploads(
                None,
                &[
                    ("report.html".into(), html.to_vec()),
                    ("broken.pdf".into(), b"not a PDF at all".to_vec()),
                ],
            )
            .unwrap();
        let markdown =
            std::fs::read_to_string(workdir.roots.user_data.join("uploads/report.html.md"))
                .unwrap();
        assert!(markdown.contains("Quarterly report"), "{markdown}");

        let sandbox = SandboxHost::new(&workdir.roots).unwrap();
        let uploads = Uploads::new(Arc::new(InProcessExecutor(Arc::new(sandbox))));
        let mut state = ThreadState::new("summarize the report");
        uploads.before_agent(&mut state).await;
        let block = state.messages[0].text();
        assert!(
            block.contains(
                "- report.html (71 B) at /mnt/user-data/uploads/report.html
    Converted to \
                 Markdown: /mnt/user-data/uploads/report.html.md ("
            ),
            "{block}"
        );
        assert!(
            !block.contains("- report.html.md"),
            "the Markdown is listed with its upload, not on its own: {block}"
        );
        assert!(
            block.contains(
                "- broken.pdf (16 B) at /mnt/user-data/uploads/broken.pdf
    Not converted: "
            ),
            "{block}"
        );
        assert!(!block.contains(".herd-conversions.json"), "{block}");
    }

    #[test]
    fn prepare_lays_out_the_roots_and_the_built_in_skills() {
        let dir = tempfile::tempdir().unwrap();
        let workdir = Workdir::prepare(dir.path()).unwrap();
        for sub in ["workspace", "uploads", "outputs"] {
            assert!(workdir.roots.user_data.join(sub).is_dir());
        }
        assert!(
            workdir
                .roots
                .skills_public
                .join("deep-research/SKILL.md")
                .is_file()
        );
        assert_eq!(
            workdir.host_path("/mnt/user-data/outputs/a.md").unwrap(),
            workdir.roots.user_data.join("outputs/a.md")
        );
        assert_eq!(workdir.host_path("/mnt/user-data/../etc/passwd"), None);
    }

    #[test]
    fn skill_files_and_uploads_cannot_escape() {
        let dir = tempfile::tempdir().unwrap();
        let workdir = Workdir::prepare(dir.path()).unwrap();
        let skill: Skill = serde_saphyr::from_str(
            "apiVersion: herd.dev/v1alpha1\nkind: Skill\nmetadata: {name: s}\n\
             spec: {content: x, files: {'../../escape.txt': bad}}",
        )
        .unwrap();
        assert!(workdir.install_skills(&[skill]).is_err());
        assert!(!dir.path().join("escape.txt").exists());
        let upload = [("../x".to_string(), b"x".to_vec())];
        assert!(workdir.add_uploads(None, &upload).is_err());
        let ok = [("data.csv".to_string(), b"a,b".to_vec())];
        workdir.add_uploads(Some("in"), &ok).unwrap();
        assert!(
            workdir
                .roots
                .user_data
                .join("uploads/in/data.csv")
                .is_file()
        );
    }

    #[test]
    fn safe_relative_accepts_only_plain_relative_paths() {
        assert!(safe_relative("a/b.txt").is_some());
        for bad in ["", "/etc/x", "../x", "a/../../x", "./x"] {
            assert!(safe_relative(bad).is_none(), "{bad}");
        }
    }
}
