//! What one container of a Pod sees, decided from the Pod alone: the host's system folders
//! read-only, a small `/dev`, the Pod's volumes at their `mountPath`s (with `subPath` and
//! `readOnly`), and its termination-message file.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use herd_sandbox::{Bind, ContainerRoot, Symlink, Tmpfs};
use k8s_openapi::api::core::v1::Container;

/// Host paths every container sees read-only at the same place (the "image"). `/proc` is
/// there for the init to mount its own over (see `init_container`).
const SYSTEM: [&str; 9] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc",
];

/// Device nodes bound from the host, as a runtime creates them.
const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Where a container's termination message goes unless it says otherwise.
pub const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// A volume made ready on the host for the Pod's containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeDir {
    /// The host folder (or file) holding it.
    pub path: PathBuf,
    /// Whether containers may write to it (ConfigMap, Secret, projected and downward-API
    /// volumes are always read-only, as the kubelet mounts them).
    pub writable: bool,
}

/// The host files of one container that its view needs.
#[derive(Debug, Clone)]
pub struct HostFiles<'a> {
    /// The empty folder the root is mounted on.
    pub staging: &'a Path,
    /// The file bound at `terminationMessagePath`.
    pub termination_log: &'a Path,
}

/// The view of `container`, its volumes taken from `volumes` (by name). Over 80 lines: every
/// mount's checks (volume, mountPath, subPath, subPathExpr, read-only) come one after another
/// as the kubelet makes them.
pub fn container_root(
    container: &Container,
    volumes: &BTreeMap<String, VolumeDir>,
    files: &HostFiles<'_>,
) -> Result<ContainerRoot, String> {
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let volume = volumes.get(&mount.name).ok_or_else(|| {
            format!(
                "volume {:?} of mount {:?} is not a volume of the Pod",
                mount.name, mount.mount_path
            )
        })?;
        let target = absolute(&mount.mount_path, "mountPath")?;
        let sub_path = mount.sub_path.as_deref().unwrap_or_default();
        let source = if sub_path.is_empty() {
            volume.path.clone()
        } else {
            volume.path.join(relative(sub_path, "subPath")?)
        };
        if mount
            .sub_path_expr
            .as_deref()
            .is_some_and(|e| !e.is_empty())
        {
            return Err(format!(
                "subPathExpr on mount {:?} is not supported by local-kubelet",
                mount.mount_path
            ));
        }
        mounts.push(Bind {
            source,
            target,
            writable: volume.writable && !mount.read_only.unwrap_or(false),
        });
    }
    // Parents first, so a mount inside another one lands on top of it.
    mounts.sort_by_key(|bind| bind.target.components().count());

    let mut binds: Vec<Bind> = DEVICES
        .iter()
        .map(|device| Bind {
            source: device.into(),
            target: device.into(),
            writable: true,
        })
        .collect();
    binds.extend(mounts);
    let message_path = container
        .termination_message_path
        .as_deref()
        .filter(|path| !path.is_empty())
        .unwrap_or(DEFAULT_TERMINATION_MESSAGE_PATH);
    binds.push(Bind {
        source: files.termination_log.to_path_buf(),
        target: absolute(message_path, "terminationMessagePath")?,
        writable: true,
    });

    let working_dir = container
        .working_dir
        .as_deref()
        .filter(|dir| !dir.is_empty())
        .map(|dir| absolute(dir, "workingDir"))
        .transpose()?
        .unwrap_or_else(|| "/".into());
    let read_only_root = container
        .security_context
        .as_ref()
        .and_then(|context| context.read_only_root_filesystem)
        .unwrap_or(false);
    Ok(ContainerRoot {
        staging: files.staging.to_path_buf(),
        system: SYSTEM.iter().map(PathBuf::from).collect(),
        tmpfs: vec![
            Tmpfs {
                path: "/dev".into(),
                writable: false,
            },
            Tmpfs {
                path: "/dev/shm".into(),
                writable: true,
            },
        ],
        binds,
        symlinks: [
            ("/dev/fd", "/proc/self/fd"),
            ("/dev/stdin", "/proc/self/fd/0"),
            ("/dev/stdout", "/proc/self/fd/1"),
            ("/dev/stderr", "/proc/self/fd/2"),
        ]
        .into_iter()
        .map(|(path, target)| Symlink {
            path: path.into(),
            target: target.into(),
        })
        .collect(),
        writable: !read_only_root,
        cwd: working_dir,
    })
}

