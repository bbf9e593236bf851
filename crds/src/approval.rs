//! Tool approval: which tool calls need a person's yes before they run (Agent and Run
//! `spec.approval`), the requests a Run reports while it waits (`status.report.approvals`), and
//! the decisions people give in `spec.responses` (`{id, decision, reason}`).
//!
//! The rules are shared by the CRDs, the operator (a child Run inherits its parent's) and the
//! runner (its `ToolApproval` middleware asks before a matching call runs), so a rule means the
//! same on a laptop and in a cluster.

use std::time::Duration;

use kube::KubeSchema;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::{MAX_INPUT_TIMEOUT, parse_duration_within};
use crate::formats::is_date_time;
use crate::validation::{Checker, FieldErrors};

/// Most entries of `approval.tools`.
pub const MAX_TOOL_PATTERNS: usize = 32;
/// Most characters of one tool pattern.
pub const MAX_TOOL_PATTERN: usize = 128;
/// Most entries of `approval.commands`.
pub const MAX_COMMAND_PATTERNS: usize = 16;
/// Most characters of one command regex.
pub const MAX_COMMAND_PATTERN: usize = 512;
/// Most characters of a request's `arguments` (the model's JSON, cut past it).
pub const MAX_APPROVAL_ARGUMENTS: usize = 2048;
/// Most requests a Run reports at once (the calls of one turn that need approval).
pub const MAX_PENDING_APPROVALS: usize = 16;
/// Most characters of a decision's `reason`.
pub const MAX_DECISION_REASON: usize = 1024;
/// Most characters of an approval request's id (`spec.responses[].id` quotes it).
pub const MAX_APPROVAL_ID: usize = 64;
/// The prefix of an MCP tool pattern: `mcp:<server>/<tool>`.
pub const MCP_PREFIX: &str = "mcp:";
/// Between an MCP server's name and its tool's in the name the model calls (`<server>__<tool>`).
pub const MCP_SEPARATOR: &str = "__";
/// The tool whose `command` argument `approval.commands` is matched against.
pub const BASH_TOOL: &str = "bash";

/// CEL rule of `approval.tools`: each a tool name, or `mcp:<server>/<tool>`, `*` matching any
/// characters.
pub const TOOL_PATTERNS_RULE: &str =
    "self.all(p, p.matches('^(mcp:[a-z0-9*-]+/[A-Za-z0-9_*-]+|[A-Za-z0-9_*-]+)$'))";
/// Message of [`TOOL_PATTERNS_RULE`].
pub const TOOL_PATTERNS_MESSAGE: &str = "each must be a tool name or mcp:<server>/<tool>";
/// CEL rule of `approval.commands`: each regex compiles. CEL's `matches` compiles its pattern
/// when it runs, and one that does not compile fails the rule (RE2 syntax, which the runner's
/// regexes share).
pub const COMMAND_REGEXES_RULE: &str = "self.all(r, ''.matches(r) || !''.matches(r))";
/// Message of [`COMMAND_REGEXES_RULE`].
pub const COMMAND_REGEXES_MESSAGE: &str = "each must be an RE2 regular expression";
/// CEL rule of `spec.responses[]`: an answer or a decision, exactly one; a reason only with a
/// decision.
pub const RESPONSE_KIND_RULE: &str =
    "has(self.answer) != has(self.decision) && (!has(self.reason) || has(self.decision))";
/// Message of [`RESPONSE_KIND_RULE`].
pub const RESPONSE_KIND_MESSAGE: &str = "a response has either an answer or a decision (approve or deny), and a reason only with a decision";

/// Tool calls that need a person's yes first.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalSpec {
    /// Tools whose calls need approval: names (`bash`) or `mcp:<server>/<tool>`; `*` matches
    /// anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 128)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new(TOOL_PATTERNS_RULE).message(TOOL_PATTERNS_MESSAGE)
    )]
    pub tools: Vec<String>,
    /// RE2 regexes on `bash` commands: a match needs approval, e.g. `git push|kubectl`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 512)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new(COMMAND_REGEXES_RULE).message(COMMAND_REGEXES_MESSAGE)
    )]
    pub commands: Vec<String>,
    /// How long a request waits, 1s to 720h. Absent: the Run's `inputTimeout`.
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new(crate::rules::DURATION).message(crate::rules::DURATION_MESSAGE),
        validation = Rule::new(crate::rules::DURATION_UP_TO_720H).message(crate::rules::expression(crate::rules::DURATION_UP_TO_720H_MESSAGE))
    )]
    pub timeout: Option<String>,
    /// After the timeout: `deny` (default) or `fail` the Run (`ApprovalTimedOut`).
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::optional_enum::<OnApprovalTimeout>")]
    pub on_timeout: Option<OnApprovalTimeout>,
}

