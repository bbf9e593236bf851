//! `kubectl-herd`, found by `kubectl` as the plugin `kubectl herd`: the library's [`run`] on
//! the process's terminal.
//!
//! [`run`]: kubectl_herd::run

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use kubectl_herd::{Io, Prompt, StdinPrompt};

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            // `eprintln!` would panic on a closed stderr.
            let _ = writeln!(std::io::stderr(), "error: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(kubectl_herd_main());
    // A question's prompt may still be reading stdin in a blocking thread: do not wait for it.
    runtime.shutdown_background();
    ExitCode::from(code)
}

async fn kubectl_herd_main() -> u8 {
    let terminal = std::io::stderr().is_terminal();
    let mut stdin_prompt = StdinPrompt;
    // Only a person at a terminal can answer; a pipe or a file on stdin cannot be asked.
    let prompt: Option<&mut dyn Prompt> =
        (terminal && std::io::stdin().is_terminal()).then_some(&mut stdin_prompt as _);
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    let mut io = Io {
        stdout: &mut stdout,
        stderr: &mut stderr,
        terminal,
        prompt,
        // Ctrl-C is caught only while this is awaited (following a Run); everywhere else it
        // ends the process as usual.
        interrupt: Box::pin(async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }),
    };
    kubectl_herd::run(std::env::args_os(), &mut io).await
}
