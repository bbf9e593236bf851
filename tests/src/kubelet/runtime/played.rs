//! The programs this binary plays: a container command naming one runs `local-kubelet` itself,
//! re-executed under that name (it links both), so the Pods of the operator and of its Runs
//! run the code under test without images.

use std::path::Path;

/// A program this binary plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Played {
    /// `herd-runner` (a Run's `agent` and `sandbox` containers).
    Runner,
    /// `herd-operator` (the chart's operator container, see [`crate::kubelet::image`]).
    Operator,
}

impl Played {
    /// Every program this binary plays.
    pub const ALL: [Played; 2] = [Played::Runner, Played::Operator];

    /// The name it is started under (`argv[0]`).
    pub fn name(self) -> &'static str {
        match self {
            Played::Runner => "herd-runner",
            Played::Operator => "herd-operator",
        }
    }

    /// The program `program` names, bare or by a path (`/herd-operator`, the operator image's
    /// entrypoint), if this binary plays it.
    pub fn of(program: &str) -> Option<Played> {
        let file = Path::new(program).file_name()?;
        Played::ALL.into_iter().find(|p| file == p.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn played_programs_are_recognised_bare_or_by_path() {
        assert_eq!(Played::of("herd-runner"), Some(Played::Runner));
        assert_eq!(
            Played::of("/usr/local/bin/herd-runner"),
            Some(Played::Runner)
        );
        assert_eq!(Played::of("/herd-operator"), Some(Played::Operator));
        assert_eq!(Played::of("herd-operator"), Some(Played::Operator));
        for other in ["herd-runner-2", "herd-operator.sh", "sh", "", "/"] {
            assert_eq!(Played::of(other), None, "{other:?}");
        }
    }
}