/// What an approval request that nobody decided in time becomes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OnApprovalTimeout {
    /// Denied: the model reads that nobody answered in time, and the run goes on.
    #[default]
    Deny,
    /// The Run fails with reason `ApprovalTimedOut`.
    Fail,
}

/// A person's decision on a tool call.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalDecision {
    /// Run the call as the model sent it.
    Approve,
    /// Do not run it; the model reads `denied by a person: <reason>`.
    Deny,
}

/// A decision on one tool call, with its reason: what the runner keeps in its thread (and its
/// checkpoint) once a person, or a timeout, decided.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub decision: ApprovalDecision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Verdict {
    /// Approved.
    pub fn approve() -> Self {
        Verdict {
            decision: ApprovalDecision::Approve,
            reason: None,
        }
    }

    /// Denied for `reason`.
    pub fn deny(reason: Option<String>) -> Self {
        Verdict {
            decision: ApprovalDecision::Deny,
            reason,
        }
    }

    /// The verdict a terminal line means: `y`/`yes` approves; empty, `n`/`no` deny without a
    /// reason; anything else denies with the line as the reason.
    pub fn from_line(line: &str) -> Self {
        let line = line.trim();
        match line.to_ascii_lowercase().as_str() {
            "y" | "yes" => Verdict::approve(),
            "" | "n" | "no" => Verdict::deny(None),
            _ => Verdict::deny(Some(line.to_owned())),
        }
    }
}

/// A tool call waiting for a person's decision.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// Identifier to quote in `spec.responses[].id` with the decision.
    #[schemars(length(max = 64))]
    pub id: String,
    /// The tool the model called (MCP tools as `<server>__<tool>`).
    #[schemars(length(max = 128))]
    pub tool: String,
    /// The arguments as the model sent them (JSON), cut at 2048 characters.
    #[schemars(length(max = 2048))]
    pub arguments: String,
    /// Whether `arguments` was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The model's id of the tool call.
    #[schemars(length(max = 128))]
    pub call_id: String,
    /// When the approval was asked for (RFC 3339), e.g. `2026-01-31T09:30:00Z`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(crate::rules::DATE_TIME).message(crate::rules::expression(crate::rules::DATE_TIME_MESSAGE)))]
    pub asked_at: Option<String>,
}

impl ApprovalRequest {
    /// The request for the call `call_id` of `tool` with `arguments` (the model's JSON), asked
    /// now.
    pub fn new(call_id: &str, tool: &str, arguments: &str) -> Self {
        let (arguments, truncated) = cut(arguments, MAX_APPROVAL_ARGUMENTS);
        ApprovalRequest {
            id: approval_id(call_id),
            tool: cut(tool, 128).0,
            arguments,
            truncated,
            call_id: cut(call_id, 128).0,
            asked_at: Some(jiff::Timestamp::now().to_string()),
        }
    }

    /// The call in one line for a person: `bash: rm -rf build/` for a command, else the tool
    /// and its arguments. Raw text: pass it through [`crate::terminal_text::for_terminal`]
    /// before printing it.
    pub fn summary(&self) -> String {
        let command = (self.tool == BASH_TOOL)
            .then(|| serde_json::from_str::<serde_json::Value>(&self.arguments).ok())
            .flatten()
            .and_then(|value| value.get("command")?.as_str().map(str::to_owned));
        let cut = if self.truncated { "…" } else { "" };
        match command {
            Some(command) => format!("{}: {command}", self.tool),
            None => format!("{} {}{cut}", self.tool, self.arguments),
        }
    }

    /// Checks the CRD's rule on `askedAt` (the run API refuses a request the API server would
    /// refuse, before writing it).
    pub fn validate(&self) -> Result<(), FieldErrors> {
        let mut checker = Checker::default();
        if let Some(asked_at) = &self.asked_at {
            checker.quoted(
                is_date_time(asked_at),
                "status.report.approvals[].askedAt",
                asked_at,
                crate::rules::DATE_TIME_SUFFIX,
            );
        }
        checker.finish()
    }
}

