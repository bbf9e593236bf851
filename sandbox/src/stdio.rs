//! Stdio programs in the sandbox (MCP servers): started in the workspace with the same
//! cut-down environment as `bash` plus their own variables, in their own process group, and
//! reached through their standard input and output. Dropping the pipe kills the group.
//!
//! In-process (`--sandbox off`) the pipe is the child's own; through the socket (a pod's
//! `sandbox` container, the confined local sandbox) a connection is handed over to the child
//! after `SpawnStdio` (see `socket::server`).

use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context, Poll};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::host::SandboxHost;
use super::paths::{Access, WORKSPACE};
use super::protocol::StdioCommand;
use super::tools::bash::{environment, kill_group};

/// Most stderr lines of one program written to the sandbox's log.
const MAX_LOGGED_LINES: usize = 200;

/// A program could not be started; the message says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StdioError(pub String);

/// The standard output (`reader`) and input (`writer`) of a running program.
pub struct StdioPipe {
    pub reader: Pin<Box<dyn AsyncRead + Send>>,
    pub writer: Pin<Box<dyn AsyncWrite + Send>>,
    /// The handle of its standard error's tail (`SandboxRequest::StdioStderr`).
    pub stderr: u64,
}

impl std::fmt::Debug for StdioPipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioPipe").finish_non_exhaustive()
    }
}

/// A started program: its pipes, the handle of its standard error's tail, and the guard that
/// kills its process group when dropped.
pub(crate) struct SpawnedStdio {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: u64,
    pub guard: ProcessGuard,
}

/// Kills the program's whole process group when dropped.
pub(crate) struct ProcessGuard {
    child: Child,
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.start_kill();
    }
}

impl SpawnedStdio {
    /// The program as one pipe that owns it (in-process use).
    pub(crate) fn into_pipe(self) -> StdioPipe {
        StdioPipe {
            reader: Box::pin(Guarded {
                inner: self.stdout,
                _guard: self.guard,
            }),
            writer: Box::pin(self.stdin),
            stderr: self.stderr,
        }
    }
}

/// A reader that keeps the program alive as long as it is read.
struct Guarded<R> {
    inner: R,
    _guard: ProcessGuard,
}

impl<R: AsyncRead + Unpin> AsyncRead for Guarded<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl SandboxHost {
    /// Starts `command` in the workspace.
    pub(crate) fn spawn_stdio(&self, command: &StdioCommand) -> Result<SpawnedStdio, StdioError> {
        let Some((program, args)) = command.argv.split_first() else {
            return Err(StdioError("the command is empty".into()));
        };
        let workspace = self
            .paths()
            .resolve(WORKSPACE, Access::Write)
            .map_err(|refused| StdioError(refused.to_string()))?
            .host;
        std::fs::create_dir_all(&workspace)
            .map_err(|failure| StdioError(format!("cannot create {WORKSPACE}: {failure}")))?;
        let unmask = |text: &String| self.paths().unmask_command(text);
        let mut child = tokio::process::Command::new(unmask(program))
            .args(args.iter().map(unmask))
            .current_dir(&workspace)
            .env_clear()
            .envs(environment(self))
            .envs(command.env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|failure| StdioError(format!("cannot start {program}: {failure}")))?;
        self.process_groups().add(child.id());
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(StdioError(format!("cannot connect to {program}'s pipes")));
        };
        let label = command.label.clone();
        let (handle, tail) = self.stderr_tails().register();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            let mut logged = 0;
            while let Ok(Some(line)) = lines.next_line().await {
                if logged < MAX_LOGGED_LINES {
                    tracing::info!(server = %label, "stderr: {line}");
                    logged += 1;
                }
                tail.push(&line);
            }
        });
        Ok(SpawnedStdio {
            stdin,
            stdout,
            stderr: handle,
            guard: ProcessGuard { child },
        })
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::paths::SandboxRoots;

    fn command(argv: &[&str], env: &[(&str, &str)]) -> StdioCommand {
        StdioCommand {
            label: "test".into(),
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[tokio::test]
    async fn a_program_runs_in_the_workspace_with_its_env_and_no_secrets() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let host = SandboxHost::new(&SandboxRoots::under(dir.path()))?;
        let script = "read line; echo \"$line|$(basename \"$PWD\")|$GREETING\"; env | cut -d= -f1";
        let spawned =
            host.spawn_stdio(&command(&["bash", "-c", script], &[("GREETING", "hello")]))?;
        let mut pipe = spawned.into_pipe();
        pipe.writer.write_all(b"ping\n").await?;
        pipe.writer.flush().await?;
        let mut out = String::new();
        pipe.reader.read_to_string(&mut out).await?;
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("ping|workspace|hello"));
        // Only the allowlist, the program's own variables and what bash sets itself: none of
        // the runner's (model keys, tokens).
        let allowed = [
            "PATH",
            "LANG",
            "LC_ALL",
            "LC_CTYPE",
            "TZ",
            "TMPDIR",
            "HOME",
            "TERM",
            "PAGER",
            "GIT_PAGER",
            "GREETING",
            "PWD",
            "SHLVL",
            "_",
            "OLDPWD",
        ];
        let names: Vec<&str> = lines.collect();
        assert!(
            names.contains(&"GREETING") && names.contains(&"HOME"),
            "{names:?}"
        );
        assert!(names.iter().all(|n| allowed.contains(n)), "{names:?}");
        Ok(())
    }

    #[tokio::test]
    async fn what_a_program_writes_to_stderr_is_kept_under_its_handle() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let host = SandboxHost::new(&SandboxRoots::under(dir.path()))?;
        let script = "echo 'Error: no config' >&2; exit 1";
        let mut pipe = host
            .spawn_stdio(&command(&["bash", "-c", script], &[]))?
            .into_pipe();
        let mut out = String::new();
        pipe.reader.read_to_string(&mut out).await?;
        let lines = host
            .stderr_tails()
            .lines(pipe.stderr, std::time::Duration::from_secs(10))
            .await;
        assert_eq!(lines, vec!["Error: no config".to_owned()]);
        Ok(())
    }

    #[tokio::test]
    async fn a_missing_program_and_an_empty_command_are_explained() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let host = SandboxHost::new(&SandboxRoots::under(dir.path()))?;
        let missing = host
            .spawn_stdio(&command(&["no-such-mcp-server"], &[]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            missing.starts_with("cannot start no-such-mcp-server:"),
            "{missing}"
        );
        let empty = host.spawn_stdio(&command(&[], &[])).err();
        assert_eq!(empty, Some(StdioError("the command is empty".into())));
        Ok(())
    }
}
