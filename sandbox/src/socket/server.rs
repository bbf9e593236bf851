//! `herd-runner sandbox`: serves a `SandboxHost` on a unix socket. Every request runs in its own
//! task, so a long `bash` does not hold up a `read_file` sent after it, on the same
//! connection or another.

use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use super::wire::{
    Line, MAX_REQUEST_BYTES, RequestEnvelope, ResponseEnvelope, leading_id, read_line, to_line,
};
use crate::host::SandboxHost;
use crate::protocol::StdioCommand;
use crate::protocol::{SandboxRequest, SandboxResponse};
use crate::stdio::SpawnedStdio;

/// Requests handled at once across all connections; more wait their turn.
const MAX_CONCURRENT_REQUESTS: usize = 64;

/// Serves `sandbox` on `socket` until the task is dropped or accepting fails. A stale socket
/// file is replaced; a live server on the same path is an error.
pub(crate) async fn serve(socket: &Path, sandbox: SandboxHost) -> anyhow::Result<()> {
    SandboxServer::bind(socket, sandbox).await?.run().await
}

/// Serves `sandbox` on `listener`, bound earlier by [`bind_listener`].
pub(crate) async fn serve_listener(
    listener: std::os::unix::net::UnixListener,
    sandbox: SandboxHost,
) -> anyhow::Result<()> {
    SandboxServer::listening(listener, sandbox)?.run().await
}

/// Serves `sandbox` on the listening socket that is this process's standard input (inetd
/// style): how `herd-runner run` hands its confined sandbox a socket on the host, where the
/// sandbox itself cannot create one.
pub(crate) async fn serve_stdin(sandbox: SandboxHost) -> anyhow::Result<()> {
    let listener = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(std::os::unix::net::UnixListener::from)
        .context("taking the socket on standard input")?;
    listener
        .local_addr()
        .context("standard input is not a listening unix socket")?;
    SandboxServer::listening(listener, sandbox)
        .context("preparing the socket on standard input")?
        .run()
        .await
}

/// Binds `socket`, creating its folder and replacing a stale socket file; a live server on
/// the same path is an error. Needs no async runtime, so a Pod's sandbox binds before it
/// restricts itself with Landlock (and before the runtime's threads exist).
pub fn bind_listener(socket: &Path) -> anyhow::Result<std::os::unix::net::UnixListener> {
    if let Some(parent) = socket.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    match std::fs::symlink_metadata(socket) {
        Ok(metadata) if metadata.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(socket).is_ok() {
                anyhow::bail!("another sandbox is already serving on {}", socket.display());
            }
            std::fs::remove_file(socket)
                .with_context(|| format!("removing stale socket {}", socket.display()))?;
        }
        Ok(_) => anyhow::bail!(
            "refusing to replace {}: it exists and is not a socket",
            socket.display()
        ),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error).with_context(|| format!("inspecting {}", socket.display()));
        }
    }
    std::os::unix::net::UnixListener::bind(socket)
        .with_context(|| format!("binding sandbox socket {}", socket.display()))
}

/// A bound socket server (bind first, then `run`, so callers know when it accepts).
#[derive(Debug)]
pub(super) struct SandboxServer {
    listener: UnixListener,
    sandbox: SandboxHost,
    max_request_bytes: usize,
}

impl SandboxServer {
    /// Binds `socket` (see [`bind_listener`]).
    pub(super) async fn bind(socket: &Path, sandbox: SandboxHost) -> anyhow::Result<Self> {
        Self::listening(bind_listener(socket)?, sandbox)
    }

    /// Serves on a listener bound already.
    fn listening(
        listener: std::os::unix::net::UnixListener,
        sandbox: SandboxHost,
    ) -> anyhow::Result<Self> {
        listener
            .set_nonblocking(true)
            .context("preparing the socket")?;
        Ok(SandboxServer {
            listener: UnixListener::from_std(listener).context("preparing the socket")?,
            sandbox,
            max_request_bytes: MAX_REQUEST_BYTES,
        })
    }

    /// Sets the request size limit (default 16 MiB), so tests need not send 16 MiB.
    #[cfg(test)]
    pub(crate) fn with_max_request_bytes(mut self, limit: usize) -> Self {
        self.max_request_bytes = limit;
        self
    }

    /// Accepts connections until dropped (dropping also ends every connection and request).
    pub(super) async fn run(self) -> anyhow::Result<()> {
        let permits = Arc::new(Semaphore::new(MAX_CONCURRENT_REQUESTS));
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (stream, _) = accepted.context("accepting a sandbox connection")?;
                    connections.spawn(connection(
                        stream,
                        self.sandbox.clone(),
                        self.max_request_bytes,
                        permits.clone(),
                    ));
                }
                Some(_) = connections.join_next() => {}
            }
        }
    }
}

