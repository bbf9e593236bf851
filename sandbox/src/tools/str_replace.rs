//! `str_replace`: replaces an exact piece of a text file, which must occur exactly once unless
//! `replace_all` is set, so an edit never lands somewhere the model did not mean.

use super::ToolReply;
use crate::args::StrReplaceArgs;
use crate::io_error::io_error;
use crate::paths::{Access, SandboxPaths};

/// Replaces `args.old_str` with `args.new_str` in `args.path`.
pub(crate) fn run(paths: &SandboxPaths, args: &StrReplaceArgs) -> ToolReply {
    let resolved = match paths.resolve(&args.path, Access::Write) {
        Ok(resolved) => resolved,
        Err(refused) => return ToolReply::error(format!("Error: {refused}")),
    };
    let virtual_path = &resolved.virtual_path;
    if args.old_str.is_empty() {
        return ToolReply::error(
            "Error: old_str is empty; give the exact text to replace (use write_file to \
             create a file)",
        );
    }
    let bytes = match std::fs::read(&resolved.host) {
        Ok(bytes) => bytes,
        Err(failure) => return ToolReply::error(io_error(virtual_path, &failure)),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return ToolReply::error(format!(
            "Error: {virtual_path} is not a UTF-8 text file; edit it with bash"
        ));
    };
    let count = text.matches(&args.old_str).count();
    if count == 0 {
        return ToolReply::error(format!(
            "Error: old_str was not found in {virtual_path}. Read the file again and copy the \
             text exactly, whitespace and indentation included."
        ));
    }
    if count > 1 && !args.replace_all {
        return ToolReply::error(format!(
            "Error: old_str occurs {count} times in {virtual_path}; include more surrounding \
             lines to make it unique, or set replace_all=true"
        ));
    }
    let updated = text.replace(&args.old_str, &args.new_str);
    if let Err(failure) = std::fs::write(&resolved.host, &updated) {
        return ToolReply::error(io_error(virtual_path, &failure));
    }
    let noun = if count == 1 {
        "occurrence"
    } else {
        "occurrences"
    };
    ToolReply::ok(format!("OK: replaced {count} {noun} in {virtual_path}"))
        .with_sha256(updated.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::SandboxRoots;

    fn setup(
        content: &str,
    ) -> std::io::Result<(tempfile::TempDir, SandboxPaths, std::path::PathBuf)> {
        let dir = tempfile::tempdir()?;
        let roots = SandboxRoots::under(dir.path());
        std::fs::create_dir_all(roots.user_data.join("workspace"))?;
        let host = roots.user_data.join("workspace/f.py");
        std::fs::write(&host, content)?;
        let paths = SandboxPaths::new(&roots)?;
        Ok((dir, paths, host))
    }

    fn replace(paths: &SandboxPaths, old: &str, new: &str, all: bool) -> ToolReply {
        run(
            paths,
            &StrReplaceArgs {
                description: String::new(),
                path: "f.py".into(),
                old_str: old.into(),
                new_str: new.into(),
                replace_all: all,
            },
        )
    }

    #[test]
    fn replaces_a_unique_match() -> std::io::Result<()> {
        let (_dir, paths, host) = setup("a = 1\nb = 2\n")?;
        let reply = replace(&paths, "b = 2", "b = 3", false);
        assert_eq!(
            reply.content,
            "OK: replaced 1 occurrence in /mnt/user-data/workspace/f.py"
        );
        assert!(reply.meta.contains_key("sha256"));
        assert_eq!(std::fs::read_to_string(host)?, "a = 1\nb = 3\n");
        Ok(())
    }

    #[test]
    fn missing_and_ambiguous_matches_are_errors_that_change_nothing() -> std::io::Result<()> {
        let (_dir, paths, host) = setup("x\nx\n")?;
        let missing = replace(&paths, "y", "z", false);
        assert!(missing.is_error);
        assert!(missing.content.contains("was not found"));
        let ambiguous = replace(&paths, "x", "z", false);
        assert!(ambiguous.is_error);
        assert!(ambiguous.content.contains("occurs 2 times"));
        assert_eq!(std::fs::read_to_string(&host)?, "x\nx\n");
        assert!(replace(&paths, "", "z", false).is_error);
        let all = replace(&paths, "x", "z", true);
        assert_eq!(
            all.content,
            "OK: replaced 2 occurrences in /mnt/user-data/workspace/f.py"
        );
        assert_eq!(std::fs::read_to_string(&host)?, "z\nz\n");
        Ok(())
    }
}
