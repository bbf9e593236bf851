//! The `agent` container's executor: sends requests to `herd-runner sandbox` over the unix
//! socket, many at once on one connection (matched by id), reconnecting when the sandbox
//! restarts. Every connection opens with a handshake: a sandbox that speaks another protocol
//! version (a custom image with another `herd-runner`) is refused, naming both versions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use herd_crds::report::SandboxLayer;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::wire::{
    Line, MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES, RequestEnvelope, ResponseEnvelope, leading_id,
    read_line, to_line,
};
use crate::executor::{ExecutorError, ToolExecutor};
use crate::host::DEFAULT_BASH_TIMEOUT;
use crate::protocol::StdioCommand;
use crate::protocol::{PROTOCOL_VERSION, RUNNER_VERSION, SandboxRequest, SandboxResponse};
use crate::stdio::{StdioError, StdioPipe};

/// How the client connects and waits.
#[derive(Clone, Debug)]
pub struct SocketOptions {
    /// How long to wait for the socket to accept (the `sandbox` container may start after
    /// the `agent` one, or be restarting).
    pub connect_wait: Duration,
    /// How long one request may take; must exceed the sandbox's bash timeout.
    pub request_timeout: Duration,
    /// Larger requests are refused before sending (the server refuses them too).
    pub max_request_bytes: usize,
    /// Larger responses end the connection.
    pub max_response_bytes: usize,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            connect_wait: Duration::from_secs(30),
            request_timeout: DEFAULT_BASH_TIMEOUT + Duration::from_secs(60),
            max_request_bytes: MAX_REQUEST_BYTES,
            max_response_bytes: MAX_RESPONSE_BYTES,
        }
    }
}

/// Pause between connection attempts while waiting for the socket.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// Longest wait for the handshake's answer (the sandbox answers it at once).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<SandboxResponse>>>>;

/// A `ToolExecutor` talking to `herd-runner sandbox` over a unix socket.
#[derive(Debug)]
pub struct UnixSocketExecutor {
    path: PathBuf,
    options: SocketOptions,
    next_id: AtomicU64,
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// The layers of isolation the sandbox told in its latest handshake.
    layers: Mutex<Vec<SandboxLayer>>,
}

impl UnixSocketExecutor {
    /// Connects to the socket at `path` with default options, waiting up to 30 s for it.
    pub async fn connect(path: impl Into<PathBuf>) -> Result<Self, ExecutorError> {
        Self::connect_with(path, SocketOptions::default()).await
    }

    /// Connects with `options`.
    pub async fn connect_with(
        path: impl Into<PathBuf>,
        options: SocketOptions,
    ) -> Result<Self, ExecutorError> {
        let executor = UnixSocketExecutor {
            path: path.into(),
            options,
            next_id: AtomicU64::new(1),
            connection: tokio::sync::Mutex::new(None),
            layers: Mutex::new(Vec::new()),
        };
        executor.live_connection().await?;
        Ok(executor)
    }

    /// The current connection, or a new one if there is none or it broke.
    async fn live_connection(&self) -> Result<Arc<Connection>, ExecutorError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref()
            && connection.alive.load(Ordering::Acquire)
        {
            return Ok(connection.clone());
        }
        let connection = Arc::new(Connection::open(&self.path, &self.options).await?);
        self.handshake(&connection).await?;
        *slot = Some(connection.clone());
        Ok(connection)
    }

    /// Tells the sandbox which protocol this side speaks and checks the one it answers with.
    async fn handshake(&self, connection: &Connection) -> Result<(), ExecutorError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let hello = RequestEnvelope {
            id,
            request: SandboxRequest::Hello {
                protocol: PROTOCOL_VERSION,
                runner: RUNNER_VERSION.to_owned(),
            },
        };
        let line = to_line(&hello)
            .map_err(|e| ExecutorError(format!("could not encode the handshake: {e}")))?;
        let receiver = connection.register(id);
        connection.write(&line).await.map_err(|failure| {
            ExecutorError(format!(
                "could not greet the sandbox at {}: {failure}",
                self.path.display()
            ))
        })?;
        let wait = self.options.request_timeout.min(HANDSHAKE_TIMEOUT);
        match tokio::time::timeout(wait, receiver).await {
            Ok(Ok(answer)) => {
                let layers = check_versions(&self.path, answer)?;
                *self.layers.lock().unwrap_or_else(PoisonError::into_inner) = layers;
                Ok(())
            }
            Ok(Err(_)) => Err(ExecutorError(format!(
                "the sandbox at {} closed the connection during the handshake",
                self.path.display()
            ))),
            Err(_) => Err(ExecutorError(format!(
                "the sandbox at {} did not answer the handshake within {}",
                self.path.display(),
                humantime::format_duration(wait)
            ))),
        }
    }

    /// Sends a request line on a live connection; a broken pipe gets one retry on a fresh
    /// connection (the server never acts on a line it did not receive whole).
    async fn send(
        &self,
        id: u64,
        line: &[u8],
    ) -> Result<(Arc<Connection>, oneshot::Receiver<SandboxResponse>), ExecutorError> {
        let mut last_error = String::from("the connection closed");
        for _ in 0..2 {
            let connection = self.live_connection().await?;
            let receiver = connection.register(id);
            // The reader marks the connection dead before failing what is pending, so a
            // request registered after that sees it here instead of waiting forever.
            if !connection.alive.load(Ordering::Acquire) {
                connection.forget(id);
                continue;
            }
            match connection.write(line).await {
                Ok(()) => return Ok((connection, receiver)),
                Err(failure) => {
                    connection.forget(id);
                    connection.alive.store(false, Ordering::Release);
                    last_error = failure.to_string();
                }
            }
        }
        Err(ExecutorError(format!(
            "could not send to the sandbox at {}: {last_error}",
            self.path.display()
        )))
    }
}

