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
    /// Start a Run of an Agent (named `<agent>-xxxxx`) and print its name, follow it or wait
    /// for it; or create the Run a manifest describes (-f).
    Run(Box<RunArgs>),
    /// Show a Run live until it finishes (or asks a question no terminal can answer).
    Follow(WhichRun),
    /// Answer the question a Run waits on.
    Answer {
        /// The Run.
        #[arg(value_name = "RUN")]
        run: String,
        /// The answer.
        #[arg(value_name = "TEXT")]
        text: String,
    },
    /// Approve a tool call the Run holds for approval: it runs as the model sent it.
    Approve {
        /// The Run.
        #[arg(value_name = "RUN")]
        run: String,
        /// The approval request's id (`status.report.approvals[].id`); without, the Run's only
        /// one.
        #[arg(value_name = "ID")]
        id: Option<String>,
    },
    /// Deny a tool call the Run holds for approval: the model reads `denied by a person:
    /// <reason>` and goes on.
    Deny {
        /// The Run.
        #[arg(value_name = "RUN")]
        run: String,
        /// The approval request's id (`status.report.approvals[].id`); without, the Run's only
        /// one.
        #[arg(value_name = "ID")]
        id: Option<String>,
        /// Why, for the model (and the Run's Event).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Print a finished Run's answer; write the files it presented with -o.
    Result {
        /// The Run.
        #[command(flatten)]
        which: WhichRun,
        /// Write the presented files into this folder (made if missing).
        #[arg(short = 'o', long = "output", value_name = "DIR", value_hint = ValueHint::DirPath)]
        output: Option<PathBuf>,
    },
    /// Stop a Run: its pod (if it has one) is deleted and its children are cancelled.
    Cancel(WhichRun),
    /// List Runs with their children under them as a tree (every top-level Run without RUN).
    #[command(visible_alias = "list")]
    Get(GetArgs),
    /// Show everything about a Run: its spec, conditions, question, todos, usage, children,
    /// files, Pod and Events.
    Describe(DescribeArgs),
    /// Delete Runs (their children, Pods and ConfigMaps go with them).
    Delete(DeleteArgs),
    /// Print the logs of a Run's current pod.
    Logs {
        /// The Run.
        #[command(flatten)]
        which: WhichRun,
        /// The container: `agent` (the agent loop) or `sandbox` (its tools).
        #[arg(short = 'c', long, value_name = "CONTAINER", default_value = "agent",
              value_parser = ["agent", "sandbox"])]
        container: String,
        /// Keep printing as the pod writes (as `kubectl logs -f`).
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// List the Agents: ready or not (and why), model, skills and the references missing.
    Agents(CatalogArgs),
    /// List the Skills: ready or not, enabled, description.
    Skills(CatalogArgs),
    /// Create a Schedule: a Run of AGENT with TASK at every slot of --cron (or once, --at).
    Schedule(Box<ScheduleArgs>),
    /// Start a Schedule's Run now (labelled herd.dev/trigger: manual), whatever its timetable.
    Trigger {
        /// The Schedule.
        #[arg(value_name = "SCHEDULE")]
        schedule: String,
    },
    /// List the Schedules: timetable, Runs going, last and next slot, ready or not.
    Schedules(CatalogArgs),
    /// List the Budgets: window, used and limit of the tightest limit, exceeded or not, reset
    /// (also `get budgets`).
    Budgets(CatalogArgs),
    /// Serve a web dashboard on 127.0.0.1 with your kubeconfig's rights: Runs live, their
    /// trees, questions, results and logs; Agents, Skills and Schedules (Ctrl-C stops it).
    Dashboard(DashboardArgs),
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

/// The one Run a command works on: named, or `--last`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct WhichRun {
    /// The Run.
    #[arg(
        value_name = "RUN",
        required_unless_present = "last",
        conflicts_with = "last"
    )]
    pub run: Option<String>,
    /// The newest top-level Run of the namespace instead of RUN (as `tkn pr logs --last`).
    #[arg(long)]
    pub last: bool,
}

/// Which Runs a listing looks at: `-A`, `-l`, `--field-selector`, as kubectl's.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Every namespace (a NAMESPACE column is added).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only Runs with these labels, e.g. `-l herd.dev/user=alice` (as kubectl's -l).
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Only Runs whose fields match, e.g. `--field-selector spec.agentRef.name=researcher`
    /// (`metadata.name`, `metadata.namespace`, `spec.agentRef.name`, `spec.parentRef.name`).
    #[arg(long, value_name = "SELECTOR")]
    pub field_selector: Option<String>,
}

