//! The agent side of the seven sandbox tools (`bash`, `ls`, `read_file`, `write_file`,
//! `str_replace`, `glob`, `grep`): schemas for the model, argument validation, and forwarding
//! to wherever the sandbox runs through `ToolContext::executor`.

use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use herd_sandbox::tool_names as names;
use herd_sandbox::{
    BashArgs, GlobArgs, GrepArgs, LsArgs, ReadFileArgs, SandboxClient, StrReplaceArgs,
    WriteFileArgs,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Tool, ToolContext, ToolGroup, ToolOutput, parse_args, schema_for};
use crate::model::ToolSchema;

/// The seven sandbox tools, in the order their schemas are sent.
pub fn sandbox_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        SandboxTool::<BashArgs>::shared(
            names::BASH,
            ToolGroup::Bash,
            "Run a bash command in /mnt/user-data/workspace; returns stdout+stderr. No \
             interactive input.",
        ),
        SandboxTool::<LsArgs>::shared(
            names::LS,
            ToolGroup::FileRead,
            "List a directory, two levels deep.",
        ),
        SandboxTool::<ReadFileArgs>::shared(
            names::READ_FILE,
            ToolGroup::FileRead,
            "Read a text file, or a line range of it.",
        ),
        SandboxTool::<WriteFileArgs>::shared(
            names::WRITE_FILE,
            ToolGroup::FileWrite,
            "Write a text file, creating folders; long files in parts with append=true.",
        ),
        SandboxTool::<StrReplaceArgs>::shared(
            names::STR_REPLACE,
            ToolGroup::FileWrite,
            "Replace exact text in a file.",
        ),
        SandboxTool::<GlobArgs>::shared(
            names::GLOB,
            ToolGroup::FileRead,
            "Find paths matching a glob under a directory.",
        ),
        SandboxTool::<GrepArgs>::shared(names::GREP, ToolGroup::FileRead, "Search file contents."),
    ]
}

/// A tool whose work happens in the sandbox; `A` is its argument type.
struct SandboxTool<A> {
    name: &'static str,
    group: ToolGroup,
    schema: ToolSchema,
    args: PhantomData<fn() -> A>,
}

impl<A: JsonSchema + DeserializeOwned + Serialize + Send + 'static> SandboxTool<A> {
    fn shared(name: &'static str, group: ToolGroup, description: &str) -> Arc<dyn Tool> {
        let schema = schema_for::<A>(name, description);
        Arc::new(SandboxTool {
            name,
            group,
            schema,
            args: PhantomData::<fn() -> A>,
        })
    }
}

#[async_trait]
impl<A: JsonSchema + DeserializeOwned + Serialize + Send + 'static> Tool for SandboxTool<A> {
    fn name(&self) -> &str {
        self.name
    }

    fn group(&self) -> Option<ToolGroup> {
        Some(self.group)
    }

    fn schema(&self) -> ToolSchema {
        self.schema.clone()
    }

    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        // Validate here, so a malformed call costs no round trip, and send the parsed form
        // (defaults filled in, unknown fields gone).
        let args: A = match parse_args(self.name, arguments) {
            Ok(args) => args,
            Err(output) => return output,
        };
        let arguments = match serde_json::to_value(&args) {
            Ok(arguments) => arguments,
            Err(error) => return ToolOutput::error(format!("Error: {error}")),
        };
        ToolOutput::from_sandbox(self.name, ctx.executor.run_tool(self.name, arguments).await)
    }
}

#[cfg(test)]
mod tests {
    use herd_sandbox::testing::FakeExecutor;
    use herd_sandbox::{
        ExecutorError, InProcessExecutor, SandboxHost, SandboxRequest, SandboxResponse,
        SandboxRoots,
    };
    use serde_json::json;

    use super::*;
    use crate::thread::ToolStatus;
    use crate::tools::web::test_context::context;

    fn find(name: &str) -> anyhow::Result<Arc<dyn Tool>> {
        sandbox_tools()
            .into_iter()
            .find(|tool| tool.name() == name)
            .ok_or_else(|| anyhow::anyhow!("no tool {name}"))
    }