#[async_trait]
impl ToolExecutor for UnixSocketExecutor {
    fn sandbox_layers(&self) -> Vec<SandboxLayer> {
        self.layers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    async fn open_stdio(&self, command: StdioCommand) -> Result<StdioPipe, StdioError> {
        self.stdio_connection(command).await
    }

    /// One round trip; the runner traces each as a span of its own (`TracedExecutor`).
    async fn execute(&self, request: SandboxRequest) -> Result<SandboxResponse, ExecutorError> {
        self.round_trip(request).await
    }
}

impl UnixSocketExecutor {
    /// Sends `request` and waits for its answer.
    async fn round_trip(&self, request: SandboxRequest) -> Result<SandboxResponse, ExecutorError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line = to_line(&RequestEnvelope { id, request })
            .map_err(|e| ExecutorError(format!("could not encode the request: {e}")))?;
        if line.len() > self.options.max_request_bytes {
            // Too much for the socket is the model's problem to fix, not an outage.
            return Ok(SandboxResponse::Error {
                message: format!(
                    "Error: the request is {} bytes, over the sandbox's {}-byte limit; send \
                     less at once (write large files in parts with append=true)",
                    line.len(),
                    self.options.max_request_bytes
                ),
            });
        }
        let (connection, receiver) = self.send(id, &line).await?;
        match tokio::time::timeout(self.options.request_timeout, receiver).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(ExecutorError(
                "the sandbox closed the connection before answering".to_owned(),
            )),
            Err(_) => {
                connection.forget(id);
                Err(ExecutorError(format!(
                    "the sandbox did not answer within {}",
                    humantime::format_duration(self.options.request_timeout)
                )))
            }
        }
    }
}

impl UnixSocketExecutor {
    /// A connection of its own for a stdio program: the handshake, `SpawnStdio`, and then the
    /// connection is the program's pipe.
    async fn stdio_connection(&self, command: StdioCommand) -> Result<StdioPipe, StdioError> {
        let fail = |e: ExecutorError| StdioError(e.to_string());
        let stream = connect_waiting(&self.path, self.options.connect_wait)
            .await
            .map_err(fail)?;
        let (read_half, mut write_half) = stream.into_split();
        let mut reader = BufReader::new(read_half);
        let hello = SandboxRequest::Hello {
            protocol: PROTOCOL_VERSION,
            runner: RUNNER_VERSION.to_owned(),
        };
        let answer = self
            .exchange(&mut reader, &mut write_half, hello)
            .await
            .map_err(fail)?;
        check_versions(&self.path, answer).map_err(fail)?;
        let spawn = SandboxRequest::SpawnStdio { command };
        match self
            .exchange(&mut reader, &mut write_half, spawn)
            .await
            .map_err(fail)?
        {
            SandboxResponse::StdioStarted { stderr } => Ok(StdioPipe {
                reader: Box::pin(reader),
                writer: Box::pin(write_half),
                stderr,
            }),
            SandboxResponse::Error { message } => Err(StdioError(
                message
                    .strip_prefix("Error: ")
                    .unwrap_or(&message)
                    .to_owned(),
            )),
            other => Err(StdioError(format!(
                "the sandbox gave an unexpected answer to spawn_stdio: {other:?}"
            ))),
        }
    }

    /// Sends one request on a connection of its own and reads the one answer.
    async fn exchange(
        &self,
        reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
        writer: &mut OwnedWriteHalf,
        request: SandboxRequest,
    ) -> Result<SandboxResponse, ExecutorError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line = to_line(&RequestEnvelope { id, request })
            .map_err(|e| ExecutorError(format!("could not encode the request: {e}")))?;
        let io = |e: std::io::Error| {
            ExecutorError(format!("the sandbox at {}: {e}", self.path.display()))
        };
        writer.write_all(&line).await.map_err(io)?;
        writer.flush().await.map_err(io)?;
        let read = read_line(reader, self.options.max_response_bytes);
        let line = match tokio::time::timeout(HANDSHAKE_TIMEOUT, read).await {
            Ok(Ok(Line::Complete(line))) => line,
            Ok(Ok(_)) => {
                return Err(ExecutorError(format!(
                    "the sandbox at {} closed the connection",
                    self.path.display()
                )));
            }
            Ok(Err(failure)) => return Err(io(failure)),
            Err(_) => {
                return Err(ExecutorError(format!(
                    "the sandbox at {} did not answer within {}",
                    self.path.display(),
                    humantime::format_duration(HANDSHAKE_TIMEOUT)
                )));
            }
        };
        serde_json::from_slice::<ResponseEnvelope>(&line)
            .map(|envelope| envelope.response)
            .map_err(|e| ExecutorError(format!("malformed answer from the sandbox: {e}")))
    }
}

