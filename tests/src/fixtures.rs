//! Files the tests read from the repository: examples and fixtures.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

/// The repository root (this crate's parent folder).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Parses one YAML document into JSON.
pub fn yaml(text: &str) -> anyhow::Result<Value> {
    Ok(serde_saphyr::from_str(text)?)
}

/// Reads and parses a YAML file.
pub fn read_yaml(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    yaml(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Reads a YAML file of one or more documents (`---`-separated) into JSON, in order.
pub fn read_yaml_documents(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_multiple(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The `# expect: <message>` comment of a fixture.
pub fn expected_message(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.trim().strip_prefix("# expect:"))
        .map(|m| m.trim().to_owned())
}

/// Every `.yaml` file directly in `dir`, sorted.
pub fn yaml_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Every folder directly in `dir`, sorted.
pub fn subdirectories(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let path = entry?.path();
        if path.is_dir() {
            dirs.push(path);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// The fenced code blocks of `markdown` tagged `lang` (```` ```lang ````), in order.
pub fn fenced_blocks(markdown: &str, lang: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match current.as_mut() {
            None if line.trim_end() == format!("```{lang}") => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_expect_comments() {
        assert_eq!(
            expected_message("# a\n  # expect:  must be x \nkind: Run\n").as_deref(),
            Some("must be x")
        );
        assert_eq!(expected_message("kind: Run\n"), None);
    }

    #[test]
    fn fenced_blocks_of_one_language() {
        let markdown = "a\n```sh\nls\n```\n```lua\nx = 1\n\ny = 2\n```\n```lua\n```\n";
        assert_eq!(fenced_blocks(markdown, "lua"), ["x = 1\n\ny = 2\n", ""]);
        assert_eq!(fenced_blocks(markdown, "sh"), ["ls\n"]);
        assert!(fenced_blocks("```lua\nunclosed\n", "lua").is_empty());
    }

    #[test]
    fn finds_the_examples() {
        let files = yaml_files(&repo_root().join("examples/invalid")).unwrap();
        assert!(!files.is_empty());
        assert!(files.windows(2).all(|w| w[0] < w[1]));
        let dirs = subdirectories(&repo_root().join("tests/fixtures/transitions")).unwrap();
        assert!(dirs.iter().all(|d| d.join("patch.yaml").is_file()));
    }
}