/// `kubectl herd get` (and `list`).
#[derive(Args, Debug, Clone)]
pub struct GetArgs {
    /// The Runs (with their children); every top-level Run without.
    #[arg(value_name = "RUN", conflicts_with = "last")]
    pub run: Vec<String>,
    /// Which Runs.
    #[command(flatten)]
    pub selection: Selection,
    /// The newest top-level Run (and its children).
    #[arg(long)]
    pub last: bool,
    /// At most N top-level Runs, the newest (each with its children).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Order by this field (a JSONPath as kubectl's, e.g. `.status.startTime`) instead of
    /// creation.
    #[arg(long, value_name = "PATH", value_parser = crate::jsonpath::Template::sort_path)]
    pub sort_by: Option<crate::jsonpath::Template>,
    /// Output format: json, yaml, name, wide or jsonpath=TEMPLATE (default: the tree table).
    #[arg(short = 'o', long, value_name = "FORMAT", value_parser = crate::output::parse_output)]
    pub output: Option<crate::output::Output>,
    /// After the list, print each change as it happens (as `kubectl get -w`; Ctrl-C ends).
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// `kubectl herd describe`.
#[derive(Args, Debug, Clone)]
pub struct DescribeArgs {
    /// The Run.
    #[command(flatten)]
    pub which: WhichRun,
}

/// `kubectl herd delete`.
#[derive(Args, Debug, Clone)]
pub struct DeleteArgs {
    /// The Runs.
    #[arg(value_name = "RUN", required_unless_present_any = ["all", "selector"])]
    pub run: Vec<String>,
    /// Every Run of the namespace.
    #[arg(long, conflicts_with_all = ["run", "selector"])]
    pub all: bool,
    /// The Runs with these labels.
    #[arg(short = 'l', long, value_name = "SELECTOR", conflicts_with = "run")]
    pub selector: Option<String>,
}

/// `kubectl herd schedule`.
#[derive(Args, Debug, Clone)]
pub struct ScheduleArgs {
    /// The Schedule's name (at most 52 characters: its Runs add the slot's time).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Five cron fields (e.g. "0 9 * * 1-5"), a macro such as @daily, or "@every 15m".
    #[arg(long = "cron", value_name = "EXPR", conflicts_with = "at")]
    pub cron: Option<String>,
    /// One time instead of a timetable, RFC 3339 (e.g. 2026-03-01T09:00:00+01:00).
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    /// The IANA time zone of --cron (default UTC), e.g. Europe/Berlin.
    #[arg(long = "tz", value_name = "ZONE")]
    pub time_zone: Option<String>,
    /// What a slot does while a Run goes: Allow, Forbid (skip) or Replace (cancel it).
    #[arg(long, value_name = "POLICY", default_value = "Allow",
          value_parser = ["Allow", "Forbid", "Replace"])]
    pub concurrency_policy: String,
    /// Seconds after a slot within which its Run may still start.
    #[arg(long, value_name = "SECONDS")]
    pub starting_deadline_seconds: Option<u32>,
    /// Create it suspended: no Run until `suspend` is set back to false.
    #[arg(long)]
    pub suspend: bool,
    /// The Agent of each Run.
    #[arg(value_name = "AGENT")]
    pub agent: String,
    /// The task of each Run.
    #[arg(value_name = "TASK")]
    pub task: String,
}

/// `kubectl herd agents` and `skills`.
#[derive(Args, Debug, Clone)]
pub struct CatalogArgs {
    /// Only these (all of the namespace without).
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only those with these labels.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Output format: json, yaml, name, wide or jsonpath=TEMPLATE.
    #[arg(short = 'o', long, value_name = "FORMAT", value_parser = crate::output::parse_output)]
    pub output: Option<crate::output::Output>,
}

/// `kubectl herd dashboard`.
#[derive(Args, Debug, Clone)]
pub struct DashboardArgs {
    /// Every namespace (as far as your RBAC lets you list them).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// The port on 127.0.0.1 (0: any free one).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub port: u16,
    /// Print the URL without opening a browser.
    #[arg(long)]
    pub no_open: bool,
}

/// Where `--dry-run` stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DryRun {
    /// Print the Run without sending it.
    Client,
    /// Send it for the API server to check (admission, validation), without creating it.
    Server,
}

