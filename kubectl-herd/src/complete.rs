//! Completion for `kubectl herd <TAB>`: kubectl (1.26 and later) runs the executable
//! `kubectl_complete-herd` on PATH with the words after `herd`, the last one being completed,
//! and reads one candidate a line (`value<TAB>description`), then `:<directive>` (Cobra's
//! ShellCompDirective). That script calls `kubectl-herd __complete -- WORDS`. What to offer is
//! decided from clap's description of the command line ([`complete`]); Run, Agent, namespace
//! and context names are then read from the cluster and the kubeconfig.

use std::fmt::Write as _;
use std::time::Duration;

use clap::{Arg, Command, ValueHint};
use herd_crds::agent::Agent;
use herd_crds::run::Run;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::connect::{Connection, connect};
use crate::io::Io;
use crate::outcome::{Outcome, outcome};

/// Cobra's directive: complete file names (no candidates given).
pub const FILES: u32 = 0;
/// Cobra's directive: offer nothing but the candidates.
pub const NO_FILES: u32 = 4;
/// Cobra's directive: complete folder names.
pub const DIRS: u32 = 16;

/// Names to read from the cluster or the kubeconfig.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Noun {
    /// Runs, those `filter` keeps.
    Runs(RunFilter),
    /// Agents.
    Agents,
    /// Namespaces.
    Namespaces,
    /// The kubeconfig's contexts.
    Contexts,
}

/// Which Runs a command takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunFilter {
    /// Any Run.
    All,
    /// Runs waiting for an answer (`answer`).
    Waiting,
    /// Runs not finished (`follow`, `cancel`).
    Going,
    /// Runs with an answer (`result`).
    Answered,
    /// Runs holding tool calls for approval (`approve`, `deny`).
    Approving,
}

impl RunFilter {
    /// Whether `run` is one of the Runs the filter keeps.
    fn keeps(self, run: &Run) -> bool {
        if self == RunFilter::Approving {
            return !crate::approve::pending_approvals(run).is_empty();
        }
        matches!(
            (self, outcome(run)),
            (RunFilter::All, _)
                | (RunFilter::Waiting, Outcome::Waiting(_))
                | (RunFilter::Going, Outcome::Going | Outcome::Waiting(_))
                | (RunFilter::Answered, Outcome::Answered(_))
        )
    }
}

/// One candidate and its description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// What to insert.
    pub value: String,
    /// What it is, shown next to it.
    pub help: Option<String>,
}

/// What to offer for the last word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Fixed candidates (subcommands, flags, values), already filtered by the typed prefix.
    pub candidates: Vec<Candidate>,
    /// Names to look up and offer, filtered by `prefix`.
    pub noun: Option<Noun>,
    /// The typed part of the word being completed.
    pub prefix: String,
    /// Cobra's directive for the shell.
    pub directive: u32,
    /// `-n` as typed among the words.
    pub namespace: Option<String>,
    /// `--context` as typed among the words.
    pub context: Option<String>,
    /// `--kubeconfig` as typed among the words.
    pub kubeconfig: Option<String>,
}

/// The argument of `command` (or a global one of `root`) that `word` names: `--long`, `-s`
/// (only its first letter counts for a bundle like `-nfoo`).
fn find_flag<'c>(root: &'c Command, command: &'c Command, word: &str) -> Option<&'c Arg> {
    let args = || command.get_arguments().chain(root.get_arguments());
    if let Some(long) = word.strip_prefix("--") {
        let long = long.split('=').next().unwrap_or_default();
        return args().find(|a| a.get_long() == Some(long));
    }
    let short = word.strip_prefix('-')?.chars().next()?;
    args().find(|a| a.get_short() == Some(short))
}

/// Whether `arg` takes a value.
fn takes_value(arg: &Arg) -> bool {
    arg.get_num_args().is_some_and(|n| n.takes_values()) || arg.get_action().takes_values()
}

/// Whether `word` is a flag that takes its value from the next word.
fn wants_next(arg: &Arg, word: &str) -> bool {
    if !takes_value(arg) {
        return false;
    }
    if word.starts_with("--") {
        !word.contains('=')
    } else {
        word.chars().count() == 2
    }
}