/// The id of the approval request of tool call `call_id`: `a-<call id>`, label-safe and short
/// enough for `spec.responses[].id`.
pub fn approval_id(call_id: &str) -> String {
    let cleaned: String = call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(MAX_APPROVAL_ID - 2)
        .collect();
    if cleaned.is_empty() {
        "a".to_owned()
    } else {
        format!("a-{cleaned}")
    }
}

/// `text` cut to `max` characters, and whether it was cut.
fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((end, _)) => (text[..end].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

/// What the model reads for a call a person denied.
pub fn denied_message(reason: Option<&str>) -> String {
    match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(reason) => format!("denied by a person: {reason}"),
        None => "denied by a person: no reason given".to_owned(),
    }
}

/// The reason of a request nobody decided within `timeout`.
pub fn timed_out_reason(timeout: Duration) -> String {
    let s = timeout.as_secs();
    let human = match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    };
    format!("no answer within {human}")
}

impl ApprovalSpec {
    /// Whether the spec requires nothing.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.commands.is_empty()
    }

    /// The rules of both: every tool and command of either (each once, `self`'s first); the
    /// timeout and its action of `more` where it sets them. Neither removes what the other
    /// requires.
    pub fn union(&self, more: &ApprovalSpec) -> ApprovalSpec {
        let merged = |a: &[String], b: &[String]| {
            let mut all = a.to_vec();
            for item in b {
                if !all.contains(item) {
                    all.push(item.clone());
                }
            }
            all
        };
        ApprovalSpec {
            tools: merged(&self.tools, &more.tools),
            commands: merged(&self.commands, &more.commands),
            timeout: more.timeout.clone().or_else(|| self.timeout.clone()),
            on_timeout: more.on_timeout.or(self.on_timeout),
        }
    }

    /// The rules of an Agent (`agent`) and its Run (`run`), either absent.
    pub fn effective(
        agent: Option<&ApprovalSpec>,
        run: Option<&ApprovalSpec>,
    ) -> Option<ApprovalSpec> {
        match (agent, run) {
            (None, None) => None,
            (Some(one), None) | (None, Some(one)) => Some(one.clone()),
            (Some(agent), Some(run)) => Some(agent.union(run)),
        }
        .filter(|spec| !spec.is_empty() || spec.timeout.is_some() || spec.on_timeout.is_some())
    }

    /// The rules compiled, or the first command pattern that is not a regex.
    pub fn compile(&self) -> Result<ApprovalRules, String> {
        let commands = self
            .commands
            .iter()
            .map(|pattern| {
                Regex::new(pattern).map_err(|error| {
                    format!("approval.commands: {pattern:?} is not a regular expression: {error}")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ApprovalRules {
            tools: self.tools.clone(),
            commands,
        })
    }

    /// How long a request waits: `timeout`, else `input_timeout` (the Run's).
    pub fn wait(&self, input_timeout: Duration) -> Duration {
        self.timeout
            .as_deref()
            .and_then(|t| parse_duration_within(t, MAX_INPUT_TIMEOUT).ok())
            .unwrap_or(input_timeout)
    }

    /// The CRD's rules in plain Rust, under `path` (`spec.approval`).
    pub(crate) fn check(&self, c: &mut Checker, path: &str) {
        c.max_items(
            &format!("{path}.tools"),
            self.tools.len(),
            MAX_TOOL_PATTERNS,
        );
        for (i, tool) in self.tools.iter().enumerate() {
            c.max_length(&format!("{path}.tools[{i}]"), tool, MAX_TOOL_PATTERN);
        }
        c.check(
            self.tools.iter().all(|tool| is_tool_pattern(tool)),
            format!("{path}.tools"),
            TOOL_PATTERNS_MESSAGE,
        );
        c.unique(&format!("{path}.tools"), &self.tools);
        c.max_items(
            &format!("{path}.commands"),
            self.commands.len(),
            MAX_COMMAND_PATTERNS,
        );
        for (i, command) in self.commands.iter().enumerate() {
            c.max_length(
                &format!("{path}.commands[{i}]"),
                command,
                MAX_COMMAND_PATTERN,
            );
        }
        c.check(
            self.commands
                .iter()
                .all(|command| Regex::new(command).is_ok()),
            format!("{path}.commands"),
            COMMAND_REGEXES_MESSAGE,
        );
        c.unique(&format!("{path}.commands"), &self.commands);
        c.duration(
            &format!("{path}.timeout"),
            self.timeout.as_deref(),
            MAX_INPUT_TIMEOUT,
        );
    }
}

/// Whether `pattern` is a tool pattern (the test of [`TOOL_PATTERNS_RULE`]).
pub fn is_tool_pattern(pattern: &str) -> bool {
    let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '*' | '-');
    match pattern.strip_prefix(MCP_PREFIX) {
        Some(rest) => match rest.split_once('/') {
            Some((server, tool)) => {
                !server.is_empty()
                    && server.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '*' || c == '-'
                    })
                    && !tool.is_empty()
                    && tool.chars().all(name_char)
            }
            None => false,
        },
        None => !pattern.is_empty() && pattern.chars().all(name_char),
    }
}