/// An absolute path without `..` (the API server checks most of this; a path the view
/// cannot hold is refused here rather than joined somewhere unexpected).
fn absolute(path: &str, what: &str) -> Result<PathBuf, String> {
    let path = Path::new(path);
    let mut components = path.components();
    let fine = components.next() == Some(Component::RootDir)
        && components.all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if fine && path != Path::new("/") {
        Ok(path.components().collect())
    } else {
        Err(format!(
            "{what} {} must be absolute, below / and without `..`",
            path.display()
        ))
    }
}

/// A relative path that stays inside its volume.
fn relative(path: &str, what: &str) -> Result<PathBuf, String> {
    let path = Path::new(path);
    if path
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        Ok(path.to_path_buf())
    } else {
        Err(format!(
            "{what} {} must be relative and without `..`",
            path.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::test_support::container;
    use serde_json::json;

    fn volumes() -> BTreeMap<String, VolumeDir> {
        BTreeMap::from([
            (
                "tmp".to_owned(),
                VolumeDir {
                    path: "/k/v/tmp".into(),
                    writable: true,
                },
            ),
            (
                "config".to_owned(),
                VolumeDir {
                    path: "/k/v/config".into(),
                    writable: false,
                },
            ),
        ])
    }

    fn files() -> HostFiles<'static> {
        HostFiles {
            staging: Path::new("/k/c/root"),
            termination_log: Path::new("/k/c/termination-log"),
        }
    }

    #[test]
    fn volumes_land_at_their_mount_paths_parents_first_and_config_stays_read_only() {
        let c = container(json!({"name": "c", "volumeMounts": [
            {"name": "config", "mountPath": "/tmp/config"},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "tmp", "mountPath": "/data/ro", "readOnly": true, "subPath": "a/b"}
        ]}));
        let root = container_root(&c, &volumes(), &files()).unwrap();
        let mounts: Vec<(&str, &str, bool)> = root
            .binds
            .iter()
            .filter(|b| !b.target.starts_with("/dev"))
            .map(|b| {
                (
                    b.source.to_str().unwrap(),
                    b.target.to_str().unwrap(),
                    b.writable,
                )
            })
            .collect();
        assert_eq!(
            mounts,
            [
                ("/k/v/tmp", "/tmp", true),
                ("/k/v/config", "/tmp/config", false),
                ("/k/v/tmp/a/b", "/data/ro", false),
            ]
        );
        let last = root.binds.last().unwrap();
        assert_eq!(last.target, Path::new("/dev/termination-log"));
        assert_eq!(last.source, Path::new("/k/c/termination-log"));
        assert!(root.writable, "no readOnlyRootFilesystem");
        assert_eq!(root.cwd, Path::new("/"));
        assert!(root.system.contains(&PathBuf::from("/usr")));
        assert!(root.system.contains(&PathBuf::from("/proc")));
    }

    #[test]
    fn read_only_root_working_dir_and_message_path_come_from_the_container() {
        let c = container(json!({"name": "c", "workingDir": "/work",
            "terminationMessagePath": "/tmp/why",
            "securityContext": {"readOnlyRootFilesystem": true, "runAsUser": 65532}}));
        let root = container_root(&c, &volumes(), &files()).unwrap();
        assert!(!root.writable);
        assert_eq!(root.cwd, Path::new("/work"));
        assert_eq!(root.binds.last().unwrap().target, Path::new("/tmp/why"));
    }

    #[test]
    fn unknown_volumes_and_escaping_paths_are_refused() {
        let unknown = container(json!({"name": "c", "volumeMounts": [
            {"name": "nope", "mountPath": "/x"}]}));
        let error = container_root(&unknown, &volumes(), &files()).unwrap_err();
        assert!(error.contains("\"nope\""), "{error}");
        for (mount_path, sub_path) in [("/x/../etc", ""), ("relative", ""), ("/x", "../up")] {
            let c = container(json!({"name": "c", "volumeMounts": [
                {"name": "tmp", "mountPath": mount_path, "subPath": sub_path}]}));
            assert!(
                container_root(&c, &volumes(), &files()).is_err(),
                "{mount_path} {sub_path}"
            );
        }
        let c = container(json!({"name": "c", "workingDir": "/a/../b"}));
        assert!(container_root(&c, &volumes(), &files()).is_err());
    }
}
