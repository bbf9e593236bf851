//! Virtual sandbox paths: what the model sees (`/mnt/user-data/...`, `/mnt/skills/...`) mapped
//! onto host directories, with DeerFlow's rules: `..` and paths outside the roots refused,
//! skills read-only, symlinks followed only while their target stays under the same root.
//!
//! In a pod `HERD_ROOT=/mnt` makes the mapping the identity; locally the roots live in a work
//! directory. Either way no message carries a host path.

use std::io;
use std::path::{Path, PathBuf};

use super::mask::PrefixRewriter;
use super::realpath::real_path;

/// The read-write user data root.
pub(crate) const USER_DATA: &str = "/mnt/user-data";
/// Where relative paths and `bash` start.
pub const WORKSPACE: &str = "/mnt/user-data/workspace";
/// Files the user handed in.
pub const UPLOADS: &str = "/mnt/user-data/uploads";
/// Files meant for the user.
pub const OUTPUTS: &str = "/mnt/user-data/outputs";
/// Built-in skills (read-only).
pub const SKILLS_PUBLIC: &str = "/mnt/skills/public";
/// Skills from Skill resources (read-only ConfigMap mounts).
pub const SKILLS_CUSTOM: &str = "/mnt/skills/custom";

/// The host directories behind the virtual roots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxRoots {
    /// Behind `/mnt/user-data` (holds `workspace/`, `uploads/`, `outputs/`).
    pub user_data: PathBuf,
    /// Behind `/mnt/skills/public`.
    pub skills_public: PathBuf,
    /// Behind `/mnt/skills/custom`.
    pub skills_custom: PathBuf,
}

impl SandboxRoots {
    /// The standard layout under `base` (`HERD_ROOT`): `base/user-data`, `base/skills/public`,
    /// `base/skills/custom`. `under("/mnt")` is the identity mapping.
    pub fn under(base: &Path) -> Self {
        SandboxRoots {
            user_data: base.join("user-data"),
            skills_public: base.join("skills/public"),
            skills_custom: base.join("skills/custom"),
        }
    }
}

/// One of the three virtual roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Root {
    UserData,
    SkillsPublic,
    SkillsCustom,
}

impl Root {
    /// Every root, in a fixed order.
    pub(crate) const ALL: [Root; 3] = [Root::UserData, Root::SkillsPublic, Root::SkillsCustom];

    /// The virtual path of the root itself.
    pub(crate) fn virtual_prefix(self) -> &'static str {
        match self {
            Root::UserData => USER_DATA,
            Root::SkillsPublic => SKILLS_PUBLIC,
            Root::SkillsCustom => SKILLS_CUSTOM,
        }
    }

    /// Whether the model may change files under it.
    pub(crate) fn writable(self) -> bool {
        matches!(self, Root::UserData)
    }

    fn segments(self) -> &'static [&'static str] {
        match self {
            Root::UserData => &["mnt", "user-data"],
            Root::SkillsPublic => &["mnt", "skills", "public"],
            Root::SkillsCustom => &["mnt", "skills", "custom"],
        }
    }
}

/// What the caller is about to do with a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

/// A path that passed every check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResolvedPath {
    pub root: Root,
    /// Normalized virtual path, e.g. `/mnt/user-data/workspace/notes.md`.
    pub virtual_path: String,
    /// The host path (lexical: symlinks on the way are left for the OS to follow).
    pub host: PathBuf,
}

/// Why a path was refused. Messages name virtual paths only.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error("the path is empty")]
    Empty,
    #[error("'{0}' contains a NUL byte")]
    Nul(String),
    #[error("'..' is not allowed in paths ('{0}'); use an absolute path under /mnt/user-data")]
    ParentSegment(String),
    #[error(
        "'{0}' is outside the sandbox; use /mnt/user-data/{{workspace,uploads,outputs}} \
         (read-write) or /mnt/skills/{{public,custom}} (read-only)"
    )]
    Outside(String),
    #[error("{0} is read-only")]
    ReadOnly(String),
    #[error("{0} is a symbolic link leading outside {1}; it is not followed")]
    EscapingLink(String, &'static str),
    #[error("{0} could not be resolved: {1}")]
    Unresolvable(String, String),
}

