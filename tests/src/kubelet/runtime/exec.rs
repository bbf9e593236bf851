//! A command run in a running container (`local-kubelet __exec ENTRY CWD TIMEOUT_MS
//! ARGV...`), as the kubelet runs an `exec` probe: in the container's user, mount and PID
//! namespaces, from its working directory, with its environment (the caller passes it), no
//! capability. Its exit code is the command's; one that outlives the timeout is killed and
//! [`EXIT_TIMED_OUT`] returned. No thread is created (see `join_container`): the wait is a
//! `poll` on a pidfd.

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use herd_sandbox::join_container;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, pidfd_open};

use super::exec_program::command;

/// The exit code of a command killed at its timeout.
pub const EXIT_TIMED_OUT: u8 = 124;
/// The exit code when the command could not be run in the container.
pub const EXIT_CANNOT_RUN: u8 = 126;

/// The exec's `main`.
pub fn main(entry: u32, cwd: &Path, timeout: Duration, argv: &[String]) -> ExitCode {
    if let Err(error) = join_container(entry, cwd) {
        eprintln!("local-kubelet: cannot enter the container: {error}");
        return ExitCode::from(EXIT_CANNOT_RUN);
    }
    let program = argv.first().map_or("", String::as_str);
    let mut child = match command(argv).stdin(Stdio::null()).spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!("local-kubelet: cannot run {program}: {error}");
            return ExitCode::from(EXIT_CANNOT_RUN);
        }
    };
    let pidfd = Pid::from_raw(i32::try_from(child.id()).unwrap_or(0))
        .and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
    let finished = match &pidfd {
        Some(pidfd) => {
            let limit = Timespec {
                tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(timeout.subsec_nanos()),
            };
            let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
            poll(&mut fds, Some(&limit)).is_ok_and(|ready| ready > 0)
        }
        None => true,
    };
    if !finished {
        let _ = child.kill();
        let _ = child.wait();
        eprintln!("local-kubelet: {program} timed out after {timeout:?}");
        return ExitCode::from(EXIT_TIMED_OUT);
    }
    match child.wait() {
        Ok(status) => ExitCode::from(
            status
                .code()
                .and_then(|code| u8::try_from(code).ok())
                .unwrap_or(EXIT_CANNOT_RUN),
        ),
        Err(_) => ExitCode::from(EXIT_CANNOT_RUN),
    }
}
