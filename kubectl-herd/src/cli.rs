//! The command line of `kubectl herd`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueHint};

/// Run Herd agents, follow them, answer their questions and read their results.
#[derive(Parser, Debug)]
#[command(
    name = "kubectl-herd",
    bin_name = "kubectl herd",
    version,
    after_help = "Exit codes of `run --follow`, `follow` and `result`: 0 answered, 1 failed or \
                  cancelled, 2 bad usage, 3 waiting for an answer that no terminal can give, 4 \
                  stopped by a limit (the answer is partial)."
)]
pub struct Cli {
    /// The kubeconfig file (default: KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, global = true, value_name = "CONTEXT")]
    pub context: Option<String>,
    /// The namespace (default: the context's, else `default`).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start a Run of an Agent (named `<agent>-xxxxx`) and print its name, or follow it.
    Run(RunArgs),
    /// Show a Run live until it finishes (or asks a question no terminal can answer).
    Follow {
        /// The Run.
        #[arg(value_name = "RUN")]
        run: String,
    },
    /// Answer the question a Run waits on.
    Answer {
        /// The Run.
        #[arg(value_name = "RUN")]
        run: String,
        /// The answer.
        #[arg(value_name = "TEXT")]
        text: String,
    },
    /// Print a finished Run's answer; write the files it presented with -o.
    Result {
        /// The Run.
        #[arg(value_name = "RUN")]
        run: String,
        /// Write the presented files into this folder (made if missing).
        #[arg(short = 'o', long = "output", value_name = "DIR", value_hint = ValueHint::DirPath)]
        output: Option<PathBuf>,
    },
    /// Stop a Run: its pod is deleted and its children are cancelled.
    Cancel {
        /// The Run.
        #[arg(value_name = "RUN")]
        run: String,
    },
    /// Show a Run and its children as a tree (every top-level Run without RUN).
    Get {
        /// The Run.
        #[arg(value_name = "RUN")]
        run: Option<String>,
    },
    /// Print the logs of a Run's current pod.
    Logs {
        /// The Run.
        #[arg(value_name = "RUN")]
        run: String,
        /// The container: `agent` (the agent loop) or `sandbox` (its tools).
        #[arg(short = 'c', long, value_name = "CONTAINER", default_value = "agent",
              value_parser = ["agent", "sandbox"])]
        container: String,
        /// Keep printing as the pod writes.
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Print a completion script for `kubectl-herd` in SHELL (`kubectl herd <TAB>` uses the
    /// `kubectl_complete-herd` script instead).
    Completion {
        /// The shell.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// What `kubectl_complete-herd` asks: the completions of the last of WORDS, in the format
    /// kubectl's plugin completion reads.
    #[command(name = "__complete", hide = true)]
    Complete {
        /// The words after `kubectl herd`, the last one the one to complete.
        #[arg(
            value_name = "WORDS",
            trailing_var_arg = true,
            allow_hyphen_values = true
        )]
        words: Vec<String>,
    },
}

/// `kubectl herd run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The Agent.
    #[arg(value_name = "AGENT")]
    pub agent: String,
    /// The task, as you would type it to the agent.
    #[arg(value_name = "TASK")]
    pub task: String,
    /// Show the Run live until it finishes.
    #[arg(short = 'w', long)]
    pub follow: bool,
    /// Plan mode: the agent keeps a todo list, shown while it works.
    #[arg(long)]
    pub plan: bool,
    /// A file for the agent to read, under `uploads/` (repeatable).
    #[arg(short = 'f', long = "file", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub files: Vec<PathBuf>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_files_and_flags_anywhere() {
        let cli = Cli::try_parse_from([
            "kubectl-herd",
            "run",
            "researcher",
            "Compare them.",
            "-f",
            "a.md",
            "--follow",
            "-n",
            "research",
            "--file",
            "b.pdf",
            "--plan",
        ])
        .unwrap();
        assert_eq!(cli.namespace.as_deref(), Some("research"));
        let Command::Run(args) = cli.command else {
            panic!("{:?}", cli.command);
        };
        assert_eq!(args.agent, "researcher");
        assert_eq!(args.files, [PathBuf::from("a.md"), PathBuf::from("b.pdf")]);
        assert!(args.follow && args.plan);
    }

    #[test]
    fn logs_containers_are_agent_or_sandbox() {
        let cli = Cli::try_parse_from(["kubectl-herd", "logs", "r", "-c", "sandbox"]).unwrap();
        assert!(
            matches!(cli.command, Command::Logs { container, follow: false, .. } if container == "sandbox")
        );
        assert!(Cli::try_parse_from(["kubectl-herd", "logs", "r", "-c", "shell"]).is_err());
    }

    #[test]
    fn complete_takes_any_words() {
        let cli = Cli::try_parse_from(["kubectl-herd", "__complete", "run", "-f", "--pl"]).unwrap();
        assert!(
            matches!(cli.command, Command::Complete { words } if words == ["run", "-f", "--pl"])
        );
    }
}
