//! The signal that stops a local run at its next safe point: the lead's model stream and tool
//! are cancelled, the tools' processes get SIGTERM then SIGKILL, and the thread is saved as a
//! checkpoint that `--resume` continues from.

use futures::future::{BoxFuture, Shared};

/// Which signal stopped the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl StopSignal {
    /// Its name, as `kill -l` spells it with the prefix.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }

    /// The exit code a shell reports for a process it ended: 128 + the signal's number.
    pub fn exit_code(self) -> u8 {
        match self {
            StopSignal::Interrupt => 130,
            StopSignal::Terminate => 143,
        }
    }
}

/// Resolves with the first stop signal; shared, so every part of the run can watch it.
pub type Interrupt = Shared<BoxFuture<'static, StopSignal>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_what_a_shell_reports() {
        assert_eq!(StopSignal::Interrupt.exit_code(), 128 + 2);
        assert_eq!(StopSignal::Terminate.exit_code(), 128 + 15);
        assert_eq!(StopSignal::Interrupt.name(), "SIGINT");
        assert_eq!(StopSignal::Terminate.name(), "SIGTERM");
    }
}