    #[test]
    fn names_groups_and_compact_schemas() -> anyhow::Result<()> {
        let tools = sandbox_tools();
        let groups: Vec<(&str, Option<ToolGroup>)> =
            tools.iter().map(|t| (t.name(), t.group())).collect();
        assert_eq!(
            groups,
            vec![
                ("bash", Some(ToolGroup::Bash)),
                ("ls", Some(ToolGroup::FileRead)),
                ("read_file", Some(ToolGroup::FileRead)),
                ("write_file", Some(ToolGroup::FileWrite)),
                ("str_replace", Some(ToolGroup::FileWrite)),
                ("glob", Some(ToolGroup::FileRead)),
                ("grep", Some(ToolGroup::FileRead)),
            ]
        );
        let schemas: Vec<ToolSchema> = tools.iter().map(|t| t.schema()).collect();
        let rendered: Vec<serde_json::Value> = schemas
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "parameters": s.parameters}))
            .collect();
        insta::assert_json_snapshot!("sandbox_tool_schemas", rendered);
        let bpe = tiktoken_rs::o200k_base()?;
        for (schema, value) in schemas.iter().zip(&rendered) {
            let required = &schema.parameters["required"];
            assert_eq!(
                required[0], "description",
                "{}: description comes first",
                schema.name
            );
            // Compact JSON over-counts what providers render, so this bound is conservative.
            let tokens = bpe.encode_ordinary(&value.to_string()).len();
            assert!(tokens <= 120, "{} schema is {tokens} tokens", schema.name);
        }
        Ok(())
    }

    #[tokio::test]
    async fn calls_run_in_the_sandbox_with_meta_and_status() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let sandbox = SandboxHost::new(&SandboxRoots::under(dir.path()))?;
        let ctx = ToolContext {
            executor: Arc::new(InProcessExecutor(Arc::new(sandbox))),
            ..context()
        };
        let written = find("write_file")?
            .call(
                json!({"description": "d", "path": "a.txt", "content": "hello"}),
                &ctx,
            )
            .await;
        assert_eq!(written.status, ToolStatus::Success);
        assert_eq!(
            written.content,
            "OK: wrote 5 bytes to /mnt/user-data/workspace/a.txt"
        );
        let read = find("read_file")?
            .call(json!({"description": "d", "path": "a.txt"}), &ctx)
            .await;
        assert_eq!(read.content, "hello");
        assert_eq!(read.meta.get("sha256"), written.meta.get("sha256"));
        assert!(read.meta.contains_key("sha256"));
        let missing = find("read_file")?
            .call(json!({"description": "d", "path": "nope.txt"}), &ctx)
            .await;
        assert_eq!(missing.status, ToolStatus::Error);
        Ok(())
    }

    /// A context whose executor records requests and answers each with `answer`.
    fn recording(answer: Result<SandboxResponse, String>) -> (Arc<FakeExecutor>, ToolContext) {
        let executor = Arc::new(FakeExecutor::new(move |_| {
            answer.clone().map_err(ExecutorError)
        }));
        let ctx = ToolContext {
            executor: executor.clone(),
            ..context()
        };
        (executor, ctx)
    }

    #[tokio::test]
    async fn bad_arguments_never_reach_the_sandbox() -> anyhow::Result<()> {
        let (executor, ctx) = recording(Ok(SandboxResponse::Done { path: None }));
        let output = find("grep")?
            .call(json!({"description": "d", "path": "."}), &ctx)
            .await;
        assert_eq!(output.status, ToolStatus::Error);
        assert!(
            output
                .content
                .starts_with("Error: invalid arguments for grep")
        );
        assert!(executor.requests().is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn arguments_are_forwarded_with_defaults_filled_in() -> anyhow::Result<()> {
        let (executor, ctx) = recording(Ok(SandboxResponse::ToolResult {
            content: "ok".into(),
            is_error: false,
            meta: serde_json::Map::new(),
        }));
        let output = find("glob")?
            .call(json!({"description": "d", "pattern": "*.py", "path": "/mnt/user-data", "extra": 1}), &ctx)
            .await;
        assert_eq!(output.content, "ok");
        assert_eq!(
            executor.requests(),
            [SandboxRequest::Tool {
                name: "glob".into(),
                arguments: json!({"description": "d", "pattern": "*.py", "path": "/mnt/user-data", "include_dirs": false}),
            }]
        );
        Ok(())
    }

    #[tokio::test]
    async fn executor_failures_and_odd_answers_become_error_results() -> anyhow::Result<()> {
        let args = json!({"description": "d", "command": "ls"});
        let (_, ctx) = recording(Err("socket gone".into()));
        let output = find("bash")?.call(args.clone(), &ctx).await;
        assert_eq!(output.status, ToolStatus::Error);
        assert!(output.content.contains("sandbox unavailable: socket gone"));
        let (_, ctx) = recording(Ok(SandboxResponse::Error {
            message: "Error: refused".into(),
        }));
        assert_eq!(
            find("bash")?.call(args.clone(), &ctx).await.content,
            "Error: refused"
        );
        let (_, ctx) = recording(Ok(SandboxResponse::Done { path: None }));
        let odd = find("bash")?.call(args, &ctx).await;
        assert_eq!(odd.status, ToolStatus::Error);
        assert!(odd.content.contains("unexpected answer"));
        Ok(())
    }
}
