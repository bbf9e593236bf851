//! Runs a container's command: a program this binary plays ([`Played`]) as this very binary
//! under that name (through `/proc/self/exe`, which names this program wherever its file is),
//! anything else from the container's `PATH`.

use std::process::Command;

use super::played::Played;

/// The command for `argv` (never empty).
pub fn command(argv: &[String]) -> Command {
    let (program, args) = argv.split_first().map_or(("", &[][..]), |(p, a)| (&**p, a));
    let mut command = match Played::of(program) {
        Some(played) => {
            let mut command = Command::new("/proc/self/exe");
            std::os::unix::process::CommandExt::arg0(&mut command, played.name());
            command
        }
        None => Command::new(program),
    };
    command.args(args);
    command
}
