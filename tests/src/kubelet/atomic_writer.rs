//! The kubelet's atomic-writer layout for ConfigMap, Secret, projected and downward-API
//! volumes: the files live in a timestamped folder `..<time>`, `..data` is a symlink to it,
//! and each top-level name is a symlink through `..data`. An update writes a new folder and
//! swaps `..data` with one `rename`, so a reader sees the old files or the new ones, never a
//! mix (`HERD_TOKEN_FILE` is read while the token is renewed).

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path};

use jiff::Timestamp;

/// The symlink to the current files.
const DATA: &str = "..data";
/// The new `..data` before it replaces the old one.
const DATA_TMP: &str = "..data_tmp";

/// One file of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Its path inside the volume (`items[].path`, or the key).
    pub path: String,
    /// Its content.
    pub data: Vec<u8>,
    /// Its mode (`defaultMode` or `items[].mode`).
    pub mode: u32,
}

/// The top-level names of `files`, after checking each path as the kubelet does: relative,
/// no `..` element, not starting with `..`, no file inside another and no path twice.
pub fn top_level_names(files: &[File]) -> Result<BTreeSet<String>, String> {
    let mut paths = BTreeSet::new();
    let mut names = BTreeSet::new();
    for file in files {
        let path = Path::new(&file.path);
        let normal = path.components().all(|c| matches!(c, Component::Normal(_)));
        if file.path.is_empty() || !normal || file.path.starts_with("..") || file.path.len() > 4096
        {
            return Err(format!("invalid path {:?} in the volume", file.path));
        }
        if !paths.insert(file.path.as_str()) {
            return Err(format!("path {:?} appears twice in the volume", file.path));
        }
        if let Some(Component::Normal(top)) = path.components().next() {
            names.insert(top.to_string_lossy().into_owned());
        }
    }
    for file in files {
        let mut ancestor = Path::new(&file.path).parent();
        while let Some(dir) = ancestor.filter(|d| !d.as_os_str().is_empty()) {
            if dir.to_str().is_some_and(|d| paths.contains(d)) {
                return Err(format!(
                    "{:?} is a file and the folder of {:?}",
                    dir.display(),
                    file.path
                ));
            }
            ancestor = dir.parent();
        }
    }
    Ok(names)
}

/// Writes `files` as the content of the volume folder `dir` (created if missing), replacing
/// what it held.
pub fn write(dir: &Path, files: &[File], now: Timestamp) -> io::Result<()> {
    let names = top_level_names(files).map_err(io::Error::other)?;
    std::fs::create_dir_all(dir)?;
    let old = std::fs::read_link(dir.join(DATA)).ok();
    let stamp = now.strftime("..%Y_%m_%d_%H_%M_%S.%N").to_string();
    let mut version = stamp.clone();
    let mut n = 0;
    while dir.join(&version).exists() {
        n += 1;
        version = format!("{stamp}{n}");
    }
    let folder = dir.join(&version);
    std::fs::create_dir(&folder)?;
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755))?;
    for file in files {
        let path = folder.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &file.data)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode & 0o7777))?;
    }
    let tmp = dir.join(DATA_TMP);
    match std::fs::remove_file(&tmp) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    symlink(&version, &tmp)?;
    std::fs::rename(&tmp, dir.join(DATA))?;
    for name in &names {
        let link = dir.join(name);
        if link.symlink_metadata().is_err() {
            symlink(Path::new(DATA).join(name), &link)?;
        }
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") || names.contains(&name) {
            continue;
        }
        if entry.file_type()?.is_symlink() {
            std::fs::remove_file(entry.path())?;
        }
    }
    if let Some(old) = old.filter(|old| old != Path::new(&version)) {
        let old = dir.join(old);
        if old.starts_with(dir) && old.is_dir() {
            std::fs::remove_dir_all(old)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, data: &str) -> File {
        File {
            path: path.to_owned(),
            data: data.as_bytes().to_vec(),
            mode: 0o644,
        }
    }

    #[test]
    fn paths_are_checked_as_the_kubelet_does() {
        let names = top_level_names(&[file("a", ""), file("b/c", ""), file("b/d/e", "")]).unwrap();
        assert_eq!(names, BTreeSet::from(["a".to_owned(), "b".to_owned()]));
        for bad in [
            vec![file("/abs", "")],
            vec![file("a/../b", "")],
            vec![file("..hidden", "")],
            vec![file("", "")],
            vec![file("a", ""), file("a", "")],
            vec![file("a", ""), file("a/b", "")],
        ] {
            assert!(top_level_names(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_layout_is_data_symlinks_and_an_update_swaps_them() {
        let dir = tempfile::tempdir().unwrap();
        let volume = dir.path().join("v");
        let t0 = Timestamp::from_second(1_700_000_000).unwrap();
        write(
            &volume,
            &[file("key", "one"), file("sub/inner", "deep")],
            t0,
        )
        .unwrap();
        let data = std::fs::read_link(volume.join("..data")).unwrap();
        assert!(
            data.to_string_lossy().starts_with("..2023_11_14_"),
            "{data:?}"
        );
        assert_eq!(
            std::fs::read_link(volume.join("key")).unwrap(),
            Path::new("..data/key")
        );
        assert_eq!(std::fs::read_to_string(volume.join("key")).unwrap(), "one");
        assert_eq!(
            std::fs::read_to_string(volume.join("sub/inner")).unwrap(),
            "deep"
        );

        let t1 = Timestamp::from_second(1_700_000_060).unwrap();
        write(&volume, &[file("key", "two"), file("new", "n")], t1).unwrap();
        assert_eq!(std::fs::read_to_string(volume.join("key")).unwrap(), "two");
        assert_eq!(std::fs::read_to_string(volume.join("new")).unwrap(), "n");
        assert!(volume.join("sub").symlink_metadata().is_err(), "gone");
        let mut entries: Vec<String> = std::fs::read_dir(&volume)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        assert_eq!(entries.len(), 4, "{entries:?}");
        assert_eq!(entries[0], "..2023_11_14_22_14_20.000000000");
        assert_eq!(&entries[1..], ["..data", "key", "new"]);
    }
}
