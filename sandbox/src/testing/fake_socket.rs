//! A stand-in for `herd-runner sandbox` on a unix socket: answers the handshake as told and
//! nothing else, and an executor that connects to a socket anew on every request.

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::executor::{ExecutorError, ToolExecutor};
use crate::protocol::{SandboxRequest, SandboxResponse};
use crate::socket::{SocketOptions, UnixSocketExecutor, wire};

/// A sandbox that answers the handshake with `hello` (if any) and nothing else, holding
/// every connection open.
pub async fn fake_sandbox(listener: tokio::net::UnixListener, hello: Option<SandboxResponse>) {
    let mut connections = tokio::task::JoinSet::new();
    while let Ok((stream, _)) = listener.accept().await {
        let hello = hello.clone();
        connections.spawn(async move {
            let (read_half, mut write_half) = stream.into_split();
            let mut lines = BufReader::new(read_half).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(envelope) = serde_json::from_str::<wire::RequestEnvelope>(&line) else {
                    continue;
                };
                let (SandboxRequest::Hello { .. }, Some(answer)) = (&envelope.request, &hello)
                else {
                    continue;
                };
                let reply = wire::ResponseEnvelope {
                    id: Some(envelope.id),
                    response: answer.clone(),
                };
                if let Ok(line) = wire::to_line(&reply) {
                    let _ = write_half.write_all(&line).await;
                }
            }
        });
    }
}

/// The handshake's answer of a sandbox speaking `protocol`, built as `herd-runner` `runner`.
pub fn hello(protocol: u32, runner: &str) -> Option<SandboxResponse> {
    Some(SandboxResponse::Hello {
        protocol,
        runner: runner.to_owned(),
        layers: Vec::new(),
    })
}

/// Connects on every request, as a pod's runner does when its sandbox comes up late.
#[derive(Debug)]
pub struct ConnectEachTime(pub PathBuf);

#[async_trait::async_trait]
impl ToolExecutor for ConnectEachTime {
    async fn execute(&self, request: SandboxRequest) -> Result<SandboxResponse, ExecutorError> {
        let quick = SocketOptions {
            connect_wait: Duration::from_secs(5),
            request_timeout: Duration::from_millis(500),
            ..SocketOptions::default()
        };
        UnixSocketExecutor::connect_with(&self.0, quick)
            .await?
            .execute(request)
            .await
    }
}
