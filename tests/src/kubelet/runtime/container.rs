//! The kubelet's handle on one running container: its entry process, the control socket,
//! and its output (stdout and stderr together) copied to the container's log file and to the
//! kubelet's stderr.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use jiff::Timestamp;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::entry::{EXIT_START_FAILED, FAILED, STARTED, TERMINATE};
use super::exec::{EXIT_CANNOT_RUN, EXIT_TIMED_OUT};
use super::spec::ContainerSpec;

/// How long an entry may take to build the container and start the command.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// What the kubelet asks of a running container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// SIGTERM to its PID 1.
    Terminate,
    /// SIGKILL to everything in it.
    Kill,
}

/// How a container start failed (containerd's `StartError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError(pub String);

/// How a container ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// The exit code, or 128 + the signal that ended it.
    pub code: i32,
    /// The signal, when one ended the entry itself (a SIGKILL from the kubelet).
    pub signal: Option<i32>,
}

/// A started container.
pub struct Running {
    entry: Child,
    control: UnixStream,
    /// When the command started.
    pub started_at: Timestamp,
    logs: Vec<JoinHandle<()>>,
    pid: u32,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("pid", &self.pid)
            .field("started_at", &self.started_at)
            .finish_non_exhaustive()
    }
}

/// Where one container's files live, under its Pod's folder.
#[derive(Debug, Clone)]
pub struct ContainerDir {
    /// The folder.
    pub dir: PathBuf,
    /// What the container prints, across its restarts.
    pub log: PathBuf,
    /// The host file bound at `terminationMessagePath`.
    pub termination_log: PathBuf,
    /// The empty folder the container's root is mounted on.
    pub staging: PathBuf,
}

impl ContainerDir {
    /// Creates the folder and its files; the termination-message file starts empty, as
    /// each start of the container gets a fresh one.
    pub fn create(dir: PathBuf) -> anyhow::Result<ContainerDir> {
        let staging = dir.join("root");
        std::fs::create_dir_all(&staging).with_context(|| staging.display().to_string())?;
        let this = ContainerDir {
            log: dir.join("output.log"),
            termination_log: dir.join("termination-log"),
            staging,
            dir,
        };
        std::fs::write(&this.termination_log, "")?;
        Ok(this)
    }
}

/// Starts a container with `exe` (this binary, `local-kubelet`): `spec` written into `dir`,
/// the entry started with exactly `env`, its output prefixed with `label` on the kubelet's
/// stderr.
pub async fn start(
    exe: &Path,
    spec: &ContainerSpec,
    env: &[(String, String)],
    dir: &ContainerDir,
    label: &str,
) -> Result<Running, StartError> {
    let spec_file = dir.dir.join("spec.json");
    let json = serde_json::to_vec(spec).map_err(|e| StartError(e.to_string()))?;
    std::fs::write(&spec_file, json).map_err(|e| StartError(format!("writing the spec: {e}")))?;
    let (ours, theirs) =
        std::os::unix::net::UnixStream::pair().map_err(|e| StartError(e.to_string()))?;
    // One pipe for stdout and stderr keeps their lines in the order they were written.
    let (output, output_end) = std::io::pipe().map_err(|e| StartError(e.to_string()))?;
    let error_end = output_end
        .try_clone()
        .map_err(|e| StartError(e.to_string()))?;
    let mut command = Command::new(exe);
    command
        .arg0("local-kubelet")
        .arg(super::CONTAINER)
        .arg(&spec_file)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::from(output_end))
        .stderr(Stdio::from(error_end))
        // Its own process group: a Ctrl-C at the kubelet's terminal is the kubelet's alone.
        .process_group(0)
        .kill_on_drop(true);
    let spawned = command.spawn();
    // The command holds copies of the entry's ends of the socket and the pipe: without
    // them, an entry that dies is seen at once (end of file) instead of at the start timeout.
    drop(command);
    let entry = spawned.map_err(|e| StartError(format!("starting the entry: {e}")))?;
    let pid = entry.id().unwrap_or(0);
    let output = pipe::Receiver::from_owned_fd(OwnedFd::from(output))
        .map_err(|e| StartError(format!("reading the output: {e}")))?;
    let logs = vec![copy_log(output, dir.log.clone(), label.to_owned())];
    ours.set_nonblocking(true)
        .map_err(|e| StartError(e.to_string()))?;
    let control = UnixStream::from_std(ours).map_err(|e| StartError(e.to_string()))?;
    let mut running = Running {
        entry,
        control,
        started_at: Timestamp::now(),
        logs,
        pid,
    };
    match tokio::time::timeout(START_TIMEOUT, running.first_line()).await {
        Ok(Ok(line)) if line == STARTED => {
            running.started_at = Timestamp::now();
            Ok(running)
        }
        Ok(Ok(line)) => {
            let why = line.strip_prefix(FAILED).unwrap_or(&line).to_owned();
            running.kill();
            let _ = running.wait().await;
            Err(StartError(why))
        }
        Ok(Err(error)) => {
            running.kill();
            let exit = running.wait().await;
            Err(StartError(format!(
                "the entry exited ({}) without starting: {error}",
                exit.code
            )))
        }
        Err(_) => {
            running.kill();
            let _ = running.wait().await;
            Err(StartError(format!(
                "the container did not start within {START_TIMEOUT:?}"
            )))
        }
    }
}