/// The one-line help of `command`.
fn about(command: &Command) -> Option<String> {
    command.get_about().map(|a| a.to_string())
}

/// What to offer for the last of `words` (the words after `kubectl herd`), given the command
/// line `root` (built: `Command::build` adds `help` and `--help` and spreads global flags).
pub fn complete(root: &Command, words: &[String]) -> Completion {
    let (current, before) = match words.split_last() {
        Some((last, before)) => (last.as_str(), before),
        None => ("", words),
    };
    let mut completion = Completion {
        candidates: Vec::new(),
        noun: None,
        prefix: current.to_owned(),
        directive: NO_FILES,
        namespace: None,
        context: None,
        kubeconfig: None,
    };
    if let Some(place) = walk(root, before, &mut completion) {
        offer(root, &place, current, &mut completion);
    }
    completion
}

/// Where the words before the last one leave the command line.
struct Place<'c> {
    /// The subcommand chosen, or `root` before one is.
    command: &'c Command,
    /// Whether a subcommand was chosen.
    chosen: bool,
    /// Positional words given to the subcommand.
    positionals: usize,
    /// The flag whose value the last word is.
    pending: Option<&'c Arg>,
    /// `--` was given: every word after it is positional.
    only_positionals: bool,
}

/// Reads `words` the way clap would, keeping the connection flags in `completion`; `None`
/// when a word names no subcommand (nothing to offer).
fn walk<'c>(root: &'c Command, words: &[String], completion: &mut Completion) -> Option<Place<'c>> {
    let mut place = Place {
        command: root,
        chosen: false,
        positionals: 0,
        pending: None,
        only_positionals: false,
    };
    for word in words {
        if let Some(arg) = place.pending.take() {
            remember(completion, arg, word);
            continue;
        }
        if !place.only_positionals && word == "--" {
            place.only_positionals = true;
        } else if !place.only_positionals && word.starts_with('-') && word.len() > 1 {
            if let Some(arg) = find_flag(root, place.command, word) {
                if wants_next(arg, word) {
                    place.pending = Some(arg);
                } else if let Some(value) = inline_value(arg, word) {
                    remember(completion, arg, &value);
                }
            }
        } else if !place.chosen {
            place.command = place.command.find_subcommand(word)?;
            place.chosen = true;
        } else {
            place.positionals += 1;
        }
    }
    Some(place)
}

/// Fills `completion` for the word `current` typed at `place`: a flag's values, flags,
/// subcommands, or what the next positional takes.
fn offer(root: &Command, place: &Place<'_>, current: &str, completion: &mut Completion) {
    if let Some(arg) = place.pending {
        values(completion, arg);
    } else if !place.only_positionals && current.starts_with('-') {
        completion.candidates = flags(root, place.command, current);
    } else if !place.chosen {
        completion.candidates = root
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name().starts_with(current))
            .map(|s| Candidate {
                value: s.get_name().to_owned(),
                help: about(s),
            })
            .collect();
    } else if let Some(arg) = place.command.get_positionals().nth(place.positionals) {
        let command = place.command.get_name();
        match arg.get_id().as_str() {
            "run" => completion.noun = Some(Noun::Runs(run_filter(command))),
            "agent" => completion.noun = Some(Noun::Agents),
            "names" if command == "agents" => completion.noun = Some(Noun::Agents),
            _ => values(completion, arg),
        }
    }
}

/// The `--long` flags of `command` and the global ones starting with `current`, each once.
fn flags(root: &Command, command: &Command, current: &str) -> Vec<Candidate> {
    let mut flags: Vec<Candidate> = command
        .get_arguments()
        .chain(root.get_arguments().filter(|a| a.is_global_set()))
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            a.get_long().map(|long| Candidate {
                value: format!("--{long}"),
                help: a.get_help().map(|h| h.to_string()),
            })
        })
        .filter(|c| c.value.starts_with(current))
        .collect();
    let mut seen = std::collections::HashSet::new();
    flags.retain(|c| seen.insert(c.value.clone()));
    flags
}

