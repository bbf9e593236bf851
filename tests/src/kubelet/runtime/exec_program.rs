//! Runs a container's command: `herd-runner` as this very binary under that name (through
//! `/proc/self/exe`, which names this program wherever its file is), anything else from the
//! container's `PATH`.

use std::process::Command;

use super::spec::{HERD_RUNNER, is_herd_runner};

/// The command for `argv` (never empty).
pub fn command(argv: &[String]) -> Command {
    let (program, args) = argv.split_first().map_or(("", &[][..]), |(p, a)| (&**p, a));
    let mut command = if is_herd_runner(program) {
        let mut command = Command::new("/proc/self/exe");
        std::os::unix::process::CommandExt::arg0(&mut command, HERD_RUNNER);
        command
    } else {
        Command::new(program)
    };
    command.args(args);
    command
}