/// `kubectl herd run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The Agent.
    #[arg(value_name = "AGENT", required_unless_present = "filename")]
    pub agent: Option<String>,
    /// The task, as you would type it to the agent.
    #[arg(value_name = "TASK", required_unless_present = "filename")]
    pub task: Option<String>,
    /// Create the Run this manifest (YAML or JSON) describes instead, as `kubectl create -f`
    /// (`-` reads stdin).
    #[arg(short = 'f', long, value_name = "FILE", value_hint = ValueHint::FilePath,
          conflicts_with_all = ["agent", "task", "plan", "thinking", "model", "timeout",
                                "input_timeout", "ttl", "inputs", "name", "generate_name"])]
    pub filename: Option<PathBuf>,
    /// Show the Run live until it finishes (`-w` is not this: in kubectl it means watch).
    #[arg(long)]
    pub follow: bool,
    /// Wait until the Run finishes without showing progress; print its answer. Fails at once
    /// when the Agent is not ready.
    #[arg(long, conflicts_with = "follow")]
    pub wait: bool,
    /// Plan mode: the agent keeps a todo list, shown while it works.
    #[arg(long)]
    pub plan: bool,
    /// Let the model think before it answers (`spec.thinking`).
    #[arg(long)]
    pub thinking: bool,
    /// Another model than the Agent's (`spec.model.name`).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The Run's time limit, e.g. `30m` (`spec.timeout`).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// How long a question may wait for an answer, e.g. `2h` (`spec.inputTimeout`).
    #[arg(long, value_name = "DURATION")]
    pub input_timeout: Option<String>,
    /// Delete the Run this long after it finished, e.g. `1h`
    /// (`spec.ttlSecondsAfterFinished`).
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    /// A label of the Run, e.g. `-l herd.dev/user=alice` (the memory scope); repeatable.
    #[arg(short = 'l', long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// A file for the agent to read, under `uploads/` (repeatable).
    #[arg(long = "input", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub inputs: Vec<PathBuf>,
    /// The Run's name (default: `<agent>-xxxxx`).
    #[arg(long, value_name = "NAME", conflicts_with = "generate_name")]
    pub name: Option<String>,
    /// The prefix of the Run's generated name (default: `<agent>-`).
    #[arg(long, value_name = "PREFIX")]
    pub generate_name: Option<String>,
    /// Print the Run instead of creating it: `client` (default) as it would be sent,
    /// `server` as the API server would store it.
    #[arg(long, value_name = "WHERE", num_args = 0..=1, default_missing_value = "client",
          require_equals = true, conflicts_with_all = ["follow", "wait"])]
    pub dry_run: Option<DryRun>,
    /// Print the created Run in this format (json, yaml, name) instead of its name (not with
    /// --follow or --wait, which print its answer).
    #[arg(short = 'o', long, value_name = "FORMAT", value_parser = crate::output::parse_output,
          conflicts_with_all = ["follow", "wait"])]
    pub output: Option<crate::output::Output>,
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
            "--input",
            "a.md",
            "--follow",
            "-n",
            "research",
            "--input",
            "b.pdf",
            "--plan",
            "-l",
            "herd.dev/user=alice",
        ])
        .unwrap();
        assert_eq!(cli.namespace.as_deref(), Some("research"));
        let Command::Run(args) = cli.command else {
            panic!("{:?}", cli.command);
        };
        assert_eq!(args.agent.as_deref(), Some("researcher"));
        assert_eq!(args.inputs, [PathBuf::from("a.md"), PathBuf::from("b.pdf")]);
        assert_eq!(args.labels, ["herd.dev/user=alice"]);
        assert!(args.follow && args.plan);
    }

    #[test]
    fn run_dash_f_is_a_manifest_as_in_kubectl() {
        let cli = Cli::try_parse_from(["kubectl-herd", "run", "-f", "run.yaml", "--wait"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("{:?}", cli.command);
        };
        assert_eq!(args.filename, Some(PathBuf::from("run.yaml")));
        assert!(args.wait && args.agent.is_none());
        for refused in [
            vec!["run", "-f", "run.yaml", "helper", "Go."],
            vec!["run", "helper"],
            vec!["run", "helper", "Go.", "-w"],
            vec!["run", "helper", "Go.", "--follow", "--wait"],
            vec!["run", "helper", "Go.", "--dry-run", "--follow"],
            vec!["run", "helper", "Go.", "--wait", "-o", "json"],
        ] {
            let args = std::iter::once("kubectl-herd").chain(refused.iter().copied());
            assert!(Cli::try_parse_from(args).is_err(), "{refused:?}");
        }
        let dry = Cli::try_parse_from(["kubectl-herd", "run", "a", "t", "--dry-run", "-o", "yaml"])
            .unwrap();
        assert!(matches!(dry.command, Command::Run(args) if args.dry_run == Some(DryRun::Client)));
    }

    #[test]
    fn get_takes_kubectls_listing_flags() {
        let cli = Cli::try_parse_from([
            "kubectl-herd",
            "list",
            "-A",
            "-l",
            "a=b",
            "--field-selector",
            "spec.agentRef.name=x",
            "--limit",
            "3",
            "--sort-by",
            ".status.startTime",
            "-o",
            "wide",
            "-w",
        ])
        .unwrap();
        let Command::Get(args) = cli.command else {
            panic!("{:?}", cli.command);
        };
        assert!(args.selection.all_namespaces && args.watch);
        assert_eq!(args.selection.selector.as_deref(), Some("a=b"));
        assert_eq!(args.limit, Some(3));
        assert_eq!(args.output, Some(crate::output::Output::Wide));
        assert!(Cli::try_parse_from(["kubectl-herd", "get", "-o", "table"]).is_err());
        assert!(Cli::try_parse_from(["kubectl-herd", "get", "r", "--last"]).is_err());
    }

    #[test]
    fn one_run_is_named_or_the_last() {
        let cli = Cli::try_parse_from(["kubectl-herd", "describe", "--last"]).unwrap();
        assert!(matches!(cli.command, Command::Describe(d) if d.which.last));
        assert!(Cli::try_parse_from(["kubectl-herd", "follow"]).is_err());
        assert!(Cli::try_parse_from(["kubectl-herd", "cancel", "r", "--last"]).is_err());
        assert!(Cli::try_parse_from(["kubectl-herd", "delete"]).is_err());
        assert!(Cli::try_parse_from(["kubectl-herd", "delete", "--all"]).is_ok());
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