/// The value of `--long=value` or `-svalue`.
fn inline_value(arg: &Arg, word: &str) -> Option<String> {
    if !takes_value(arg) {
        return None;
    }
    match word.strip_prefix("--") {
        Some(long) => long.split_once('=').map(|(_, v)| v.to_owned()),
        None => Some(word.chars().skip(2).collect()),
    }
}

/// Keeps the connection flags the words give, for the look-ups.
fn remember(completion: &mut Completion, arg: &Arg, value: &str) {
    match arg.get_id().as_str() {
        "namespace" => completion.namespace = Some(value.to_owned()),
        "context" => completion.context = Some(value.to_owned()),
        "kubeconfig" => completion.kubeconfig = Some(value.to_owned()),
        _ => {}
    }
}

/// What to offer as `arg`'s value.
fn values(completion: &mut Completion, arg: &Arg) {
    match arg.get_id().as_str() {
        "namespace" => completion.noun = Some(Noun::Namespaces),
        "context" => completion.noun = Some(Noun::Contexts),
        _ => {}
    }
    match arg.get_value_hint() {
        ValueHint::FilePath | ValueHint::AnyPath => completion.directive = FILES,
        ValueHint::DirPath => completion.directive = DIRS,
        _ => {}
    }
    let current = completion.prefix.clone();
    completion.candidates = arg
        .get_possible_values()
        .into_iter()
        .filter(|v| !v.is_hide_set() && v.get_name().starts_with(&current))
        .map(|v| Candidate {
            value: v.get_name().to_owned(),
            help: v.get_help().map(|h| h.to_string()),
        })
        .collect();
}

/// The Runs `command` takes.
fn run_filter(command: &str) -> RunFilter {
    match command {
        "answer" => RunFilter::Waiting,
        "approve" | "deny" => RunFilter::Approving,
        "follow" | "cancel" => RunFilter::Going,
        "result" => RunFilter::Answered,
        _ => RunFilter::All,
    }
}

/// The candidates and directive as kubectl reads them.
pub fn render(candidates: &[Candidate], directive: u32) -> String {
    let mut out = String::new();
    for candidate in candidates {
        let value = herd_crds::terminal_text::one_line(&candidate.value);
        match &candidate.help {
            Some(help) => {
                let first = help.lines().next().unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{value}\t{}",
                    herd_crds::terminal_text::one_line(first)
                );
            }
            None => {
                let _ = writeln!(out, "{value}");
            }
        }
    }
    let _ = writeln!(out, ":{directive}");
    out
}

/// How long a look-up may take before the shell gets no names (a slow cluster must not hang
/// the prompt).
const LOOKUP: Duration = Duration::from_secs(5);

/// `__complete`: prints the completions of the last of `words`. Look-up failures give no names
/// rather than an error: there is nowhere to show one.
pub async fn print(root: &Command, words: &[String], given: Connection<'_>, io: &mut Io<'_>) {
    let mut completion = complete(root, words);
    if let Some(noun) = completion.noun {
        let kubeconfig = completion.kubeconfig.as_deref().map(std::path::Path::new);
        let connection = Connection {
            kubeconfig: kubeconfig.or(given.kubeconfig),
            context: completion.context.as_deref().or(given.context),
            namespace: completion.namespace.as_deref().or(given.namespace),
        };
        let names = tokio::time::timeout(LOOKUP, names(noun, connection))
            .await
            .unwrap_or_default();
        completion.candidates.extend(
            names
                .into_iter()
                .filter(|n| n.starts_with(&completion.prefix))
                .map(|value| Candidate { value, help: None }),
        );
    }
    let _ = write!(
        io.stdout,
        "{}",
        render(&completion.candidates, completion.directive)
    );
}

