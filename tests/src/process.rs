//! A server process of the test control plane that cannot outlive the test binary.
//!
//! Each server runs under a small `sh` guard holding the read end of a pipe whose write end
//! only this process has. When the test binary exits, however it exits (end of `main`, panic,
//! SIGKILL), the pipe closes and the guard kills the server, so no etcd or kube-apiserver is
//! ever left behind. Dropping a [`Server`] closes the pipe the same way.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

/// The guard: starts the server, kills it when its stdin reaches end of file, and exits with
/// the server's status when the server exits by itself. (A background job of `sh` reads
/// `/dev/null` unless told otherwise, hence the copy of stdin on descriptor 3.)
const GUARD: &str = r#"
exec 3<&0
"$@" </dev/null 3<&- &
server=$!
echo "$server" > "$HERD_E2E_PID_FILE"
{ cat <&3 >/dev/null; kill -KILL "$server" 2>/dev/null; } &
exec 3<&-
wait "$server"
"#;

/// How long a stopped server may take to go away before its guard is killed too.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A running server process.
pub struct Server {
    name: String,
    guard: Child,
    lifeline: Option<ChildStdin>,
    pid_file: PathBuf,
    log: PathBuf,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.name)
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Where the server `name` started in `dir` writes its output.
    pub fn log_file(dir: &Path, name: &str) -> PathBuf {
        dir.join(format!("{name}.log"))
    }

    /// Starts `program args...` with its output in [`Server::log_file`].
    pub fn start(name: &str, dir: &Path, program: &Path, args: &[String]) -> anyhow::Result<Self> {
        let log = Self::log_file(dir, name);
        let pid_file = dir.join(format!("{name}.pid"));
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        let mut guard = Command::new("sh")
            .arg("-c")
            .arg(GUARD)
            .arg(format!("herd-e2e-{name}"))
            .arg(program)
            .args(args)
            .env("HERD_E2E_PID_FILE", &pid_file)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let lifeline = guard.stdin.take();
        Ok(Server {
            name: name.to_owned(),
            guard,
            lifeline,
            pid_file,
            log,
        })
    }

    /// `Err` with the end of the server's log when it has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        match self.guard.try_wait()? {
            None => Ok(()),
            Some(status) => anyhow::bail!(
                "{} exited ({status}); the end of its log:\n{}",
                self.name,
                self.log_tail(40)
            ),
        }
    }

    /// The last `lines` lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::dump::tail(&self.log, lines)
    }

    /// The server's log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    fn stop(&mut self) {
        // Closing the lifeline makes the guard kill the server; the guard then exits.
        drop(self.lifeline.take());
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if !matches!(self.guard.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(pid) = std::fs::read_to_string(&self.pid_file) {
            // The shell's own `kill`: a minimal image may have no kill binary.
            let _ = Command::new("sh")
                .args(["-c", "kill -KILL \"$1\" 2>/dev/null", "kill", pid.trim()])
                .status();
        }
        let _ = self.guard.kill();
        let _ = self.guard.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The resident and peak resident memory of process `pid`, in MiB (`VmRSS` and `VmHWM`).
pub fn resident_memory(pid: u32) -> anyhow::Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> anyhow::Result<f64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("no {name} in /proc/{pid}/status"))?;
        let kib: f64 = line
            .split_whitespace()
            .nth(1)
            .context("no value")?
            .parse()?;
        Ok(kib / 1024.0)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid_of(server: &Server) -> String {
        for _ in 0..500 {
            if let Ok(pid) = std::fs::read_to_string(&server.pid_file)
                && !pid.trim().is_empty()
            {
                return pid.trim().to_owned();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no pid file");
    }

    fn alive(pid: &str) -> bool {
        Path::new("/proc").join(pid).exists()
            && !std::fs::read_to_string(Path::new("/proc").join(pid).join("stat"))
                .unwrap_or_default()
                .contains(") Z ")
    }

    #[test]
    fn dropping_the_server_kills_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(
            "sleeper",
            dir.path(),
            Path::new("sleep"),
            &["300".to_owned()],
        )
        .unwrap();
        let pid = pid_of(&server);
        assert!(alive(&pid));
        drop(server);
        for _ in 0..500 {
            if !alive(&pid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("sleep {pid} survived its Server");
    }

    #[test]
    fn an_exited_server_reports_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = Server::start(
            "failing",
            dir.path(),
            Path::new("sh"),
            &["-c".to_owned(), "echo broken flag; exit 3".to_owned()],
        )
        .unwrap();
        let mut error = None;
        for _ in 0..500 {
            if let Err(e) = server.check_running() {
                error = Some(e.to_string());
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let error = error.expect("the server should have exited");
        assert!(error.contains("failing exited"), "{error}");
        assert!(error.contains("broken flag"), "{error}");
    }
}