/// Whether the sandbox's answer to the handshake names this side's protocol; the layers it
/// told when it does.
fn check_versions(
    path: &Path,
    answer: SandboxResponse,
) -> Result<Vec<SandboxLayer>, ExecutorError> {
    let fix = format!(
        "use a sandbox image whose herd-runner is version {RUNNER_VERSION} (the Agent's \
         sandbox.image)"
    );
    match answer {
        SandboxResponse::Hello {
            protocol, layers, ..
        } if protocol == PROTOCOL_VERSION => Ok(layers),
        SandboxResponse::Hello {
            protocol, runner, ..
        } => Err(ExecutorError(format!(
            "the sandbox at {} speaks protocol {protocol} (herd-runner {runner}), this runner \
             protocol {PROTOCOL_VERSION} (herd-runner {RUNNER_VERSION}): {fix}",
            path.display()
        ))),
        other => Err(ExecutorError(format!(
            "the sandbox at {} does not know the handshake of protocol {PROTOCOL_VERSION} \
             (herd-runner {RUNNER_VERSION}); its herd-runner is older (it answered {other:?}): \
             {fix}",
            path.display()
        ))),
    }
}

/// One connection: a writer shared by requests and a reader task routing responses by id.
#[derive(Debug)]
struct Connection {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    pending: Pending,
    alive: Arc<AtomicBool>,
    reader: JoinHandle<()>,
}

impl Connection {
    async fn open(path: &Path, options: &SocketOptions) -> Result<Self, ExecutorError> {
        let stream = connect_waiting(path, options.connect_wait).await?;
        let (read_half, write_half) = stream.into_split();
        let pending: Pending = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let reader = tokio::spawn(route_responses(
            BufReader::new(read_half),
            pending.clone(),
            alive.clone(),
            options.max_response_bytes,
        ));
        Ok(Connection {
            writer: tokio::sync::Mutex::new(write_half),
            pending,
            alive,
            reader,
        })
    }

    fn register(&self, id: u64) -> oneshot::Receiver<SandboxResponse> {
        let (sender, receiver) = oneshot::channel();
        lock(&self.pending).insert(id, sender);
        receiver
    }

    fn forget(&self, id: u64) {
        lock(&self.pending).remove(&id);
    }

    async fn write(&self, line: &[u8]) -> std::io::Result<()> {
        let mut writer = self.writer.lock().await;
        writer.write_all(line).await?;
        writer.flush().await
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The map stays consistent even if a holder panicked: every operation is one call.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn connect_waiting(path: &Path, wait: Duration) -> Result<UnixStream, ExecutorError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match UnixStream::connect(path).await {
            Ok(stream) => return Ok(stream),
            Err(failure) if tokio::time::Instant::now() >= deadline => {
                return Err(ExecutorError(format!(
                    "cannot connect to the sandbox at {}: {failure}",
                    path.display()
                )));
            }
            Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
        }
    }
}

/// Reads responses until the connection ends, handing each to its waiting request; then
/// fails whatever is still waiting (dropping the senders) and marks the connection dead.
async fn route_responses(
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    pending: Pending,
    alive: Arc<AtomicBool>,
    max_response_bytes: usize,
) {
    loop {
        match read_line(&mut reader, max_response_bytes).await {
            Ok(Line::Complete(line)) => match serde_json::from_slice::<ResponseEnvelope>(&line) {
                Ok(ResponseEnvelope {
                    id: Some(id),
                    response,
                }) => {
                    if let Some(sender) = lock(&pending).remove(&id) {
                        let _ = sender.send(response);
                    }
                }
                Ok(ResponseEnvelope { id: None, response }) => {
                    tracing::warn!(
                        ?response,
                        "sandbox answered a request it could not identify"
                    );
                }
                Err(failure) => {
                    tracing::warn!(error = %failure, "malformed response from the sandbox");
                }
            },
            Ok(Line::TooLong { prefix }) => {
                let sender = leading_id(&prefix).and_then(|id| lock(&pending).remove(&id));
                if let Some(sender) = sender {
                    let _ = sender.send(SandboxResponse::Error {
                        message: format!(
                            "Error: the sandbox's answer was over the {max_response_bytes}-byte \
                             limit"
                        ),
                    });
                }
            }
            Ok(Line::Eof) | Err(_) => break,
        }
    }
    alive.store(false, Ordering::Release);
    lock(&pending).clear();
}
