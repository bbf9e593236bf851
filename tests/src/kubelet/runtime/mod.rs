//! The container runtime: each container is a process tree of this binary's own making (see
//! `herd_sandbox::ContainerRoot`): the kubelet starts an *entry*
//! ([`entry`]), which builds the namespaces and the root and starts the *init* ([`init`]),
//! which becomes the command. Probes run through an *exec* ([`exec`]). The three are this
//! binary again, chosen by a first argument no person types.

pub mod container;
pub mod entry;
pub mod exec;
mod exec_program;
pub mod init;
pub mod played;
pub mod spec;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// `local-kubelet __container SPEC`: a container's entry.
pub const CONTAINER: &str = "__container";
/// `local-kubelet __init ARGV...`: a container's init.
pub const INIT: &str = "__init";
/// `local-kubelet __exec ENTRY CWD TIMEOUT_MS ARGV...`: a command in a running container.
pub const EXEC: &str = "__exec";

/// Runs the runtime role `args` (the command line after the program) names, if any. Call it
/// first in `main`, before any thread exists.
pub fn dispatch(args: &[String]) -> Option<ExitCode> {
    let (role, rest) = args.split_first()?;
    match role.as_str() {
        CONTAINER => Some(match rest {
            [spec] => entry::main(Path::new(spec)),
            _ => usage(),
        }),
        INIT => Some(if rest.is_empty() {
            usage()
        } else {
            init::main(rest)
        }),
        EXEC => Some(match rest {
            [entry, cwd, timeout, argv @ ..] if !argv.is_empty() => {
                match (entry.parse::<u32>(), timeout.parse::<u64>()) {
                    (Ok(entry), Ok(millis)) => {
                        exec::main(entry, Path::new(cwd), Duration::from_millis(millis), argv)
                    }
                    _ => usage(),
                }
            }
            _ => usage(),
        }),
        _ => None,
    }
}

fn usage() -> ExitCode {
    eprintln!("local-kubelet: a runtime role was started with the wrong arguments");
    ExitCode::from(2)
}
