//! Whether confinement works on this machine, found out by doing it: a child runs the whole
//! setup over two scratch folders, then checks that it can write where it should and cannot
//! where it should not.

use std::io;
use std::path::Path;
use std::process::Stdio;

use super::mounts::with_path;
use super::{ConfineError, Confinement};

/// Runs the whole confinement `view` describes over two scratch folders (`user-data`,
/// `skills`) in a child of `exe` (a `herd-runner` binary); the error says why it does not
/// work here.
pub(crate) fn probe(
    exe: &Path,
    view: impl FnOnce(&Path, &Path) -> Confinement,
) -> Result<(), String> {
    let scratch =
        tempfile::tempdir().map_err(|error| format!("cannot create a scratch folder: {error}"))?;
    let user_data = scratch.path().join("user-data");
    let skills = scratch.path().join("skills");
    for folder in [&user_data, &skills] {
        std::fs::create_dir_all(folder)
            .map_err(|error| format!("cannot create a scratch folder: {error}"))?;
    }
    let mut spec = view(&user_data, &skills);
    spec.probe = true;
    let output = spec
        .command(exe)
        .map_err(|error| error.to_string())?
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|error| format!("cannot start {}: {error}", exe.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let reason = stderr
        .trim()
        .strip_prefix("error: cannot confine the sandbox: ")
        .unwrap_or(stderr.trim());
    Err(if reason.is_empty() {
        format!("the probe exited with {}", output.status)
    } else {
        reason.to_owned()
    })
}

/// Inside a confined probe: writes work where allowed and fail elsewhere.
pub(super) fn check(spec: &Confinement) -> Result<(), ConfineError> {
    let name = format!(".herd-probe-{}", std::process::id());
    for path in spec.writable_paths() {
        let file = path.join(&name);
        std::fs::write(&file, "probe")
            .and_then(|()| std::fs::remove_file(&file))
            .map_err(|error| ConfineError::new("writing where allowed", with_path(error, &file)))?;
    }
    let read_only = spec
        .binds
        .iter()
        .filter(|bind| !bind.writable)
        .map(|bind| bind.target.as_path())
        .chain([Path::new("/")]);
    for path in read_only {
        let file = path.join(&name);
        if std::fs::write(&file, "probe").is_ok() {
            let _ = std::fs::remove_file(&file);
            return Err(ConfineError::new(
                "checking",
                io::Error::other(format!("{} is still writable", path.display())),
            ));
        }
    }
    Ok(())
}