/// Serves one connection: reads requests, answers each from its own task, in any order.
async fn connection(
    stream: UnixStream,
    sandbox: SandboxHost,
    max_request_bytes: usize,
    permits: Arc<Semaphore>,
) {
    let (read_half, write_half) = stream.into_split();
    let (replies, mut outbox) = mpsc::channel::<Vec<u8>>(64);
    // Hands the write half back once every reply is out, for a connection given to a program.
    let writer = tokio::spawn(async move {
        let mut writer = BufWriter::new(write_half);
        while let Some(line) = outbox.recv().await {
            if writer.write_all(&line).await.is_err() || writer.flush().await.is_err() {
                break;
            }
        }
        writer.into_inner()
    });
    let mut reader = BufReader::new(read_half);
    // Dropped when the client goes away: in-flight requests are cancelled with it (a killed
    // `bash` takes its process group down through kill_on_drop).
    let mut requests = JoinSet::new();
    let mut answered = 0usize;
    let mut handover = None;
    while let Some(envelope) = next_request(&mut reader, max_request_bytes, &replies).await {
        if let SandboxRequest::Hello { .. } = envelope.request {
            // At once, never behind busy requests: the client waits for it before all else.
            let response = sandbox.handle(envelope.request).await;
            reply(&replies, Some(envelope.id), response).await;
            continue;
        }
        answered += 1;
        if let SandboxRequest::SpawnStdio { command } = envelope.request {
            if answered == 1 {
                handover = Some((envelope.id, command));
                break;
            }
            let message = "Error: SpawnStdio must be the first request on its own connection";
            reply(&replies, Some(envelope.id), error(message.to_owned())).await;
            continue;
        }
        let sandbox = sandbox.clone();
        let replies = replies.clone();
        let permits = permits.clone();
        requests.spawn(async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            let response = sandbox.handle(envelope.request).await;
            reply(&replies, Some(envelope.id), response).await;
        });
        // Reap finished requests so the set does not grow on a long-lived connection.
        while requests.try_join_next().is_some() {}
    }
    drop(requests);
    drop(replies);
    let Ok(write_half) = writer.await else {
        return;
    };
    if let Some((id, command)) = handover {
        relay(&sandbox, reader, write_half, id, command).await;
    }
}

/// The next request read from `reader`; one over `max_request_bytes` or malformed is answered
/// with an error and passed over. `None` once the client hangs up.
async fn next_request(
    reader: &mut BufReader<OwnedReadHalf>,
    max_request_bytes: usize,
    replies: &mpsc::Sender<Vec<u8>>,
) -> Option<RequestEnvelope> {
    loop {
        let line = match read_line(reader, max_request_bytes).await {
            Ok(Line::Complete(line)) => line,
            Ok(Line::TooLong { prefix }) => {
                let message = format!(
                    "Error: the request is over the sandbox's {max_request_bytes}-byte limit; \
                     send less at once (write large files in parts with append=true)"
                );
                reply(replies, leading_id(&prefix), error(message)).await;
                continue;
            }
            Ok(Line::Eof) | Err(_) => return None,
        };
        match serde_json::from_slice(&line) {
            Ok(envelope) => return Some(envelope),
            Err(failure) => {
                let message = format!("Error: malformed sandbox request: {failure}");
                reply(replies, leading_id(&line), error(message)).await;
            }
        }
    }
}

/// After a program's last output, how long the relay waits for the client to hang up.
const RELAY_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Starts `command` and connects it to the connection: the client's bytes to its standard
/// input, its standard output to the client. Ends (killing the program) when either closes.
async fn relay(
    sandbox: &SandboxHost,
    mut reader: BufReader<OwnedReadHalf>,
    mut writer: OwnedWriteHalf,
    id: u64,
    command: StdioCommand,
) {
    let spawned = match sandbox.spawn_stdio(&command) {
        Ok(spawned) => spawned,
        Err(failure) => {
            let answer = error(format!("Error: {failure}"));
            let _ = write_envelope(&mut writer, id, answer).await;
            return;
        }
    };
    let started = SandboxResponse::StdioStarted {
        stderr: spawned.stderr,
    };
    if write_envelope(&mut writer, id, started).await.is_err() {
        return;
    }
    let SpawnedStdio {
        mut stdin,
        mut stdout,
        guard,
        ..
    } = spawned;
    let to_program = async move {
        let _ = tokio::io::copy(&mut reader, &mut stdin).await;
    };
    let from_program = async move {
        let _ = tokio::io::copy(&mut stdout, &mut writer).await;
        let _ = writer.shutdown().await;
    };
    tokio::pin!(to_program, from_program);
    tokio::select! {
        () = &mut from_program => {}
        () = &mut to_program => {
            // The client hung up: the program gets EOF and a moment to finish writing.
            let _ = tokio::time::timeout(RELAY_GRACE, &mut from_program).await;
        }
    }
    drop(guard);
}

async fn write_envelope(
    writer: &mut OwnedWriteHalf,
    id: u64,
    response: SandboxResponse,
) -> std::io::Result<()> {
    let line = to_line(&ResponseEnvelope {
        id: Some(id),
        response,
    })
    .map_err(std::io::Error::other)?;
    writer.write_all(&line).await?;
    writer.flush().await
}

fn error(message: String) -> SandboxResponse {
    SandboxResponse::Error { message }
}

async fn reply(replies: &mpsc::Sender<Vec<u8>>, id: Option<u64>, response: SandboxResponse) {
    let envelope = ResponseEnvelope { id, response };
    match to_line(&envelope) {
        Ok(line) => {
            // A closed channel means the client is gone; nobody is left to tell.
            let _ = replies.send(line).await;
        }
        Err(failure) => tracing::error!(error = %failure, "could not encode a sandbox response"),
    }
}
