//! `write_file`: creates or overwrites a file (at most 80 KB at once) or appends to it,
//! creating parent folders. Large files are written in parts with `append`, which keeps any
//! single tool call (and the model's output) small.

use std::io::Write;

use super::ToolReply;
use crate::args::WriteFileArgs;
use crate::io_error::io_error;
use crate::paths::{Access, SandboxPaths};

/// DeerFlow's `DEERFLOW_WRITE_FILE_MAX_BYTES` for non-append writes.
pub(crate) const MAX_WRITE_BYTES: usize = 81_920;

/// Writes `args.content` to `args.path`.
pub(crate) fn run(paths: &SandboxPaths, args: &WriteFileArgs) -> ToolReply {
    let resolved = match paths.resolve(&args.path, Access::Write) {
        Ok(resolved) => resolved,
        Err(refused) => return ToolReply::error(format!("Error: {refused}")),
    };
    let virtual_path = &resolved.virtual_path;
    let size = args.content.len();
    if !args.append && size > MAX_WRITE_BYTES {
        return ToolReply::error(format!(
            "Error: content is {size} bytes; write_file takes at most {MAX_WRITE_BYTES} bytes \
             at once. Write the file in parts: the first with append=false, the rest with \
             append=true."
        ));
    }
    if std::fs::metadata(&resolved.host).is_ok_and(|m| m.is_dir()) {
        return ToolReply::error(format!("Error: {virtual_path} is a directory"));
    }
    if let Some(parent) = resolved.host.parent()
        && let Err(failure) = std::fs::create_dir_all(parent)
    {
        return ToolReply::error(io_error(virtual_path, &failure));
    }
    let written = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(args.append)
        .truncate(!args.append)
        .open(&resolved.host)
        .and_then(|mut file| file.write_all(args.content.as_bytes()));
    if let Err(failure) = written {
        return ToolReply::error(io_error(virtual_path, &failure));
    }
    let verb = if args.append { "appended" } else { "wrote" };
    let reply = ToolReply::ok(format!("OK: {verb} {size} bytes to {virtual_path}"));
    match std::fs::read(&resolved.host) {
        Ok(bytes) => reply.with_sha256(&bytes),
        Err(_) => reply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::SandboxRoots;
    use crate::tools::workspace_with;

    fn write(paths: &SandboxPaths, path: &str, content: &str, append: bool) -> ToolReply {
        run(
            paths,
            &WriteFileArgs {
                description: String::new(),
                path: path.into(),
                content: content.into(),
                append,
            },
        )
    }

    #[test]
    fn writes_appends_and_creates_folders() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let roots = SandboxRoots::under(dir.path());
        let paths = SandboxPaths::new(&roots)?;
        let reply = write(&paths, "/mnt/user-data/outputs/r/a.md", "one\n", false);
        assert_eq!(
            reply.content,
            "OK: wrote 4 bytes to /mnt/user-data/outputs/r/a.md"
        );
        write(&paths, "/mnt/user-data/outputs/r/a.md", "two\n", true);
        let host = roots.user_data.join("outputs/r/a.md");
        assert_eq!(std::fs::read_to_string(&host)?, "one\ntwo\n");
        write(&paths, "/mnt/user-data/outputs/r/a.md", "new", false);
        assert_eq!(std::fs::read_to_string(&host)?, "new");
        Ok(())
    }

    #[test]
    fn refuses_large_writes_skills_and_directories() -> std::io::Result<()> {
        let (_dir, paths) = workspace_with(&[("d/", "")])?;
        let big = "x".repeat(MAX_WRITE_BYTES + 1);
        let reply = write(&paths, "big.txt", &big, false);
        assert!(reply.is_error);
        assert!(reply.content.contains("append=true"));
        assert!(!write(&paths, "big.txt", &big, true).is_error);
        assert_eq!(
            write(&paths, "/mnt/skills/public/x/SKILL.md", "x", false).content,
            "Error: /mnt/skills/public/x/SKILL.md is read-only"
        );
        assert!(
            write(&paths, "d", "x", false)
                .content
                .contains("is a directory")
        );
        Ok(())
    }
}