/// The names of `noun` read from the cluster or the kubeconfig; none when they cannot be read.
async fn names(noun: Noun, connection: Connection<'_>) -> Vec<String> {
    if noun == Noun::Contexts {
        let file = match connection.kubeconfig {
            Some(path) => kube::config::Kubeconfig::read_from(path),
            None => kube::config::Kubeconfig::read(),
        };
        return file
            .map(|k| k.contexts.into_iter().map(|c| c.name).collect())
            .unwrap_or_default();
    }
    let Ok(cluster) = connect(connection).await else {
        return Vec::new();
    };
    let client = cluster.client;
    let params = ListParams::default();
    match noun {
        Noun::Runs(filter) => Api::<Run>::namespaced(client, &cluster.namespace)
            .list(&params)
            .await
            .map(|l| {
                l.items
                    .iter()
                    .filter(|r| filter.keeps(r))
                    .map(ResourceExt::name_any)
                    .collect()
            })
            .unwrap_or_default(),
        Noun::Agents => Api::<Agent>::namespaced(client, &cluster.namespace)
            .list(&params)
            .await
            .map(|l| l.items.iter().map(ResourceExt::name_any).collect())
            .unwrap_or_default(),
        Noun::Namespaces => Api::<Namespace>::all(client)
            .list(&params)
            .await
            .map(|l| l.items.iter().map(ResourceExt::name_any).collect())
            .unwrap_or_default(),
        Noun::Contexts => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use herd_crds::condition::ConditionStatus;

    use super::*;
    use crate::cli::Cli;
    use crate::testing::{question_run, run_with};

    fn at(words: &[&str]) -> Completion {
        let words: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
        let mut root = Cli::command();
        root.build();
        complete(&root, &words)
    }

    fn values_of(completion: &Completion) -> Vec<&str> {
        completion
            .candidates
            .iter()
            .map(|c| c.value.as_str())
            .collect()
    }

    #[test]
    fn the_first_word_is_a_command() {
        let all = at(&[""]);
        assert_eq!(
            values_of(&all),
            [
                "run",
                "follow",
                "answer",
                "approve",
                "deny",
                "result",
                "cancel",
                "get",
                "describe",
                "delete",
                "logs",
                "agents",
                "skills",
                "schedule",
                "trigger",
                "schedules",
                "budgets",
                "dashboard",
                "completion",
                "help"
            ]
        );
        assert_eq!(all.directive, NO_FILES);
        assert!(
            all.candidates[0]
                .help
                .as_deref()
                .is_some_and(|h| h.starts_with("Start a Run"))
        );
        assert_eq!(values_of(&at(&["r"])), ["run", "result"]);
        assert_eq!(values_of(&at(&[])), values_of(&all), "nothing typed yet");
        assert!(
            values_of(&at(&["__"])).is_empty(),
            "the hidden command is not offered"
        );
    }

    #[test]
    fn positionals_are_runs_and_agents() {
        assert_eq!(at(&["run", ""]).noun, Some(Noun::Agents));
        assert_eq!(
            at(&["run", "helper", ""]).noun,
            None,
            "the task is free text"
        );
        assert_eq!(
            at(&["answer", "pa"]).noun,
            Some(Noun::Runs(RunFilter::Waiting))
        );
        assert_eq!(at(&["answer", "pa"]).prefix, "pa");
        assert_eq!(at(&["answer", "paint", ""]).noun, None);
        assert_eq!(at(&["cancel", ""]).noun, Some(Noun::Runs(RunFilter::Going)));
        assert_eq!(
            at(&["deny", ""]).noun,
            Some(Noun::Runs(RunFilter::Approving))
        );
        assert_eq!(at(&["follow", ""]).noun, Some(Noun::Runs(RunFilter::Going)));
        assert_eq!(
            at(&["result", ""]).noun,
            Some(Noun::Runs(RunFilter::Answered))
        );
        assert_eq!(at(&["get", ""]).noun, Some(Noun::Runs(RunFilter::All)));
        assert_eq!(at(&["logs", ""]).noun, Some(Noun::Runs(RunFilter::All)));
        assert_eq!(values_of(&at(&["completion", "z"])), ["zsh"]);
        assert_eq!(at(&["nonsense", ""]).candidates, vec![]);
    }

    #[test]
    fn flags_and_their_values() {
        let flags = at(&["run", "helper", "--"]);
        let flags = values_of(&flags);
        for flag in [
            "--follow",
            "--plan",
            "--input",
            "--filename",
            "--namespace",
            "--kubeconfig",
            "--context",
        ] {
            assert!(flags.contains(&flag), "{flag} in {flags:?}");
        }
        assert_eq!(values_of(&at(&["run", "--pl"])), ["--plan"]);
        assert_eq!(at(&["run", "helper", "-f", ""]).directive, FILES);
        assert_eq!(at(&["run", "helper", "--input", ""]).directive, FILES);
        assert_eq!(at(&["describe", ""]).noun, Some(Noun::Runs(RunFilter::All)));
        assert_eq!(at(&["delete", ""]).noun, Some(Noun::Runs(RunFilter::All)));
        assert_eq!(at(&["agents", ""]).noun, Some(Noun::Agents));
        assert_eq!(at(&["result", "r", "-o", ""]).directive, DIRS);
        assert_eq!(
            values_of(&at(&["logs", "r", "-c", ""])),
            ["agent", "sandbox"]
        );
        assert_eq!(at(&["-n", ""]).noun, Some(Noun::Namespaces));
        assert_eq!(at(&["get", "--context", ""]).noun, Some(Noun::Contexts));
        assert_eq!(at(&["--kubeconfig", ""]).directive, FILES);
    }

    #[test]
    fn connection_flags_anywhere_are_kept_and_skipped() {
        let c = at(&[
            "-n",
            "research",
            "--context=lab",
            "answer",
            "--kubeconfig",
            "/k",
            "",
        ]);
        assert_eq!(c.noun, Some(Noun::Runs(RunFilter::Waiting)));
        assert_eq!(c.namespace.as_deref(), Some("research"));
        assert_eq!(c.context.as_deref(), Some("lab"));
        assert_eq!(c.kubeconfig.as_deref(), Some("/k"));
        let c = at(&["get", "-nresearch", ""]);
        assert_eq!(c.namespace.as_deref(), Some("research"));
        assert_eq!(c.noun, Some(Noun::Runs(RunFilter::All)));
        let c = at(&["run", "--follow", "helper", ""]);
        assert_eq!(
            c.noun, None,
            "a switch takes no value: helper was the agent"
        );
    }

    #[test]
    fn after_a_double_dash_words_are_positionals() {
        assert_eq!(
            at(&["answer", "--", ""]).noun,
            Some(Noun::Runs(RunFilter::Waiting))
        );
        assert!(at(&["answer", "paint", "--", "-"]).candidates.is_empty());
    }

    #[test]
    fn run_filters_keep_what_each_command_takes() {
        let waiting = question_run("q", &[]);
        let running = run_with(Some((ConditionStatus::Unknown, "Running")), None, None);
        let done = run_with(Some((ConditionStatus::True, "Succeeded")), None, None);
        let failed = run_with(Some((ConditionStatus::False, "Failed")), None, None);
        let keeps = |f: RunFilter| [&waiting, &running, &done, &failed].map(|r| f.keeps(r));
        assert_eq!(keeps(RunFilter::All), [true, true, true, true]);
        assert_eq!(keeps(RunFilter::Waiting), [true, false, false, false]);
        assert_eq!(keeps(RunFilter::Going), [true, true, false, false]);
        assert_eq!(keeps(RunFilter::Answered), [false, false, true, false]);
        assert_eq!(keeps(RunFilter::Approving), [false, false, false, false]);
        let holding = crate::testing::approval_run(
            &[herd_crds::approval::ApprovalRequest::new(
                "c1", "bash", "{}",
            )],
            &[],
        );
        assert!(RunFilter::Approving.keeps(&holding));
        assert!(RunFilter::Going.keeps(&holding));
    }

    #[test]
    fn the_output_is_what_kubectl_reads() {
        let candidates = vec![
            Candidate {
                value: "run".into(),
                help: Some("Start a Run\nmore".into()),
            },
            Candidate {
                value: "paint-x1y2z".into(),
                help: None,
            },
        ];
        assert_eq!(
            render(&candidates, NO_FILES),
            "run\tStart a Run\npaint-x1y2z\n:4\n"
        );
        assert_eq!(render(&[], FILES), ":0\n");
    }
}
