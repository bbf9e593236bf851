//! `kubectl herd describe RUN`: what a person reads first about a Run, as `kubectl describe`
//! shows an object — its spec, conditions with their reasons and messages, the question
//! waiting, todos, usage, children, presented files, the Pod's containers and the last Events.
//! [`render`] is the pure part; [`describe`] reads what it needs.

use std::fmt::Write as _;

use herd_crds::condition::Condition;
use herd_crds::report::{StopReason, Todo, TodoStatus, Usage};
use herd_crds::run::{ChildRef, Run, RunResult, RunSpec, RunStatus, TRACEPARENT_ANNOTATION};
use herd_crds::terminal_text::{for_terminal, one_line};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerState, Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::columns::{cost_text, duration_text, status_text};
use crate::connect::Cluster;
use crate::error::CliError;
use crate::io::Io;
use crate::outcome::{EXIT_ANSWERED, Outcome, outcome};
use crate::runs::get_run;
use crate::table::render as table;
use crate::tree::age;
use crate::view::{View, phase_name, tokens_text, usage_line, view};

/// Most Events shown, the latest.
const EVENTS: usize = 10;

/// What `describe` shows besides the Run.
#[derive(Clone, Debug)]
pub struct Around<'a> {
    /// The Run's children.
    pub children: Vec<&'a Run>,
    /// Its current Pod; `Err` says why it could not be read.
    pub pod: Option<Result<Pod, String>>,
    /// The Events of the Run and its Pod; `Err` says why they could not be read.
    pub events: Result<Vec<Event>, String>,
}