/// The virtual roots bound to host directories.
#[derive(Clone, Debug)]
pub(crate) struct SandboxPaths {
    /// Lexical host roots, absolute, in `Root::ALL` order.
    hosts: [PathBuf; 3],
    /// Host roots (lexical and symlink-resolved) to virtual ones, for tool output.
    host_to_virtual: PrefixRewriter,
    /// Virtual roots to host ones, for local `bash` commands.
    virtual_to_host: PrefixRewriter,
}

impl SandboxPaths {
    /// Binds the roots; relative host directories are taken from the current directory.
    pub(crate) fn new(roots: &SandboxRoots) -> io::Result<Self> {
        let hosts = [
            std::path::absolute(&roots.user_data)?,
            std::path::absolute(&roots.skills_public)?,
            std::path::absolute(&roots.skills_custom)?,
        ];
        let mut outward = Vec::new();
        let mut inward = Vec::new();
        for (root, host) in Root::ALL.iter().zip(&hosts) {
            let virtual_prefix = root.virtual_prefix().to_owned();
            let real = real_path(host)?;
            outward.push((host.to_string_lossy().into_owned(), virtual_prefix.clone()));
            outward.push((real.to_string_lossy().into_owned(), virtual_prefix.clone()));
            inward.push((virtual_prefix, host.to_string_lossy().into_owned()));
        }
        Ok(SandboxPaths {
            hosts,
            host_to_virtual: PrefixRewriter::new(outward).map_err(io::Error::other)?,
            virtual_to_host: PrefixRewriter::new(inward).map_err(io::Error::other)?,
        })
    }

    /// `text` with host root paths replaced by virtual ones (tool output, error messages).
    pub(crate) fn mask(&self, text: &str) -> String {
        self.host_to_virtual.rewrite(text)
    }

    /// A `bash` command with virtual root paths replaced by host ones; the identity in a pod.
    pub(crate) fn unmask_command(&self, command: &str) -> String {
        self.virtual_to_host.rewrite(command)
    }

    /// Whether host and virtual paths coincide (a pod with `HERD_ROOT=/mnt`); the tests check
    /// the mapping with it.
    #[cfg(test)]
    pub(crate) fn is_identity(&self) -> bool {
        Root::ALL
            .iter()
            .zip(&self.hosts)
            .all(|(root, host)| host.as_path() == Path::new(root.virtual_prefix()))
    }

    /// The lexical host directory behind `root`.
    pub(crate) fn host_root(&self, root: Root) -> &Path {
        &self.hosts[root_index(root)]
    }

    /// Resolves a model-given path (absolute virtual, or relative to the workspace) for
    /// `access`, refusing `..`, paths outside the roots, writes under skills and symlinks that
    /// leave their root.
    pub(crate) fn resolve(&self, input: &str, access: Access) -> Result<ResolvedPath, PathError> {
        let (root, rest) = normalize(input)?;
        let mut virtual_path = root.virtual_prefix().to_owned();
        let mut host = self.host_root(root).to_path_buf();
        for segment in &rest {
            virtual_path.push('/');
            virtual_path.push_str(segment);
            host.push(segment);
        }
        if access == Access::Write && !root.writable() {
            return Err(PathError::ReadOnly(virtual_path));
        }
        self.check_contained(root, &host)
            .map_err(|error| match error {
                ContainmentError::Escapes => {
                    PathError::EscapingLink(virtual_path.clone(), root.virtual_prefix())
                }
                ContainmentError::Io(message) => {
                    PathError::Unresolvable(virtual_path.clone(), message)
                }
            })?;
        Ok(ResolvedPath {
            root,
            virtual_path,
            host,
        })
    }

