//! `present_files`: hands files in `outputs/` to the user as the run's deliverables.

use async_trait::async_trait;
use herd_sandbox::SandboxClient;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolContext, ToolOutput, TypedTool};

/// Where deliverables live.
pub const OUTPUTS: &str = "/mnt/user-data/outputs/";
/// Externalized tool results live here; they are never deliverables.
pub const TOOL_RESULTS: &str = "/mnt/user-data/outputs/.tool-results/";

/// Arguments of `present_files`.
#[derive(Deserialize, JsonSchema)]
pub struct PresentFilesArgs {
    /// Paths under /mnt/user-data/outputs.
    pub filepaths: Vec<String>,
}

/// The `present_files` tool.
pub struct PresentFiles;

/// Checks that a path names a presentable file and returns it in canonical form.
pub fn presentable_path(path: &str) -> Result<String, String> {
    let path = path.trim();
    if !path.starts_with(OUTPUTS) {
        return Err(format!("'{path}' is not under {OUTPUTS}"));
    }
    if path.split('/').any(|segment| segment == "..") {
        return Err(format!("'{path}' contains '..'"));
    }
    if path.starts_with(TOOL_RESULTS) {
        return Err(format!(
            "'{path}' is an internal tool result, not a deliverable"
        ));
    }
    let canonical = path
        .split('/')
        .filter(|segment| !segment.is_empty() && *segment != ".")
        .collect::<Vec<_>>()
        .join("/");
    Ok(format!("/{canonical}"))
}

#[async_trait]
impl TypedTool for PresentFiles {
    const NAME: &'static str = "present_files";
    const DESCRIPTION: &'static str =
        "Show finished files from /mnt/user-data/outputs to the user.";
    type Args = PresentFilesArgs;

    async fn run(&self, args: PresentFilesArgs, ctx: &ToolContext) -> ToolOutput {
        if args.filepaths.is_empty() {
            return ToolOutput::error("Error: filepaths is empty.");
        }
        let mut presented = Vec::new();
        let mut problems = Vec::new();
        for path in &args.filepaths {
            let path = match presentable_path(path) {
                Ok(path) => path,
                Err(problem) => {
                    problems.push(problem);
                    continue;
                }
            };
            match ctx.executor.file_info(&path).await {
                Ok(info) if info.exists => presented.push(path),
                Ok(_) => problems.push(format!("'{path}' does not exist")),
                Err(error) => problems.push(error.to_string()),
            }
        }
        if !problems.is_empty() {
            return ToolOutput::error(format!(
                "Error: nothing was presented: {}.",
                problems.join("; ")
            ));
        }
        let mut output = ToolOutput::ok(format!(
            "Successfully presented {} file(s): {}",
            presented.len(),
            presented.join(", ")
        ));
        output.effect.artifacts = presented;
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_outputs_are_presentable() {
        assert_eq!(
            presentable_path("/mnt/user-data/outputs//report.md").unwrap(),
            "/mnt/user-data/outputs/report.md"
        );
        assert!(presentable_path("/mnt/user-data/workspace/a.md").is_err());
        assert!(presentable_path("/mnt/user-data/outputs/../workspace/a").is_err());
        assert!(presentable_path("/mnt/user-data/outputs/.tool-results/x.txt").is_err());
        assert!(presentable_path("report.md").is_err());
    }
}