impl Running {
    async fn first_line(&mut self) -> std::io::Result<String> {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match self.control.read(&mut byte).await? {
                0 => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "no answer from the entry",
                    ));
                }
                _ if byte[0] == b'\n' => return Ok(String::from_utf8_lossy(&line).into_owned()),
                _ => line.push(byte[0]),
            }
        }
    }

    /// The entry's pid, which names the container's namespaces.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Asks for SIGTERM to the container's PID 1 (which, as any PID 1, only gets it if it
    /// handles it).
    pub async fn terminate(&mut self) {
        let _ = self.control.write_all(&[TERMINATE]).await;
    }

    /// Serves `requests` until the container ends, and returns how it ended. When every
    /// sender is gone the container is killed: nobody is left to stop it.
    pub async fn serve(mut self, mut requests: mpsc::UnboundedReceiver<Request>) -> Exit {
        let mut open = true;
        loop {
            tokio::select! {
                status = self.entry.wait() => return self.finish(status).await,
                request = requests.recv(), if open => match request {
                    Some(Request::Terminate) => self.terminate().await,
                    Some(Request::Kill) => self.kill(),
                    None => {
                        open = false;
                        self.kill();
                    }
                },
            }
        }
    }

    /// Kills the container at once: the entry, and with it every process inside.
    pub fn kill(&mut self) {
        let _ = self.entry.start_kill();
    }

    /// Waits for the container to end and its output to be copied.
    pub async fn wait(&mut self) -> Exit {
        let status = self.entry.wait().await;
        self.finish(status).await
    }

    async fn finish(&mut self, status: std::io::Result<std::process::ExitStatus>) -> Exit {
        let exit = match status {
            Ok(status) => match (status.code(), status.signal()) {
                (Some(code), _) => Exit { code, signal: None },
                (None, Some(signal)) => Exit {
                    code: 128 + signal,
                    signal: Some(signal),
                },
                (None, None) => Exit {
                    code: i32::from(EXIT_START_FAILED),
                    signal: None,
                },
            },
            Err(_) => Exit {
                code: i32::from(EXIT_START_FAILED),
                signal: None,
            },
        };
        for log in self.logs.drain(..) {
            let _ = log.await;
        }
        exit
    }
}

/// Copies the output into the log file and, line by line with `label`, to stderr.
fn copy_log(
    stream: impl AsyncRead + Unpin + Send + 'static,
    log: PathBuf,
    label: String,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .await;
        let mut file = file.ok();
        let mut lines = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            // tokio's File hands a write to a blocking thread and returns before it is done:
            // without the flush, the last lines may not be in the file when the container's
            // exit is reported (and a reader of the log finds them missing).
            if let Some(file) = file.as_mut() {
                let _ = file.write_all(&line).await;
                let _ = file.flush().await;
            }
            let text = String::from_utf8_lossy(&line);
            eprintln!("[{label}] {}", text.trim_end_matches('\n'));
        }
    })
}

/// How an exec in a container ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecOutcome {
    /// The command exited with this code; its output.
    Exited(i32, String),
    /// It ran past its timeout.
    TimedOut,
    /// It could not run in the container (the container has stopped, the command is
    /// missing); why.
    CannotRun(String),
}

/// Runs `argv` with `exe` (this binary) in the container whose entry is `entry`, as an
/// `exec` probe does.
pub async fn exec(
    exe: &Path,
    entry: u32,
    cwd: &Path,
    env: &[(String, String)],
    argv: &[String],
    timeout: Duration,
) -> ExecOutcome {
    let mut command = Command::new(exe);
    command
        .arg0("local-kubelet")
        .arg(super::EXEC)
        .arg(entry.to_string())
        .arg(cwd)
        .arg(timeout.as_millis().to_string())
        .args(argv)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // The exec kills its command at the timeout; this bound covers entering the container.
    let bound = timeout + Duration::from_secs(5);
    let output = match tokio::time::timeout(bound, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => return ExecOutcome::CannotRun(error.to_string()),
        Err(_) => return ExecOutcome::TimedOut,
    };
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    // The exec's own codes come with its own line, so a command's 124 stays the command's.
    let own_line = text
        .lines()
        .last()
        .is_some_and(|l| l.starts_with("local-kubelet: "));
    match output.status.code() {
        Some(code) if own_line && code == i32::from(EXIT_TIMED_OUT) => ExecOutcome::TimedOut,
        Some(code) if own_line && code == i32::from(EXIT_CANNOT_RUN) => {
            ExecOutcome::CannotRun(text.trim().to_owned())
        }
        Some(code) => ExecOutcome::Exited(code, text),
        None => ExecOutcome::CannotRun(format!("the exec ended with {}", output.status)),
    }
}