    fn check_contained(&self, root: Root, host: &Path) -> Result<(), ContainmentError> {
        let real_root = real_path(self.host_root(root)).map_err(ContainmentError::io)?;
        let real = real_path(host).map_err(ContainmentError::io)?;
        if real.starts_with(&real_root) {
            Ok(())
        } else {
            Err(ContainmentError::Escapes)
        }
    }

    /// The virtual path of a host path under one of the roots (lexically), if any: the tests'
    /// inverse of `resolve`.
    #[cfg(test)]
    pub(crate) fn to_virtual(&self, host: &Path) -> Option<String> {
        let mut best: Option<(usize, Root)> = None;
        for root in Root::ALL {
            let root_host = self.host_root(root);
            if host.starts_with(root_host) {
                let depth = root_host.components().count();
                if best.is_none_or(|(best_depth, _)| depth > best_depth) {
                    best = Some((depth, root));
                }
            }
        }
        let (_, root) = best?;
        let rest = host.strip_prefix(self.host_root(root)).ok()?;
        let mut virtual_path = root.virtual_prefix().to_owned();
        for component in rest.components() {
            virtual_path.push('/');
            virtual_path.push_str(&component.as_os_str().to_string_lossy());
        }
        Some(virtual_path)
    }
}

enum ContainmentError {
    Escapes,
    Io(String),
}

impl ContainmentError {
    fn io(error: io::Error) -> Self {
        ContainmentError::Io(error.to_string())
    }
}

fn root_index(root: Root) -> usize {
    match root {
        Root::UserData => 0,
        Root::SkillsPublic => 1,
        Root::SkillsCustom => 2,
    }
}

/// The segments of the absolute virtual path `input` below `outputs/`, refused as `resolve`
/// refuses (`..`, NUL, outside the roots) and also when relative or not below `outputs/`:
/// for a path someone other than the model names (a child Run's presented file), checked
/// before anything touches the file system.
pub fn below_outputs(input: &str) -> Result<Vec<String>, PathError> {
    let outside = || PathError::Outside(input.trim().to_owned());
    if !input.trim().starts_with('/') {
        return Err(outside());
    }
    let (root, rest) = normalize(input)?;
    match rest.split_first() {
        Some((first, below))
            if root == Root::UserData && first == "outputs" && !below.is_empty() =>
        {
            Ok(below.to_vec())
        }
        _ => Err(outside()),
    }
}

