//! The entry process of a container (`local-kubelet __container SPEC`): it builds the
//! container's namespaces and root (`ContainerRoot::enter`), starts the init, tells the
//! kubelet whether the command started, passes on the kubelet's SIGTERM, and exits as the
//! init did (`128 + signal` when a signal ended it).
//!
//! It talks to the kubelet over the socket on its stdin: it writes `started\n` once the
//! command runs, or `failed <why>\n` (and exits with [`EXIT_START_FAILED`]); it reads `T`
//! (send SIGTERM) and end of file (the kubelet is gone: kill the container). SIGKILL to the
//! entry kills the container too: the init dies with its parent, and everything else in the
//! PID namespace with the init. No thread may be created here (see `ContainerRoot::enter`):
//! the waiting is `poll` on the socket and a pidfd.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::process::{Pid, PidfdFlags, Signal, kill_process, pidfd_open};

use super::spec::ContainerSpec;

/// What the entry writes once the command runs.
pub const STARTED: &str = "started";
/// What precedes the reason when the command could not start.
pub const FAILED: &str = "failed ";
/// The kubelet's request to stop the container gracefully.
pub const TERMINATE: u8 = b'T';
/// The entry's exit code when the command never started (as containerd's `StartError`).
pub const EXIT_START_FAILED: u8 = 128;

/// The entry's `main`.
pub fn main(spec: &Path) -> ExitCode {
    let control = match control_socket() {
        Ok(control) => control,
        Err(error) => {
            eprintln!("local-kubelet: the container has no control socket: {error}");
            return ExitCode::from(EXIT_START_FAILED);
        }
    };
    let mut control = Control(control);
    match start(spec) {
        Ok(init) => {
            control.say(STARTED);
            ExitCode::from(supervise(init, &mut control.0))
        }
        Err(why) => {
            control.say(&format!("{FAILED}{why}"));
            ExitCode::from(EXIT_START_FAILED)
        }
    }
}

struct Control(UnixStream);

impl Control {
    fn say(&mut self, line: &str) {
        // A kubelet that is gone cannot be told; the container then dies with it.
        let _ = writeln!(self.0, "{}", line.replace('\n', " "));
    }
}

/// The socket on stdin, moved off descriptor 0 so the container never inherits it.
fn control_socket() -> std::io::Result<UnixStream> {
    let socket: OwnedFd = rustix::io::fcntl_dupfd_cloexec(std::io::stdin().as_fd(), 3)?;
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    Ok(UnixStream::from(socket))
}

/// Builds the container and starts its init; `Err` with why the command did not start.
fn start(spec_path: &Path) -> Result<Child, String> {
    let spec =
        ContainerSpec::read(spec_path).map_err(|e| format!("reading the container spec: {e}"))?;
    spec.root.enter().map_err(|e| e.to_string())?;
    let (ours, theirs) = UnixStream::pair().map_err(|e| format!("a socket for the init: {e}"))?;
    let mut init = Command::new("/proc/self/exe");
    init.arg0("local-kubelet")
        .arg(super::INIT)
        .args(&spec.argv)
        .stdin(Stdio::from(OwnedFd::from(theirs)));
    let spawned = init.spawn();
    // The command holds a copy of the init's end: without it, the end of file below comes
    // when the command starts (the init's copy is close-on-exec) or the init dies.
    drop(init);
    let mut child = spawned.map_err(|e| format!("starting the init: {e}"))?;
    // The init closes its end when the command starts (close-on-exec), or writes why not.
    let mut why = String::new();
    let mut ours = ours;
    let _ = ours.read_to_string(&mut why);
    if why.is_empty() {
        return Ok(child);
    }
    let _ = child.wait();
    Err(why.trim().to_owned())
}

/// Waits for the init, passing on the kubelet's requests; the exit code to exit with.
fn supervise(mut init: Child, control: &mut UnixStream) -> u8 {
    let pid = Pid::from_raw(i32::try_from(init.id()).unwrap_or(0));
    let pidfd = pid.and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
    let mut control_open = true;
    loop {
        let exited = match &pidfd {
            Some(pidfd) => {
                let mut fds = vec![PollFd::new(pidfd, PollFlags::IN)];
                if control_open {
                    fds.push(PollFd::new(control, PollFlags::IN));
                }
                if poll(&mut fds, None).is_err() {
                    continue;
                }
                let exited = !fds[0].revents().is_empty();
                let request = fds.get(1).is_some_and(|fd| !fd.revents().is_empty());
                if request {
                    control_open = serve(control, pid);
                }
                exited
            }
            // No pidfd (a kernel before 5.3): only waiting is left.
            None => true,
        };
        if exited {
            return match init.wait() {
                Ok(status) => exit_code(status),
                Err(_) => EXIT_START_FAILED,
            };
        }
    }
}

/// Serves one request; `false` once the kubelet has gone (the container is then killed).
fn serve(control: &mut UnixStream, init: Option<Pid>) -> bool {
    let mut byte = [0u8; 1];
    let signal = match control.read(&mut byte) {
        Ok(1) if byte[0] == TERMINATE => Signal::TERM,
        Ok(1) => return true,
        Ok(_) | Err(_) => Signal::KILL,
    };
    if let Some(pid) = init {
        let _ = kill_process(pid, signal);
    }
    signal != Signal::KILL
}

/// The shell's convention, which the kubelet reports: the code, or 128 + the signal.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(u8::MAX),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(u8::MAX),
        (None, None) => EXIT_START_FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
    }
}
