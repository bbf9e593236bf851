//! The unix socket between a pod's `agent` and `sandbox` containers: newline-delimited JSON
//! requests with ids, answered concurrently and in any order.

mod client;
mod server;
pub(crate) mod wire;

pub use client::{SocketOptions, UnixSocketExecutor};
pub use server::bind_listener;
pub(crate) use server::{serve, serve_listener, serve_stdin};

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    use super::client::SocketOptions;
    use super::server::SandboxServer;
    use super::*;
    use crate::executor::ToolExecutor;
    use crate::host::SandboxHost;
    use crate::in_process::InProcessExecutor;
    use crate::paths::SandboxRoots;
    use crate::protocol::{
        InputCopy, PROTOCOL_VERSION, RUNNER_VERSION, SandboxRequest, SandboxResponse, StdioCommand,
    };
    use crate::testing::{fake_sandbox, hello};

    type TestResult = anyhow::Result<()>;

    /// A sandbox over a fresh work dir holding the same files every time.
    fn sandbox(base: &Path) -> anyhow::Result<SandboxHost> {
        let roots = SandboxRoots::under(base);
        std::fs::create_dir_all(roots.skills_public.join("research"))?;
        std::fs::write(
            roots.skills_public.join("research/SKILL.md"),
            "---\nname: research\n---\n",
        )?;
        std::fs::create_dir_all(roots.user_data.join("uploads"))?;
        std::fs::write(roots.user_data.join("uploads/data.csv"), "a,b\n1,2\n")?;
        let home = base.join("home");
        std::fs::create_dir_all(&home)?;
        std::fs::create_dir_all(base.join("inputs/0"))?;
        std::fs::write(base.join("inputs/0/notes.txt"), "input notes\n")?;
        Ok(SandboxHost::new(&roots)?
            .with_home(home)
            .with_inputs(base.join("inputs")))
    }

    fn tool(name: &str, arguments: serde_json::Value) -> SandboxRequest {
        SandboxRequest::Tool {
            name: name.to_owned(),
            arguments,
        }
    }

    fn options() -> SocketOptions {
        SocketOptions {
            connect_wait: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            ..SocketOptions::default()
        }
    }

    /// Waits (at most 10 s) until nothing accepts on `socket`: an aborted server's listener
    /// can live on for a moment in a process another test is forking (its descriptors are
    /// closed at exec), and a restart would then take the socket for live.
    async fn until_stale(socket: &Path) {
        for _ in 0..500 {
            if tokio::net::UnixStream::connect(socket).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{} still accepts connections", socket.display());
    }

    async fn start(
        socket: &Path,
        sandbox: SandboxHost,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let server = SandboxServer::bind(socket, sandbox).await?;
        Ok(tokio::spawn(async move {
            let _ = server.run().await;
        }))
    }

    /// Stops a server task and waits until it is gone, so its socket reads as stale, not live.
    async fn stop(server: tokio::task::JoinHandle<()>) {
        server.abort();
        let _ = server.await;
    }

    /// A server over [`sandbox`] in a fresh temporary dir, listening on `<dir>/s.sock`.
    struct Served {
        dir: tempfile::TempDir,
        socket: PathBuf,
        server: tokio::task::JoinHandle<()>,
    }

    impl Served {
        async fn start() -> anyhow::Result<Served> {
            let dir = tempfile::tempdir()?;
            let socket = dir.path().join("s.sock");
            let server = start(&socket, sandbox(dir.path())?).await?;
            Ok(Served {
                dir,
                socket,
                server,
            })
        }

        /// A client of the server, with the tests' [`options`].
        async fn connect(&self) -> anyhow::Result<UnixSocketExecutor> {
            Ok(UnixSocketExecutor::connect_with(&self.socket, options()).await?)
        }
    }

    /// A stdio program `label` running `script` with bash.
    fn bash_program(label: &str, script: &str) -> StdioCommand {
        StdioCommand {
            label: label.into(),
            argv: vec!["bash".into(), "-c".into(), script.into()],
            env: vec![],
        }
    }

    // Over 80 lines: every request kind, sent to the socket and to an in-process sandbox
    // side by side, so the answers of all kinds are compared in one place.
    #[tokio::test]
    async fn every_request_kind_answers_as_in_process() -> TestResult {
        let dir = tempfile::tempdir()?;
        let served = sandbox(&dir.path().join("served"))?;
        let local = InProcessExecutor(Arc::new(sandbox(&dir.path().join("local"))?));
        let socket = dir.path().join("run/sandbox.sock");
        let server = start(&socket, served).await?;
        let remote = UnixSocketExecutor::connect_with(&socket, options()).await?;

        let d = "test";
        let requests = vec![
            SandboxRequest::Hello {
                protocol: PROTOCOL_VERSION,
                runner: RUNNER_VERSION.to_owned(),
            },
            SandboxRequest::Prepare,
            tool(
                "bash",
                json!({"description": d, "command": "pwd; echo hi >&2; exit 2"}),
            ),
            tool(
                "write_file",
                json!({"description": d, "path": "notes/a.md", "content": "one\ntwo\n"}),
            ),
            tool(
                "write_file",
                json!({"description": d, "path": "notes/a.md", "content": "three\n", "append": true}),
            ),
            tool(
                "read_file",
                json!({"description": d, "path": "notes/a.md", "start_line": 2}),
            ),
            tool(
                "str_replace",
                json!({"description": d, "path": "notes/a.md", "old_str": "two", "new_str": "2"}),
            ),
            tool("ls", json!({"description": d, "path": "/mnt/user-data"})),
            tool(
                "glob",
                json!({"description": d, "pattern": "**/*.md", "path": "/mnt/user-data"}),
            ),
            tool(
                "grep",
                json!({"description": d, "pattern": "THREE", "path": "/mnt/user-data/workspace"}),
            ),
            tool(
                "read_file",
                json!({"description": d, "path": "/etc/passwd"}),
            ),
            tool("ls", json!({"path": 1})),
            tool("rm_rf", json!({})),
            SandboxRequest::ListSkills,
            SandboxRequest::ListUploads,
            SandboxRequest::InstallInputs {
                inputs: vec![InputCopy {
                    index: 0,
                    path: Some("reports".into()),
                }],
            },
            SandboxRequest::ReadFile {
                path: "/mnt/user-data/uploads/reports/notes.txt".into(),
                max_bytes: 100,
            },
            SandboxRequest::ReadFile {
                path: "/mnt/user-data/uploads/data.csv".into(),
                max_bytes: 100,
            },
            SandboxRequest::ReadFile {
                path: "/mnt/user-data/uploads/data.csv".into(),
                max_bytes: 2,
            },
            SandboxRequest::FileInfo {
                path: "notes/a.md".into(),
            },
            SandboxRequest::FileInfo {
                path: "nope".into(),
            },
            SandboxRequest::WriteOutput {
                path: "results/r.txt".into(),
                content: "r".into(),
            },
            SandboxRequest::WriteOutput {
                path: "/mnt/skills/public/x".into(),
                content: "r".into(),
            },
            SandboxRequest::WriteOutputBytes {
                path: "child-1/chart.png".into(),
                data_base64: "iVBORwA=".into(),
            },
            SandboxRequest::WriteOutputBytes {
                path: "/mnt/user-data/workspace/x".into(),
                data_base64: "iVBORwA=".into(),
            },
        ];
        for request in requests {
            let over_socket = remote.execute(request.clone()).await?;
            let in_process = local.execute(request.clone()).await?;
            assert_eq!(over_socket, in_process, "{request:?}");
        }
        // Spot checks that the comparison compared something real.
        let bash = remote
            .execute(tool("bash", json!({"description": d, "command": "pwd"})))
            .await?;
        assert_eq!(
            bash,
            SandboxResponse::ToolResult {
                content: "/mnt/user-data/workspace\n".into(),
                is_error: false,
                meta: serde_json::Map::new()
            }
        );
        let SandboxResponse::Skills { skills } = remote.execute(SandboxRequest::ListSkills).await?
        else {
            anyhow::bail!("not a skills answer");
        };
        assert_eq!(skills.len(), 1);
        let copied = remote
            .execute(SandboxRequest::FileInfo {
                path: "/mnt/user-data/uploads/reports/notes.txt".into(),
            })
            .await?;
        assert!(
            matches!(
                copied,
                SandboxResponse::FileInfo {
                    exists: true,
                    size: 12,
                    ..
                }
            ),
            "{copied:?}"
        );
        stop(server).await;
        Ok(())
    }

    #[tokio::test]
    async fn many_requests_are_in_flight_at_once_over_one_or_several_connections() -> TestResult {
        let served = Served::start().await?;
        let first = Arc::new(served.connect().await?);
        let second = Arc::new(served.connect().await?);
        let mut calls = tokio::task::JoinSet::new();
        for n in 0..24u32 {
            let executor = if n % 2 == 0 {
                first.clone()
            } else {
                second.clone()
            };
            calls.spawn(async move {
                // Later calls finish first, so answers come back out of order.
                let command = format!("sleep 0.{}; echo {n}", 24 - n);
                let response = executor
                    .execute(tool(
                        "bash",
                        json!({"description": "n", "command": command}),
                    ))
                    .await;
                (n, response)
            });
        }
        while let Some(joined) = calls.join_next().await {
            let (n, response) = joined?;
            let SandboxResponse::ToolResult { content, .. } = response? else {
                anyhow::bail!("not a tool result");
            };
            assert_eq!(content, format!("{n}\n"));
        }
        stop(served.server).await;
        Ok(())
    }

    #[tokio::test]
    async fn the_client_reconnects_after_the_server_restarts() -> TestResult {
        let served = Served::start().await?;
        let executor = served.connect().await?;
        assert!(matches!(
            executor.execute(SandboxRequest::Prepare).await?,
            SandboxResponse::Done { .. }
        ));
        stop(served.server).await;
        until_stale(&served.socket).await;
        // The old socket file is left behind, as after a crash; the new server replaces it.
        let restarted = start(&served.socket, sandbox(served.dir.path())?).await?;
        let response = executor.execute(SandboxRequest::ListUploads).await?;
        assert!(matches!(response, SandboxResponse::Uploads { files } if files.len() == 1));
        stop(restarted).await;
        Ok(())
    }

    #[tokio::test]
    async fn oversized_and_malformed_requests_get_clear_errors_and_the_connection_survives()
    -> TestResult {
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("s.sock");
        let server = SandboxServer::bind(&socket, sandbox(dir.path())?)
            .await?
            .with_max_request_bytes(1024);
        let task = tokio::spawn(async move {
            let _ = server.run().await;
        });
        let stream = tokio::net::UnixStream::connect(&socket).await?;
        let (read_half, mut write_half) = stream.into_split();
        let mut lines = BufReader::new(read_half).lines();
        let big = format!(
            "{{\"id\":41,\"request\":{{\"op\":\"write_output\",\"path\":\"x\",\"content\":\"{}\"}}}}\n",
            "x".repeat(4096)
        );
        write_half.write_all(big.as_bytes()).await?;
        write_half
            .write_all(b"{\"id\":42,\"request\":{\"op\":\"nonsense\"}}\n")
            .await?;
        write_half
            .write_all(b"{\"id\":43,\"request\":{\"op\":\"list_uploads\"}}\n")
            .await?;
        let mut answers = std::collections::BTreeMap::new();
        for _ in 0..3 {
            let Some(line) = lines.next_line().await? else {
                anyhow::bail!("connection closed early");
            };
            let value: serde_json::Value = serde_json::from_str(&line)?;
            answers.insert(value["id"].as_u64().unwrap_or(0), value["response"].clone());
        }
        let refusals = [
            (41, "over the sandbox's 1024-byte limit"),
            (42, "malformed sandbox request"),
        ];
        for (id, expected) in refusals {
            assert_eq!(answers[&id]["kind"], "error", "{id}");
            let message = answers[&id]["message"].as_str().unwrap_or("");
            assert!(message.contains(expected), "{id}: {message}");
        }
        assert_eq!(answers[&43]["kind"], "uploads");
        stop(task).await;
        until_stale(&socket).await;

        // The client refuses what the server would refuse, without sending it.
        let limited = SocketOptions {
            max_request_bytes: 100,
            ..options()
        };
        let restarted = start(&socket, sandbox(dir.path())?).await?;
        let executor = UnixSocketExecutor::connect_with(&socket, limited).await?;
        let response = executor
            .execute(SandboxRequest::WriteOutput {
                path: "x".into(),
                content: "y".repeat(200),
            })
            .await?;
        assert!(
            matches!(response, SandboxResponse::Error { message } if message.contains("over the sandbox's 100-byte limit"))
        );
        stop(restarted).await;
        Ok(())
    }

    #[tokio::test]
    async fn unanswered_requests_and_missing_sockets_are_executor_errors() -> TestResult {
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("silent.sock");
        let listener = tokio::net::UnixListener::bind(&socket)?;
        let silent = tokio::spawn(fake_sandbox(
            listener,
            hello(PROTOCOL_VERSION, RUNNER_VERSION),
        ));
        let quick = SocketOptions {
            request_timeout: Duration::from_millis(200),
            ..options()
        };
        let executor = UnixSocketExecutor::connect_with(&socket, quick).await?;
        let error = executor.execute(SandboxRequest::Prepare).await.err();
        assert!(error.is_some_and(|e| e.to_string().contains("did not answer within 200ms")));
        stop(silent).await;

        let missing = SocketOptions {
            connect_wait: Duration::from_millis(100),
            ..options()
        };
        let error = UnixSocketExecutor::connect_with(dir.path().join("none.sock"), missing)
            .await
            .err();
        assert!(error.is_some_and(|e| e.to_string().contains("cannot connect to the sandbox")));
        Ok(())
    }

    #[tokio::test]
    async fn a_sandbox_of_another_protocol_version_is_refused_naming_both_versions() -> TestResult {
        let dir = tempfile::tempdir()?;
        let newer = format!("protocol {} (herd-runner 9.9.9)", PROTOCOL_VERSION + 1);
        let cases = [
            (hello(PROTOCOL_VERSION + 1, "9.9.9"), newer.as_str()),
            (
                Some(SandboxResponse::Error {
                    message: "Error: malformed sandbox request: unknown variant `hello`".into(),
                }),
                "its herd-runner is older",
            ),
            (None, "did not answer the handshake within 200ms"),
        ];
        for (index, (answer, expected)) in cases.into_iter().enumerate() {
            let socket = dir.path().join(format!("other-{index}.sock"));
            let server = tokio::spawn(fake_sandbox(
                tokio::net::UnixListener::bind(&socket)?,
                answer,
            ));
            let quick = SocketOptions {
                request_timeout: Duration::from_millis(200),
                ..options()
            };
            let error = UnixSocketExecutor::connect_with(&socket, quick)
                .await
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.contains(expected), "{error}");
            if index < 2 {
                let ours = format!("protocol {PROTOCOL_VERSION} (herd-runner {RUNNER_VERSION})");
                assert!(error.contains(&ours), "{error}");
                assert!(error.contains("sandbox.image"), "{error}");
            }
            stop(server).await;
        }
        Ok(())
    }

    #[tokio::test]
    async fn a_stdio_program_gets_a_connection_of_its_own_and_dies_with_it() -> TestResult {
        let served = Served::start().await?;
        let executor = served.connect().await?;
        let echo = bash_program(
            "echo",
            "echo $$ > /mnt/user-data/workspace/pid; while read l; do echo \"got $l\"; done",
        );
        let mut pipe = executor.open_stdio(echo.clone()).await?;
        // Ordinary requests still work on the executor's own connection meanwhile.
        assert!(matches!(
            executor.execute(SandboxRequest::ListUploads).await?,
            SandboxResponse::Uploads { .. }
        ));
        pipe.writer.write_all(b"one\ntwo\n").await?;
        pipe.writer.flush().await?;
        let mut reply = vec![0u8; 16];
        pipe.reader.read_exact(&mut reply).await?;
        assert_eq!(reply, b"got one\ngot two\n");
        let pid_file = served.dir.path().join("user-data/workspace/pid");
        let pid: i32 = std::fs::read_to_string(&pid_file)?.trim().parse()?;
        drop(pipe);
        let gone = async {
            while std::path::Path::new(&format!("/proc/{pid}")).exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), gone).await?;

        let missing = StdioCommand {
            argv: vec!["no-such-mcp-server".into()],
            ..echo
        };
        let error = executor
            .open_stdio(missing)
            .await
            .err()
            .map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.starts_with("cannot start no-such-mcp-server")),
            "{error:?}"
        );
        stop(served.server).await;
        Ok(())
    }

    #[tokio::test]
    async fn a_stdio_programs_last_words_on_stderr_are_kept_for_the_agent() -> TestResult {
        let served = Served::start().await?;
        let executor = served.connect().await?;
        let failing = bash_program(
            "failing",
            "for i in $(seq 1 30); do echo \"line $i\" >&2; done; exit 3",
        );
        let mut pipe = executor.open_stdio(failing).await?;
        let mut out = Vec::new();
        pipe.reader.read_to_end(&mut out).await?;
        let lines = executor.stdio_stderr(pipe.stderr).await;
        let expected: Vec<String> = (11..=30).map(|i| format!("line {i}")).collect();
        assert_eq!(lines, expected);
        assert!(executor.stdio_stderr(pipe.stderr + 100).await.is_empty());
        stop(served.server).await;
        Ok(())
    }

    #[tokio::test]
    async fn spawn_stdio_is_refused_after_other_requests_on_a_connection() -> TestResult {
        let served = Served::start().await?;
        let stream = tokio::net::UnixStream::connect(&served.socket).await?;
        let (read_half, mut write_half) = stream.into_split();
        let mut lines = BufReader::new(read_half).lines();
        write_half
            .write_all(b"{\"id\":1,\"request\":{\"op\":\"list_uploads\"}}\n")
            .await?;
        let _ = lines.next_line().await?;
        write_half
            .write_all(b"{\"id\":2,\"request\":{\"op\":\"spawn_stdio\",\"command\":{\"label\":\"x\",\"argv\":[\"cat\"],\"env\":[]}}}\n")
            .await?;
        let line = lines.next_line().await?.unwrap_or_default();
        assert!(line.contains("must be the first request"), "{line}");
        stop(served.server).await;
        Ok(())
    }

    #[tokio::test]
    async fn binding_replaces_stale_sockets_only() -> TestResult {
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("s.sock");
        drop(std::os::unix::net::UnixListener::bind(&socket)?);
        let server = start(&socket, sandbox(dir.path())?).await?;
        let live = SandboxServer::bind(&socket, sandbox(dir.path())?)
            .await
            .err();
        assert!(live.is_some_and(|e| e.to_string().contains("already serving")));
        stop(server).await;

        let file = dir.path().join("plain");
        std::fs::write(&file, "not a socket")?;
        let refused = SandboxServer::bind(&file, sandbox(dir.path())?).await.err();
        assert!(refused.is_some_and(|e| e.to_string().contains("not a socket")));
        assert_eq!(std::fs::read_to_string(&file)?, "not a socket");
        Ok(())
    }
}