/// Splits a model-given path into its root and the segments below it, without touching the
/// file system.
fn normalize(input: &str) -> Result<(Root, Vec<String>), PathError> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(PathError::Empty);
    }
    if trimmed.contains('\0') {
        return Err(PathError::Nul(trimmed.replace('\0', "\\0")));
    }
    let mut segments: Vec<&str> = Vec::new();
    if !trimmed.starts_with('/') {
        segments.extend(["mnt", "user-data", "workspace"]);
    }
    for segment in trimmed.split('/') {
        match segment {
            "" | "." => {}
            ".." => return Err(PathError::ParentSegment(trimmed.to_owned())),
            other => segments.push(other),
        }
    }
    for root in Root::ALL {
        let prefix = root.segments();
        if segments.len() >= prefix.len() && segments[..prefix.len()] == *prefix {
            let rest = segments[prefix.len()..]
                .iter()
                .map(|segment| (*segment).to_owned())
                .collect();
            return Ok((root, rest));
        }
    }
    Err(PathError::Outside(trimmed.to_owned()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use proptest::prelude::*;

    use super::*;

    /// A work dir with the three roots, a ConfigMap-style custom skill, and links of every
    /// kind: inside the same root, into another root, out of the sandbox, dangling outward.
    struct Fixture {
        _dir: tempfile::TempDir,
        base: PathBuf,
        paths: SandboxPaths,
    }

    impl Fixture {
        /// `input` resolved for `access`; a refusal fails the test.
        fn resolved(&self, input: &str, access: Access) -> io::Result<ResolvedPath> {
            self.paths.resolve(input, access).map_err(io::Error::other)
        }
    }

    fn fixture() -> io::Result<Fixture> {
        let dir = tempfile::tempdir()?;
        let base = dir.path().canonicalize()?;
        let roots = SandboxRoots::under(&base.join("root"));
        for sub in ["workspace", "uploads", "outputs"] {
            std::fs::create_dir_all(roots.user_data.join(sub))?;
        }
        std::fs::create_dir_all(roots.skills_public.join("research"))?;
        std::fs::write(roots.skills_public.join("research/SKILL.md"), "public")?;
        let skill = roots.skills_custom.join("review");
        std::fs::create_dir_all(skill.join("..2024_01_01_00_00_00.1/scripts"))?;
        std::fs::write(skill.join("..2024_01_01_00_00_00.1/SKILL.md"), "custom")?;
        symlink("..2024_01_01_00_00_00.1", skill.join("..data"))?;
        symlink("..data/SKILL.md", skill.join("SKILL.md"))?;
        symlink("..data/scripts", skill.join("scripts"))?;
        std::fs::create_dir_all(base.join("secret"))?;
        std::fs::write(base.join("secret/key"), "hunter2")?;
        let workspace = roots.user_data.join("workspace");
        symlink(base.join("secret"), workspace.join("out"))?;
        symlink("../../../secret", workspace.join("up"))?;
        symlink(&roots.skills_public, workspace.join("pub"))?;
        symlink("../outputs", workspace.join("inner"))?;
        symlink("../../../secret/new", workspace.join("dangling"))?;
        symlink("../../../../secret", skill.join("escape"))?;
        let paths = SandboxPaths::new(&roots)?;
        Ok(Fixture {
            _dir: dir,
            base,
            paths,
        })
    }

    #[test]
    fn relative_paths_resolve_in_the_workspace() -> io::Result<()> {
        let f = fixture()?;
        let resolved = f.resolved("notes/a.md", Access::Write)?;
        assert_eq!(resolved.virtual_path, "/mnt/user-data/workspace/notes/a.md");
        assert_eq!(
            resolved.host,
            f.base.join("root/user-data/workspace/notes/a.md")
        );
        assert_eq!(resolved.root, Root::UserData);
        Ok(())
    }

    #[test]
    fn dot_segments_and_repeated_slashes_are_normalized() -> io::Result<()> {
        let f = fixture()?;
        let resolved = f.resolved(" /mnt//user-data/./outputs/ ", Access::Read)?;
        assert_eq!(resolved.virtual_path, "/mnt/user-data/outputs");
        Ok(())
    }

    #[test]
    fn parent_segments_and_outside_paths_are_refused() -> io::Result<()> {
        let f = fixture()?;
        assert_eq!(
            f.paths.resolve("../x", Access::Read),
            Err(PathError::ParentSegment("../x".into()))
        );
        assert_eq!(
            f.paths
                .resolve("/mnt/user-data/workspace/../../etc", Access::Read),
            Err(PathError::ParentSegment(
                "/mnt/user-data/workspace/../../etc".into()
            ))
        );
        assert_eq!(
            f.paths.resolve("/etc/passwd", Access::Read),
            Err(PathError::Outside("/etc/passwd".into()))
        );
        assert_eq!(
            f.paths.resolve("/mnt/skills", Access::Read),
            Err(PathError::Outside("/mnt/skills".into()))
        );
        assert_eq!(
            f.paths.resolve("/mnt/user-datax/a", Access::Read),
            Err(PathError::Outside("/mnt/user-datax/a".into()))
        );
        assert_eq!(f.paths.resolve("  ", Access::Read), Err(PathError::Empty));
        Ok(())
    }

    #[test]
    fn skills_are_read_only() -> io::Result<()> {
        let f = fixture()?;
        assert!(
            f.paths
                .resolve("/mnt/skills/public/research/SKILL.md", Access::Read)
                .is_ok()
        );
        assert_eq!(
            f.paths
                .resolve("/mnt/skills/custom/review/new.md", Access::Write),
            Err(PathError::ReadOnly(
                "/mnt/skills/custom/review/new.md".into()
            ))
        );
        Ok(())
    }

    #[test]
    fn configmap_symlink_trees_are_followed() -> io::Result<()> {
        let f = fixture()?;
        let resolved = f.resolved("/mnt/skills/custom/review/SKILL.md", Access::Read)?;
        assert_eq!(std::fs::read_to_string(&resolved.host)?, "custom");
        assert!(
            f.paths
                .resolve("/mnt/skills/custom/review/scripts/x.py", Access::Read)
                .is_ok()
        );
        Ok(())
    }

    #[test]
    fn links_inside_the_same_root_are_followed() -> io::Result<()> {
        let f = fixture()?;
        let resolved = f.resolved("inner/report.md", Access::Write)?;
        assert_eq!(
            resolved.virtual_path,
            "/mnt/user-data/workspace/inner/report.md"
        );
        Ok(())
    }

    #[test]
    fn escaping_links_are_refused_without_naming_the_host() -> io::Result<()> {
        let f = fixture()?;
        for (input, root) in [
            ("out/key", USER_DATA),
            ("up/key", USER_DATA),
            ("up", USER_DATA),
            ("dangling", USER_DATA),
            ("pub/research/SKILL.md", USER_DATA),
            ("/mnt/skills/custom/review/escape/key", SKILLS_CUSTOM),
        ] {
            let error = f.paths.resolve(input, Access::Read);
            let Err(error) = error else {
                panic!("{input} resolved: {error:?}");
            };
            assert!(
                matches!(&error, PathError::EscapingLink(_, r) if *r == root),
                "{input}: {error:?}"
            );
            let message = error.to_string();
            assert!(
                !message.contains(f.base.to_string_lossy().as_ref()),
                "{message}"
            );
        }
        Ok(())
    }

    #[test]
    fn host_paths_map_back_to_virtual_ones() -> io::Result<()> {
        let f = fixture()?;
        let host = f.base.join("root/skills/custom/review/SKILL.md");
        assert_eq!(
            f.paths.to_virtual(&host).as_deref(),
            Some("/mnt/skills/custom/review/SKILL.md")
        );
        assert_eq!(f.paths.to_virtual(&f.base.join("secret")), None);
        Ok(())
    }

    #[test]
    fn text_is_masked_and_commands_unmasked() -> io::Result<()> {
        let f = fixture()?;
        let host_workspace = f.base.join("root/user-data/workspace");
        let output = format!("ls: cannot access '{}/x'", host_workspace.display());
        assert_eq!(
            f.paths.mask(&output),
            "ls: cannot access '/mnt/user-data/workspace/x'"
        );
        let command = f
            .paths
            .unmask_command("cat /mnt/skills/public/a /mnt/user-data/b");
        assert_eq!(
            command,
            format!(
                "cat {}/a {}/b",
                f.base.join("root/skills/public").display(),
                f.base.join("root/user-data").display()
            )
        );
        assert_eq!(
            f.paths.mask(&command),
            "cat /mnt/skills/public/a /mnt/user-data/b"
        );
        Ok(())
    }

    #[test]
    fn identity_mapping_is_detected() -> io::Result<()> {
        assert!(SandboxPaths::new(&SandboxRoots::under(Path::new("/mnt")))?.is_identity());
        assert!(!fixture()?.paths.is_identity());
        Ok(())
    }

    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("mnt".to_owned()),
            Just("user-data".to_owned()),
            Just("workspace".to_owned()),
            Just("outputs".to_owned()),
            Just("skills".to_owned()),
            Just("public".to_owned()),
            Just("custom".to_owned()),
            Just("review".to_owned()),
            Just("..data".to_owned()),
            Just("..".to_owned()),
            Just(".".to_owned()),
            Just(String::new()),
            Just("out".to_owned()),
            Just("up".to_owned()),
            Just("pub".to_owned()),
            Just("inner".to_owned()),
            Just("dangling".to_owned()),
            Just("escape".to_owned()),
            Just("secret".to_owned()),
            Just("~".to_owned()),
            "[a-zA-Z0-9 ._\\\\-]{1,6}",
        ]
    }

    fn path_string() -> impl Strategy<Value = String> {
        prop_oneof![
            (any::<bool>(), prop::collection::vec(segment(), 0..8)).prop_map(
                |(absolute, segments)| {
                    let joined = segments.join("/");
                    if absolute {
                        format!("/{joined}")
                    } else {
                        joined
                    }
                }
            ),
            any::<String>(),
        ]
    }

    #[test]
    fn paths_below_outputs_are_split_and_the_rest_refused() {
        assert_eq!(
            below_outputs("/mnt/user-data/outputs/charts//q1.png"),
            Ok(vec!["charts".to_owned(), "q1.png".to_owned()])
        );
        assert_eq!(
            below_outputs(" /mnt/user-data/outputs/./a.md"),
            Ok(vec!["a.md".to_owned()])
        );
        for refused in [
            "",
            "a.md",
            "outputs/a.md",
            "/mnt/user-data/outputs",
            "/mnt/user-data/outputs/",
            "/mnt/user-data/workspace/a.md",
            "/mnt/user-data/outputs/../workspace/a.md",
            "/mnt/user-data/outputs/a/../../b",
            "/mnt/skills/public/x/SKILL.md",
            "/etc/passwd",
            "/mnt/user-data/outputs/a\0b",
        ] {
            assert!(below_outputs(refused).is_err(), "{refused:?}");
        }
    }

    proptest! {
        #[test]
        fn below_outputs_gives_plain_segments_only(input in path_string()) {
            if let Ok(segments) = below_outputs(&input) {
                prop_assert!(!segments.is_empty());
                for segment in &segments {
                    prop_assert!(!segment.is_empty() && segment != "." && segment != "..");
                    prop_assert!(!segment.contains('/') && !segment.contains('\0'));
                }
            }
        }

        #[test]
        fn nothing_resolves_outside_the_roots(input in path_string(), write in any::<bool>()) {
            let f = fixture().map_err(|e| TestCaseError::fail(e.to_string()))?;
            let access = if write { Access::Write } else { Access::Read };
            if let Ok(resolved) = f.paths.resolve(&input, access) {
                let real = real_path(&resolved.host)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let real_root = real_path(f.paths.host_root(resolved.root))
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert!(real.starts_with(&real_root), "{input} -> {}", real.display());
                prop_assert!(resolved.host.starts_with(f.paths.host_root(resolved.root)));
                prop_assert!(resolved.virtual_path.starts_with(resolved.root.virtual_prefix()));
                prop_assert!(!resolved.virtual_path.split('/').any(|s| s == ".."));
                if write {
                    prop_assert_eq!(resolved.root, Root::UserData);
                }
            }
        }

        #[test]
        fn virtual_host_virtual_round_trips(
            root in prop::sample::select(Root::ALL.to_vec()),
            segments in prop::collection::vec("[a-zA-Z0-9_]([a-zA-Z0-9 ._-]{0,6}[a-zA-Z0-9_])?", 0..5),
            relative in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
            let paths = SandboxPaths::new(&SandboxRoots::under(dir.path()))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mut expected = root.virtual_prefix().to_owned();
            for segment in &segments {
                expected.push('/');
                expected.push_str(segment);
            }
            let input = match expected.strip_prefix("/mnt/user-data/workspace/") {
                Some(rest) if relative => rest.to_owned(),
                _ => expected.clone(),
            };
            let resolved = paths.resolve(&input, Access::Read)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&resolved.virtual_path, &expected);
            prop_assert_eq!(paths.to_virtual(&resolved.host), Some(expected));
        }
    }
}
