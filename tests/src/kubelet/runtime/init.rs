//! The init of a container (`local-kubelet __init ARGV...`), the first process of its PID
//! namespace: it dies with the entry, mounts its `/proc`, gives up its capabilities and
//! becomes the container's command (PID 1). Its stdin is a socket to the entry, kept
//! close-on-exec: the entry reads end of file once the command runs, or the reason it could
//! not.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use herd_sandbox::init_container;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Signal, set_parent_process_death_signal};

use super::exec_program::command;

/// The init's exit code when the command could not start (the entry reports why).
const EXIT_NOT_STARTED: u8 = 127;

/// The init's `main`.
pub fn main(argv: &[String]) -> ExitCode {
    let mut entry = match entry_socket() {
        Ok(entry) => entry,
        Err(_) => return ExitCode::from(EXIT_NOT_STARTED),
    };
    let why = match become_command(argv, &entry) {
        Ok(never) => match never {},
        Err(why) => why,
    };
    let _ = entry.write_all(why.as_bytes());
    ExitCode::from(EXIT_NOT_STARTED)
}

/// The socket on stdin, moved to a close-on-exec descriptor; stdin becomes `/dev/null` (a
/// Pod's containers have no stdin).
fn entry_socket() -> std::io::Result<UnixStream> {
    let socket: OwnedFd = rustix::io::fcntl_dupfd_cloexec(std::io::stdin().as_fd(), 3)?;
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    Ok(UnixStream::from(socket))
}

fn become_command(argv: &[String], entry: &UnixStream) -> Result<std::convert::Infallible, String> {
    set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| format!("setting the parent-death signal: {e}"))?;
    // The entry may have died before the line above: its end of the socket is then closed.
    let mut fds = [PollFd::new(entry, PollFlags::IN)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if poll(&mut fds, Some(&now)).is_ok_and(|ready| ready > 0) {
        return Err("the container's entry process exited".to_owned());
    }
    init_container().map_err(|e| e.to_string())?;
    let program = argv.first().map_or("", String::as_str);
    let error = command(argv).exec();
    Err(format!("cannot run {program}: {error}"))
}
