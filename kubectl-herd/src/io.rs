//! Where a command's output goes and who can answer a question: the process's terminal for
//! the binary, buffers and a scripted answerer for tests that call the library in-process.

use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;

/// A boxed future, as the answerer returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Someone at a terminal who can type the answer to a question.
pub trait Prompt: Send {
    /// Reads one typed line (the question has been shown); `None` at the end of input.
    fn read_line(&mut self) -> BoxFuture<'_, Option<String>>;
}

/// A command's streams: the answer and results go to `stdout`, progress and errors to
/// `stderr`.
pub struct Io<'a> {
    /// Answers, results, tables.
    pub stdout: &'a mut (dyn Write + Send),
    /// Progress, questions, errors.
    pub stderr: &'a mut (dyn Write + Send),
    /// Whether `stderr` is a terminal: `--follow` then shows a spinner there instead of lines.
    pub terminal: bool,
    /// Who can answer a question, when someone sits at a terminal.
    pub prompt: Option<&'a mut dyn Prompt>,
    /// Resolves when the user interrupts (Ctrl-C): `--follow` stops and says the Run goes on.
    pub interrupt: BoxFuture<'a, ()>,
}

impl std::fmt::Debug for Io<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("terminal", &self.terminal)
            .field("prompt", &self.prompt.is_some())
            .finish_non_exhaustive()
    }
}

/// The answerer of a person at the terminal: `> ` on stderr, a line from stdin.
#[derive(Debug, Default)]
pub struct StdinPrompt;

impl Prompt for StdinPrompt {
    fn read_line(&mut self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async {
            tokio::task::spawn_blocking(|| {
                let mut stderr = std::io::stderr();
                let _ = write!(stderr, "> ");
                let _ = stderr.flush();
                let mut line = String::new();
                match std::io::stdin().lock().read_line(&mut line) {
                    Ok(0) | Err(_) => None,
                    Ok(_) => Some(line),
                }
            })
            .await
            .ok()
            .flatten()
        })
    }
}