/// The rules of a run, compiled: which calls need approval.
#[derive(Clone, Debug, Default)]
pub struct ApprovalRules {
    tools: Vec<String>,
    commands: Vec<Regex>,
}

impl ApprovalRules {
    /// Whether the rules require nothing.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.commands.is_empty()
    }

    /// Whether a call of `tool` (the name the model called) with `arguments` (its JSON) needs
    /// approval: the tool matches a pattern, or it is `bash` and its command matches a regex.
    /// A `bash` call whose arguments do not parse is matched on the raw text, so no rule is
    /// dodged by malformed JSON.
    pub fn requires(&self, tool: &str, arguments: &str) -> bool {
        if self.tools.iter().any(|pattern| tool_matches(pattern, tool)) {
            return true;
        }
        if tool != BASH_TOOL || self.commands.is_empty() {
            return false;
        }
        let parsed = serde_json::from_str::<serde_json::Value>(arguments).ok();
        let command = parsed
            .as_ref()
            .and_then(|value| value.get("command"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or(arguments);
        self.commands.iter().any(|regex| regex.is_match(command))
    }
}

/// Whether the tool the model calls `tool` matches `pattern`: a plain pattern matches the name,
/// `mcp:<server>/<tool>` the MCP name `<server>__<tool>`; `*` matches any characters.
pub fn tool_matches(pattern: &str, tool: &str) -> bool {
    match pattern.strip_prefix(MCP_PREFIX) {
        Some(rest) => match rest.split_once('/') {
            Some((server, name)) => {
                glob(&format!("{server}{MCP_SEPARATOR}{name}"), tool)
                    // A server name has no `_`: the first `__` splits server from tool, and
                    // neither is ever empty.
                    && tool.split_once(MCP_SEPARATOR).is_some_and(|(s, t)| {
                        !s.is_empty() && !t.is_empty() && glob(server, s) && glob(name, t)
                    })
            }
            None => false,
        },
        None => glob(pattern, tool),
    }
}

/// `*`-glob matching, every other character literal.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == text;
    };
    if parts.len() == 1 {
        return pattern == text;
    }
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn spec(tools: &[&str], commands: &[&str]) -> ApprovalSpec {
        ApprovalSpec {
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            commands: commands.iter().map(|c| (*c).to_owned()).collect(),
            ..ApprovalSpec::default()
        }
    }

    fn bash(command: &str) -> String {
        serde_json::json!({ "command": command }).to_string()
    }

    #[test]
    fn tools_match_by_name_and_mcp_patterns_by_server_and_tool() {
        let rules = spec(&["write_file", "mcp:github/*", "mcp:jira/delete_*"], &[])
            .compile()
            .unwrap();
        assert!(rules.requires("write_file", "{}"));
        assert!(!rules.requires("read_file", "{}"));
        assert!(rules.requires("github__create_issue", "{}"));
        assert!(!rules.requires("gitlab__create_issue", "{}"));
        assert!(rules.requires("jira__delete_issue", "{}"));
        assert!(!rules.requires("jira__get_issue", "{}"));
        // `mcp:` patterns name MCP tools only: a built-in tool is never `<server>__<tool>`.
        assert!(!rules.requires("bash", &bash("ls")));
    }

    #[test]
    fn commands_match_bash_commands_anywhere_even_without_bash_in_tools() {
        let rules = spec(&[], &["git push|kubectl", r"^rm\s"])
            .compile()
            .unwrap();
        assert!(rules.requires("bash", &bash("cd repo && git push origin main")));
        assert!(rules.requires("bash", &bash("kubectl get pods")));
        assert!(rules.requires("bash", &bash("rm -rf build/")));
        assert!(!rules.requires("bash", &bash("ls; echo rm -rf")));
        assert!(!rules.requires("bash", &bash("git status")));
        // The regexes are about commands: other tools are not matched on their arguments.
        assert!(!rules.requires("write_file", &bash("kubectl")));
        // Malformed arguments are matched on their raw text.
        assert!(rules.requires("bash", "{\"command\": \"kubectl delete"));
    }

    #[test]
    fn bash_in_tools_needs_approval_for_every_command() {
        let rules = spec(&["bash"], &[]).compile().unwrap();
        assert!(rules.requires("bash", &bash("ls")));
        assert!(ApprovalRules::default().is_empty());
        assert!(!ApprovalRules::default().requires("bash", &bash("rm -rf /")));
    }

    #[test]
    fn a_bad_regex_is_reported_with_its_pattern() {
        let error = spec(&[], &["git (push"]).compile().unwrap_err();
        assert!(error.starts_with("approval.commands: \"git (push\" is not a regular expression"));
    }

    #[test]
    fn the_union_only_adds_and_a_run_may_set_the_timeout() {
        let agent = ApprovalSpec {
            timeout: Some("10m".into()),
            ..spec(&["bash", "write_file"], &["kubectl"])
        };
        let run = ApprovalSpec {
            on_timeout: Some(OnApprovalTimeout::Fail),
            ..spec(&["write_file", "mcp:github/*"], &["git push"])
        };
        let both = ApprovalSpec::effective(Some(&agent), Some(&run)).unwrap();
        assert_eq!(both.tools, ["bash", "write_file", "mcp:github/*"]);
        assert_eq!(both.commands, ["kubectl", "git push"]);
        assert_eq!(both.timeout.as_deref(), Some("10m"));
        assert_eq!(both.on_timeout, Some(OnApprovalTimeout::Fail));
        assert_eq!(ApprovalSpec::effective(None, None), None);
        assert_eq!(
            ApprovalSpec::effective(None, Some(&ApprovalSpec::default())),
            None
        );
        assert_eq!(
            ApprovalSpec::effective(None, Some(&run)).unwrap().tools,
            run.tools
        );
    }

    #[test]
    fn the_wait_is_the_timeout_else_the_input_timeout() {
        let hour = Duration::from_secs(3600);
        assert_eq!(ApprovalSpec::default().wait(hour), hour);
        let set = ApprovalSpec {
            timeout: Some("90s".into()),
            ..ApprovalSpec::default()
        };
        assert_eq!(set.wait(hour), Duration::from_secs(90));
        assert_eq!(
            timed_out_reason(Duration::from_secs(90)),
            "no answer within 1m30s"
        );
    }

    #[test]
    fn the_spec_checks_mirror_the_crd_rules() {
        let bad = ApprovalSpec {
            timeout: Some("soon".into()),
            ..spec(
                &["mcp:GitHub/*", "ok_tool", "ok_tool", "mcp:x"],
                &["(", "fine"],
            )
        };
        let mut checker = Checker::default();
        bad.check(&mut checker, "spec.approval");
        let errors = checker.finish().unwrap_err().to_string();
        assert!(errors.contains(&format!("spec.approval.tools: {TOOL_PATTERNS_MESSAGE}")));
        assert!(errors.contains("spec.approval.tools[2]: Duplicate value: \"ok_tool\""));
        assert!(errors.contains(&format!(
            "spec.approval.commands: {COMMAND_REGEXES_MESSAGE}"
        )));
        assert!(errors.contains("spec.approval.timeout: "));
        for bad in ["mcp:GitHub/*", "mcp:x", "mcp:/x", "a b", ""] {
            assert!(!is_tool_pattern(bad), "{bad}");
        }
        let mut fine = Checker::default();
        spec(
            &["bash", "mcp:github/*", "mcp:*/delete_*"],
            &["git push|kubectl"],
        )
        .check(&mut fine, "spec.approval");
        assert_eq!(fine.finish(), Ok(()));
    }

    #[test]
    fn a_terminal_line_approves_only_with_yes() {
        assert_eq!(Verdict::from_line("y\n"), Verdict::approve());
        assert_eq!(Verdict::from_line(" YES "), Verdict::approve());
        assert_eq!(Verdict::from_line(""), Verdict::deny(None));
        assert_eq!(Verdict::from_line("n"), Verdict::deny(None));
        assert_eq!(
            Verdict::from_line("use make clean instead\n"),
            Verdict::deny(Some("use make clean instead".into()))
        );
    }

    #[test]
    fn requests_cut_their_arguments_and_summarize_commands() {
        let request = ApprovalRequest::new("call_1", "bash", &bash("rm -rf build/"));
        assert_eq!(request.id, "a-call_1");
        assert_eq!(request.summary(), "bash: rm -rf build/");
        assert!(request.validate().is_ok());
        let long =
            ApprovalRequest::new("c/!", "write_file", &"x".repeat(MAX_APPROVAL_ARGUMENTS + 5));
        assert_eq!(long.id, "a-c");
        assert!(long.truncated);
        assert_eq!(long.arguments.chars().count(), MAX_APPROVAL_ARGUMENTS);
        assert!(long.summary().ends_with("x…"));
        assert_eq!(approval_id("!!"), "a");
        assert!(approval_id(&"y".repeat(200)).len() <= MAX_APPROVAL_ID);
        assert_eq!(
            denied_message(Some(" not now ")),
            "denied by a person: not now"
        );
        assert_eq!(denied_message(None), "denied by a person: no reason given");
    }

    proptest! {
        #[test]
        fn a_literal_pattern_matches_exactly_its_name(
            name in "[a-z_]{1,12}", other in "[a-z_]{1,12}"
        ) {
            prop_assert!(tool_matches(&name, &name));
            let same = name == other;
            prop_assert_eq!(tool_matches(&name, &other), same);
        }

        #[test]
        fn a_star_matches_any_middle(
            prefix in "[a-z]{0,6}", middle in "[a-z_]{0,12}", suffix in "[a-z]{0,6}"
        ) {
            let pattern = format!("{prefix}*{suffix}");
            let text = format!("{prefix}{middle}{suffix}");
            prop_assert!(glob(&pattern, &text));
        }

        #[test]
        fn an_mcp_pattern_matches_only_its_servers_tools(
            server in "[a-z][a-z0-9-]{0,8}", other in "[a-z][a-z0-9-]{0,8}", tool in "[a-z_]{1,12}"
        ) {
            let pattern = format!("mcp:{server}/*");
            let own = format!("{server}__{tool}");
            let foreign = format!("{other}__{tool}");
            let same = server == other;
            prop_assert!(is_tool_pattern(&pattern));
            prop_assert!(tool_matches(&pattern, &own));
            prop_assert_eq!(tool_matches(&pattern, &foreign), same);
            // A built-in tool's name has no `__` (that is how an MCP tool's is made).
            prop_assume!(!tool.contains(MCP_SEPARATOR));
            prop_assert!(!tool_matches(&pattern, &tool));
            prop_assert!(!tool_matches(&pattern, &format!("{server}__")), "no empty tool");
        }

        #[test]
        fn a_command_regex_matches_wherever_the_text_appears(
            before in "[a-jl-z ;&|]{0,20}", after in "[a-jl-z ;&|]{0,20}"
        ) {
            let rules = spec(&[], &["kubectl"]).compile().unwrap();
            let with = bash(&format!("{before}kubectl{after}"));
            prop_assert!(rules.requires("bash", &with));
            // The generated text has no `k`: without the word it never matches.
            let without = bash(&format!("{before}{after}"));
            prop_assert!(!rules.requires("bash", &without));
        }

        #[test]
        fn the_union_keeps_every_rule_of_both(
            a in proptest::collection::vec("[a-z_]{1,8}", 0..6),
            b in proptest::collection::vec("[a-z_]{1,8}", 0..6),
            tool in "[a-z_]{1,8}"
        ) {
            let left = ApprovalSpec { tools: a.clone(), ..ApprovalSpec::default() };
            let right = ApprovalSpec { tools: b.clone(), ..ApprovalSpec::default() };
            let rules = left.union(&right).compile().unwrap();
            let either = a.contains(&tool) || b.contains(&tool);
            prop_assert_eq!(rules.requires(&tool, "{}"), either);
        }
    }
}
