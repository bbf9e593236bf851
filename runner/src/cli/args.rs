//! Command-line arguments of `herd-runner`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::log::LogFormat;
use crate::runtime::local_sandbox::SandboxMode;

/// Herd's runner: DeerFlow's lead agent, on a laptop or in a Run's pod.
#[derive(Parser, Debug)]
#[command(name = "herd-runner", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// What to run.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run an agent locally from the same manifests you apply to a cluster.
    Run(Box<RunArgs>),
    /// Serve sandbox tools on a unix socket (the pod's `sandbox` container).
    Sandbox(SandboxArgs),
    /// List the local runs under `$XDG_DATA_HOME/herd/runs/`, newest first: id, status, age
    /// and task.
    Runs(RunsArgs),
    /// Run a Run's lead agent in its pod's `agent` container: the config from the operator's
    /// run API, the tools in the `sandbox` container. Everything comes from the environment
    /// the operator sets (`HERD_API_URL`, `HERD_TOKEN_FILE`, `HERD_CA_FILE`, `HERD_RUN_*`...).
    Pod,
}

/// `herd-runner run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Manifest files: one Agent, any Skills, ConfigMaps referenced by `soulFrom` or
    /// `model.scriptFrom`, Secrets referenced by MCP `headers` (labelled
    /// `herd.dev/model-credentials: "true"`), and optionally a Run (whose task, planMode,
    /// thinking and model override apply). Multi-document YAML is fine.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// The task. Required unless a Run manifest gives one or `--resume` is used.
    pub task: Option<String>,

    /// Model name, overriding the Agent's (like a Run's `spec.model.name`).
    #[arg(long)]
    pub model: Option<String>,

    /// Environment variable holding the model API key (default: OPENAI_API_KEY or
    /// ANTHROPIC_API_KEY, by provider).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,

    /// Model endpoint, overriding the Agent's `model.baseURL`.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// Plan mode: the agent keeps a todo list.
    #[arg(long)]
    pub plan: bool,

    /// Ask the model to think (when it supports it).
    #[arg(long)]
    pub thinking: bool,

    /// Folder for the run's files (`user-data/{workspace,uploads,outputs}`, checkpoints).
    /// Default: a new folder under `$XDG_DATA_HOME/herd/runs/` (`~/.local/share/herd/runs/`),
    /// listed by `herd-runner runs`.
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,

    /// Files to place in `uploads/` (like a Run's `inputs`).
    #[arg(long = "input", value_name = "FILE")]
    pub inputs: Vec<PathBuf>,

    /// Print events and the result as JSON lines on stdout.
    #[arg(long)]
    pub json: bool,

    /// How raw log lines are printed: `text` only with `HERD_LOG` set (otherwise warnings show
    /// once each among the progress lines), `json` as JSON lines on stderr, filtered by
    /// `HERD_LOG` (default `warn`).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Never ask on the terminal (a question, or whether a tool call may run): save a
    /// checkpoint and exit with code 3 instead.
    #[arg(long)]
    pub non_interactive: bool,

    /// Continue a run that stopped for a question (with `--answer`) or was interrupted
    /// (Ctrl-C, SIGTERM): its work folder, or its id in `herd-runner runs`.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,

    /// The answer to the question of the run being resumed.
    #[arg(long, requires = "resume")]
    pub answer: Option<String>,

    /// Approves the tool call the resumed run waits for under this id (it runs as the model
    /// sent it); repeat for several.
    #[arg(long, value_name = "ID", requires = "resume")]
    pub approve: Vec<String>,

    /// Denies the tool call the resumed run waits for under this id (the model reads
    /// `denied by a person: <reason>`); repeat for several.
    #[arg(long, value_name = "ID", requires = "resume")]
    pub deny: Vec<String>,

    /// Why the tool calls of `--deny` are denied.
    #[arg(long, requires = "deny")]
    pub reason: Option<String>,

    /// Folder for agent memory (default: `$HERD_HOME/memory`, `~/.herd/memory`).
    #[arg(long, value_name = "DIR")]
    pub memory_dir: Option<PathBuf>,

    /// Where the tools run: `strict` confines them as in a pod's sandbox container (Linux user
    /// and mount namespaces, then Landlock: the host read-only, the home folder hidden, the
    /// work folder at /mnt/user-data, a private /tmp) or refuses to run; `landlock` confines
    /// them with Landlock alone, for where user namespaces are refused (inside a container):
    /// the host read-only, writes only to the work folder and /tmp, but no private mounts, so
    /// the home folder stays readable; `auto` takes the first of these that works here and
    /// says so, else runs them unconfined with a warning; `off` runs them unconfined in this
    /// process.
    #[arg(long, value_enum, default_value_t = SandboxMode::Auto)]
    pub sandbox: SandboxMode,
}

/// `herd-runner runs`.
#[derive(Args, Debug)]
pub struct RunsArgs {
    /// Print one JSON object per run instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `herd-runner sandbox`.
#[derive(Args, Debug)]
pub struct SandboxArgs {
    /// The unix socket to serve on.
    #[arg(
        long,
        env = "HERD_SANDBOX_SOCKET",
        default_value = "/run/herd/sandbox.sock"
    )]
    pub socket: PathBuf,

    /// Where `user-data/` and `skills/` are mounted.
    #[arg(long, env = "HERD_ROOT", default_value = "/mnt")]
    pub root: PathBuf,

    /// Serve on the listening socket given as standard input instead of binding `--socket`
    /// (how `herd-runner run` starts its confined sandbox).
    #[arg(long, hide = true)]
    pub listen_stdin: bool,

    /// Check that a sandbox answers on `--socket` and exit: 0 if it does, 1 if not (the
    /// Pod's startup probe).
    #[arg(long, conflicts_with = "listen_stdin")]
    pub ready: bool,
}