/// Describes the Run `name`.
pub async fn describe(cluster: &Cluster, name: &str, io: &mut Io<'_>) -> Result<u8, CliError> {
    let run = get_run(cluster, name).await?;
    let siblings = crate::runs::runs(cluster)
        .list(&ListParams::default().fields(&format!("spec.parentRef.name={name}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let pod_name = run.status.as_ref().and_then(|s| s.pod_name.clone());
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let pod = match &pod_name {
        Some(pod) => Some(match pods.get_opt(pod).await {
            Ok(Some(pod)) => Ok(pod),
            Ok(None) => Err("deleted".to_owned()),
            Err(error) => Err(one_line(&error.to_string())),
        }),
        None => None,
    };
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mut found = Vec::new();
    let mut refused = None;
    for object in std::iter::once(name).chain(pod_name.as_deref()) {
        let params = ListParams::default().fields(&format!("involvedObject.name={object}"));
        match events.list(&params).await {
            Ok(list) => found.extend(list.items),
            Err(error) => refused = Some(one_line(&error.to_string())),
        }
    }
    let around = Around {
        children: siblings.iter().collect(),
        pod,
        events: refused.map_or(Ok(found), Err),
    };
    let _ = write!(io.stdout, "{}", render(&run, &around, Timestamp::now()));
    Ok(EXIT_ANSWERED)
}

/// The description of `run`, its parts in the order they are read.
pub fn render(run: &Run, around: &Around<'_>, now: Timestamp) -> String {
    let mut out = String::new();
    let shown = view(run);
    let status = run.status.clone().unwrap_or_default();
    let report = status.report.clone().unwrap_or_default();
    header(&mut out, run, &shown, &status, now);
    spec(&mut out, &run.spec);
    conditions(&mut out, &status.conditions, now);
    question(&mut out, run);
    held_calls(&mut out, run);
    todos(&mut out, &shown.todos);
    usage(&mut out, &shown.usage);
    trace_and_stop(&mut out, run, report.stop_reason.as_ref());
    children(&mut out, around, &shown.children, now);
    files(&mut out, run, report.result.as_ref());
    pod_section(
        &mut out,
        around.pod.as_ref(),
        status.pod_name.as_deref(),
        now,
    );
    events(&mut out, &around.events, now);
    out
}

/// One `Label:          value` line of the header.
fn field(out: &mut String, label: &str, value: &str) {
    let _ = writeln!(out, "{:<16}{}", format!("{label}:"), value);
}

/// The header fields: who the Run is, why it stands where it stands, and when it ran.
fn header(out: &mut String, run: &Run, shown: &View, status: &RunStatus, now: Timestamp) {
    field(out, "Name", &one_line(&run.name_any()));
    field(
        out,
        "Namespace",
        &one_line(&run.namespace().unwrap_or_default()),
    );
    field(out, "Agent", &one_line(&run.spec.agent_ref.name));
    field(out, "Status", &status_text(run));
    if !shown.reason.is_empty() {
        let mut reason = one_line(&shown.reason);
        if !shown.message.is_empty() {
            reason.push_str(&format!(": {}", one_line(&shown.message)));
        }
        field(out, "Reason", &reason);
    }
    if let Some((budget, why)) = crate::budgets::holding(run) {
        field(out, "Held by", &format!("Budget {budget} ({why})"));
    }
    if let Some(title) = &shown.title {
        field(out, "Title", &one_line(title));
    }
    let labels: Vec<String> = run
        .labels()
        .iter()
        .map(|(k, v)| one_line(&format!("{k}={v}")))
        .collect();
    field(out, "Labels", &or_none(&labels.join(", ")));
    let parent = run
        .spec
        .parent_ref
        .as_ref()
        .map(|p| one_line(&p.name))
        .unwrap_or_default();
    field(out, "Parent", &or_none(&parent));
    field(
        out,
        "Created",
        &time_text(run.metadata.creation_timestamp.as_ref(), now),
    );
    field(out, "Started", &time_text(status.start_time.as_ref(), now));
    field(
        out,
        "Finished",
        &time_text(status.completion_time.as_ref(), now),
    );
    field(out, "Duration", &duration_text(run, now));
    if let Some(attempt) = status.attempt {
        field(out, "Attempt", &attempt.to_string());
    }
    field(
        out,
        "Pod",
        &or_none(&one_line(status.pod_name.as_deref().unwrap_or_default())),
    );
}

/// `2026-01-01T00:00:00Z (5m ago)`, or `<none>` when it has not happened.
fn time_text(time: Option<&Time>, now: Timestamp) -> String {
    time.map_or_else(
        || "<none>".to_owned(),
        |t| format!("{} ({} ago)", t.0, age(t.0, now)),
    )
}

/// The Spec: the task, every line of it, then the settings that were given.
fn spec(out: &mut String, spec: &RunSpec) {
    out.push_str("Spec:\n");
    let task = for_terminal(&spec.task);
    let mut lines = task.lines();
    let _ = writeln!(out, "  {:<18}{}", "Task:", lines.next().unwrap_or_default());
    for line in lines {
        let _ = writeln!(out, "  {:<18}{line}", "");
    }
    let mut setting = |label: &str, value: Option<String>| {
        if let Some(value) = value {
            let _ = writeln!(out, "  {:<18}{}", format!("{label}:"), one_line(&value));
        }
    };
    setting("Plan mode", spec.plan_mode.map(yes_no));
    setting("Thinking", spec.thinking.map(yes_no));
    setting("Model", spec.model.as_ref().and_then(|m| m.name.clone()));
    setting("Timeout", spec.timeout.clone());
    setting("Input timeout", spec.input_timeout.clone());
    setting(
        "TTL",
        spec.ttl_seconds_after_finished
            .map(|s| format!("{s}s after it finished")),
    );
    setting("Subagent type", spec.subagent_type.clone());
    let inputs: Vec<String> = spec
        .inputs
        .iter()
        .map(|i| match &i.path {
            Some(path) => format!("ConfigMap {} in {path}", i.config_map_ref.name),
            None => format!("ConfigMap {} in uploads/", i.config_map_ref.name),
        })
        .collect();
    setting("Inputs", (!inputs.is_empty()).then(|| inputs.join(", ")));
    setting(
        "Answers given",
        (!spec.responses.is_empty()).then(|| spec.responses.len().to_string()),
    );
    setting("Cancel", spec.cancel.then(|| "requested".to_owned()));
}

/// The Conditions table, with each condition's reason and message.
fn conditions(out: &mut String, conditions: &[Condition], now: Timestamp) {
    section(out, "Conditions");
    let rows: Vec<Vec<String>> = conditions
        .iter()
        .map(|c| {
            vec![
                one_line(&c.type_),
                format!("{:?}", c.status),
                one_line(&c.reason),
                age(c.last_transition_time.0, now),
                one_line(&c.message),
            ]
        })
        .collect();
    indented(out, &rows, &["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"]);
}

/// The question the Run waits on and how to answer it, when it waits for an answer.
fn question(out: &mut String, run: &Run) {
    let Outcome::Waiting(question) = outcome(run) else {
        return;
    };
    section(out, "Waiting for an answer");
    let _ = writeln!(
        out,
        "  Question {} ({:?}):",
        one_line(&question.id),
        question.kind
    );
    for line in for_terminal(&question.render()).lines() {
        let _ = writeln!(out, "    {line}");
    }
    let _ = writeln!(
        out,
        "  Answer with: kubectl herd answer {} \"...\"",
        one_line(&run.name_any())
    );
}

/// The tool calls held for approval and how to decide them, when there are any.
fn held_calls(out: &mut String, run: &Run) {
    let held = crate::approve::pending_approvals(run);
    if held.is_empty() {
        return;
    }
    section(out, "Waiting for approval");
    for request in &held {
        let cut = if request.truncated { " (cut)" } else { "" };
        let _ = writeln!(
            out,
            "  {}  {}{cut}",
            one_line(&request.id),
            for_terminal(&one_line(&request.summary()))
        );
    }
    let name = one_line(&run.name_any());
    let _ = writeln!(
        out,
        "  Decide with: kubectl herd approve {name} ID, or kubectl herd deny {name} ID \
         --reason \"...\""
    );
}

/// The agent's todo list with a mark for each one's state, when it has one.
fn todos(out: &mut String, todos: &[Todo]) {
    if todos.is_empty() {
        return;
    }
    section(out, "Todos");
    for todo in todos {
        let mark = match todo.status {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[>]",
            TodoStatus::Completed => "[x]",
        };
        let _ = writeln!(out, "  {mark} {}", one_line(&todo.content));
    }
}

/// The `Usage:` line and its details under it.
fn usage(out: &mut String, usage: &Usage) {
    let _ = writeln!(
        out,
        "{:<16}{} ({} tokens)",
        "Usage:",
        usage_line(usage),
        tokens_text(usage.total_tokens())
    );
    usage_details(out, usage);
}

/// The `Trace:` and `Stop reason:` fields, each when the Run has one.
fn trace_and_stop(out: &mut String, run: &Run, stop: Option<&StopReason>) {
    if let Some(trace) = trace_id(run) {
        field(out, "Trace", &trace);
    }
    if let Some(stop) = stop {
        field(out, "Stop reason", &format!("{stop:?}"));
    }
}

/// The Children table: the child Runs read, then those the status names that were not read.
fn children(out: &mut String, around: &Around<'_>, named: &[ChildRef], now: Timestamp) {
    if around.children.is_empty() && named.is_empty() {
        return;
    }
    section(out, "Children");
    let mut rows: Vec<Vec<String>> = around
        .children
        .iter()
        .map(|c| {
            vec![
                one_line(&c.name_any()),
                status_text(c),
                tokens_text(view(c).usage.total_tokens()),
                duration_text(c, now),
            ]
        })
        .collect();
    for child in named {
        if !around.children.iter().any(|c| c.name_any() == child.name) {
            rows.push(vec![
                one_line(&child.name),
                phase_name(child.state).to_owned(),
                "-".into(),
                "-".into(),
            ]);
        }
    }
    indented(out, &rows, &["NAME", "STATUS", "TOKENS", "DURATION"]);
}

/// The Files the result presents and how to read the answer, once there is a result.
fn files(out: &mut String, run: &Run, result: Option<&RunResult>) {
    let Some(result) = result else {
        return;
    };
    section(out, "Files");
    if result.artifacts.is_empty() {
        out.push_str("  <none>\n");
    }
    for file in &result.artifacts {
        let _ = writeln!(out, "  {} ({} bytes)", one_line(&file.path), file.size);
    }
    let _ = writeln!(
        out,
        "  The answer: kubectl herd result {}",
        one_line(&run.name_any())
    );
}

/// The Pod's part: its containers, or why `pod_name` could not be read; nothing without a Pod.
fn pod_section(
    out: &mut String,
    pod: Option<&Result<Pod, String>>,
    pod_name: Option<&str>,
    now: Timestamp,
) {
    match pod {
        None => {}
        Some(Err(why)) => {
            let _ = writeln!(
                out,
                "Pod {}: {}",
                one_line(pod_name.unwrap_or_default()),
                one_line(why)
            );
        }
        Some(Ok(pod)) => pod_containers(out, pod, now),
    }
}

/// The Events table, the latest [`EVENTS`] of them, or why they could not be read.
fn events(out: &mut String, read: &Result<Vec<Event>, String>, now: Timestamp) {
    section(out, "Events");
    match read {
        Err(why) => {
            let _ = writeln!(out, "  cannot read them: {}", one_line(why));
        }
        Ok(found) if found.is_empty() => out.push_str("  <none>\n"),
        Ok(found) => {
            let mut found: Vec<&Event> = found.iter().collect();
            found.sort_by_key(|e| event_time(e));
            let start = found.len().saturating_sub(EVENTS);
            let rows: Vec<Vec<String>> = found[start..].iter().map(|e| event_row(e, now)).collect();
            indented(
                out,
                &rows,
                &["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
            );
        }
    }
}

/// One row of the Events table.
fn event_row(event: &Event, now: Timestamp) -> Vec<String> {
    let object = &event.involved_object;
    vec![
        event_time(event).map_or_else(|| "<unknown>".to_owned(), |t| age(t, now)),
        one_line(event.type_.as_deref().unwrap_or_default()),
        one_line(event.reason.as_deref().unwrap_or_default()),
        one_line(&format!(
            "{}/{}",
            object.kind.as_deref().unwrap_or_default().to_lowercase(),
            object.name.as_deref().unwrap_or_default()
        )),
        one_line(event.message.as_deref().unwrap_or_default()),
    ]
}

/// The Pod's phase and each container's state.
fn pod_containers(out: &mut String, pod: &Pod, now: Timestamp) {
    let status = pod.status.clone().unwrap_or_default();
    let _ = writeln!(
        out,
        "Pod {}: {}{}",
        one_line(&pod.name_any()),
        one_line(status.phase.as_deref().unwrap_or("Unknown")),
        status
            .reason
            .as_deref()
            .map(|r| format!(" ({})", one_line(r)))
            .unwrap_or_default()
    );
    let containers = status
        .init_container_statuses
        .unwrap_or_default()
        .into_iter()
        .chain(status.container_statuses.unwrap_or_default());
    let rows: Vec<Vec<String>> = containers
        .map(|c| {
            vec![
                one_line(&c.name),
                container_state(c.state.as_ref(), now),
                c.restart_count.to_string(),
            ]
        })
        .collect();
    indented(out, &rows, &["CONTAINER", "STATE", "RESTARTS"]);
}

/// `Running for 2m`, `Waiting (ImagePullBackOff): …`, `Terminated (Completed, exit 0)`.
fn container_state(state: Option<&ContainerState>, now: Timestamp) -> String {
    let Some(state) = state else {
        return "Unknown".to_owned();
    };
    if let Some(running) = &state.running {
        return match &running.started_at {
            Some(started) => format!("Running for {}", age(started.0, now)),
            None => "Running".to_owned(),
        };
    }
    if let Some(waiting) = &state.waiting {
        let mut text = format!(
            "Waiting ({})",
            one_line(waiting.reason.as_deref().unwrap_or("unknown"))
        );
        if let Some(message) = &waiting.message {
            text.push_str(&format!(": {}", one_line(message)));
        }
        return text;
    }
    if let Some(done) = &state.terminated {
        let mut text = format!(
            "Terminated ({}, exit {})",
            one_line(done.reason.as_deref().unwrap_or("unknown")),
            done.exit_code
        );
        if let Some(message) = done.message.as_deref().filter(|m| !m.is_empty()) {
            text.push_str(&format!(": {}", one_line(message)));
        }
        return text;
    }
    "Unknown".to_owned()
}

/// When the Event last happened, by the best time it carries.
fn event_time(event: &Event) -> Option<Timestamp> {
    event
        .last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| event.event_time.as_ref().map(|t| t.0))
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The usage split under the `Usage:` line, each line only when it has something to say: the
/// cached input, the cost, the tokens by model, and the totals with the children.
fn usage_details(out: &mut String, usage: &Usage) {
    let line = |out: &mut String, label: &str, value: &str| {
        let _ = writeln!(out, "  {:<16}{}", format!("{label}:"), value);
    };
    if usage.cached_input_tokens > 0 {
        line(
            out,
            "Cached input",
            &format!("{} of the tokens in", usage.cached_input_tokens),
        );
    }
    if usage.cost.is_some() {
        line(out, "Cost", &cost_text(usage.cost.as_ref()));
    }
    if !usage.by_model.is_empty() {
        let _ = writeln!(out, "  By model:");
        let rows: Vec<Vec<String>> = usage
            .by_model
            .iter()
            .map(|entry| {
                let calls = if entry.model_calls == 1 {
                    "call"
                } else {
                    "calls"
                };
                vec![
                    one_line(&entry.model),
                    format!("{} {calls}", entry.model_calls),
                    format!("{} in", entry.input_tokens),
                    format!("{} cached", entry.cached_input_tokens),
                    format!("{} out", entry.output_tokens),
                ]
            })
            .collect();
        for row in table(&[], &rows).lines().filter(|l| !l.trim().is_empty()) {
            let _ = writeln!(out, "    {}", row.trim_end());
        }
    }
    if let Some(total) = &usage.with_children {
        let mut text = format!(
            "{} model calls · {} tool calls · {} tokens in / {} out",
            total.model_calls, total.tool_calls, total.input_tokens, total.output_tokens
        );
        if total.cost.is_some() {
            text.push_str(&format!(" · {}", cost_text(total.cost.as_ref())));
        }
        line(out, "With children", &text);
    }
}

/// The trace id of the Run's `herd.dev/traceparent` annotation (`00-<trace id>-<span>-<flags>`),
/// when it has a well-formed one.
fn trace_id(run: &Run) -> Option<String> {
    let traceparent = run.annotations().get(TRACEPARENT_ANNOTATION)?;
    let mut parts = traceparent.split('-');
    let (_version, trace) = (parts.next()?, parts.next()?);
    (trace.len() == 32 && trace.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| trace.to_ascii_lowercase())
}

/// The title line of a section.
fn section(out: &mut String, title: &str) {
    let _ = writeln!(out, "{title}:");
}

/// A table under a section, two spaces in; `<none>` without rows.
fn indented(out: &mut String, rows: &[Vec<String>], header: &[&str]) {
    if rows.is_empty() {
        out.push_str("  <none>\n");
        return;
    }
    for line in table(header, rows).lines() {
        let _ = writeln!(out, "  {line}");
    }
}

/// `yes` or `no`.
fn yes_no(on: bool) -> String {
    if on { "yes" } else { "no" }.to_owned()
}

/// The text, or `<none>` when it is empty.
fn or_none(text: &str) -> String {
    if text.is_empty() {
        "<none>".to_owned()
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ContainerStateRunning, ContainerStateWaiting, ContainerStatus, ObjectReference, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::testing::{GOLDEN_NOW, at, family_tree};

    fn container(name: &str, state: ContainerState) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(state),
            ..ContainerStatus::default()
        }
    }

    fn event(name: &str, kind: &str, reason: &str, message: &str, seconds: i64) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{seconds}")),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                kind: Some(kind.into()),
                name: Some(name.into()),
                ..ObjectReference::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some("Normal".into()),
            last_timestamp: Some(at(seconds)),
            ..Event::default()
        }
    }

    #[test]
    fn a_running_parent_with_its_children_pod_and_events() {
        let runs = family_tree();
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("notes-1".into()),
                ..ObjectMeta::default()
            },
            status: Some(PodStatus {
                phase: Some("Running".into()),
                container_statuses: Some(vec![
                    container(
                        "agent",
                        ContainerState {
                            running: Some(ContainerStateRunning {
                                started_at: Some(at(120)),
                            }),
                            ..ContainerState::default()
                        },
                    ),
                    container(
                        "sandbox",
                        ContainerState {
                            waiting: Some(ContainerStateWaiting {
                                reason: Some("CrashLoopBackOff".into()),
                                message: Some("back-off 10s".into()),
                            }),
                            ..ContainerState::default()
                        },
                    ),
                ]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        let around = Around {
            children: vec![&runs[1], &runs[2]],
            pod: Some(Ok(pod)),
            events: Ok(vec![
                event("notes-1", "Pod", "Started", "Started container agent", 120),
                event("notes", "Run", "PodCreated", "created Pod notes-1", 111),
            ]),
        };
        insta::assert_snapshot!(
            "describe_parent",
            render(&runs[0], &around, at(GOLDEN_NOW).0)
        );
    }

    #[test]
    fn a_child_waiting_for_an_answer() {
        let runs = family_tree();
        let around = Around {
            children: vec![],
            pod: Some(Err("deleted".into())),
            events: Err("events is forbidden".into()),
        };
        insta::assert_snapshot!(
            "describe_waiting",
            render(&runs[2], &around, at(GOLDEN_NOW).0)
        );
    }

    #[test]
    fn held_tool_calls_are_listed_with_how_to_decide() {
        let requests = vec![
            herd_crds::approval::ApprovalRequest::new(
                "call_1",
                "bash",
                r#"{"command":"rm -rf build/"}"#,
            ),
            herd_crds::approval::ApprovalRequest::new("call_2", "github__merge", "{}"),
        ];
        let run = crate::testing::approval_run(&requests, &[]);
        let around = Around {
            children: vec![],
            pod: None,
            events: Ok(vec![]),
        };
        let text = render(&run, &around, at(GOLDEN_NOW).0);
        let section: Vec<&str> = text
            .lines()
            .skip_while(|line| *line != "Waiting for approval:")
            .take_while(|line| *line == "Waiting for approval:" || line.starts_with("  "))
            .collect();
        insta::assert_snapshot!("describe_held_calls", section.join("\n"));
    }

    #[test]
    fn a_finished_child_with_a_file() {
        let runs = family_tree();
        let around = Around {
            children: vec![],
            pod: None,
            events: Ok(vec![]),
        };
        let text = render(&runs[1], &around, at(GOLDEN_NOW).0);
        assert!(text.contains("  outputs/note-a.md (512 bytes)"), "{text}");
        assert!(text.contains("Duration:       55s"), "{text}");
        assert!(text.ends_with("Events:\n  <none>\n"), "{text}");
    }
}
