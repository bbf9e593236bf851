//! What `--follow` shows of a Run: a [`View`] of its status, the lines that tell what changed
//! since the last one (plain output), and the one-line summary a spinner carries (terminal).

use herd_crds::condition::find_condition;
use herd_crds::reason::condition_type;
use herd_crds::reason::run::POD_PENDING;
use herd_crds::report::{Todo, TodoStatus, Usage};
use herd_crds::run::{ChildRef, Run, RunPhase, phase_of};
use herd_crds::terminal_text::one_line;

use crate::outcome::pending_question;

/// The parts of a Run's status that `--follow` shows.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// The phase (`status.phase`, else derived from the conditions).
    pub phase: RunPhase,
    /// The `Succeeded` condition's reason, empty without one.
    pub reason: String,
    /// The `Succeeded` condition's message.
    pub message: String,
    /// The current attempt.
    pub attempt: Option<u32>,
    /// The conversation's title, written by the agent.
    pub title: Option<String>,
    /// The agent's plan.
    pub todos: Vec<Todo>,
    /// The child Runs and their phases.
    pub children: Vec<ChildRef>,
    /// Tokens and calls so far.
    pub usage: Usage,
    /// `spec.cancel` is set and the Run has not ended yet.
    pub cancelling: bool,
    /// Whether the Run has had a Pod (`status.podName`).
    pub has_pod: bool,
    /// The Run still shows a question that `spec.responses` already answers: it resumes.
    pub answered: bool,
}

/// The view of `run`'s status; an absent or partial status is a `Pending` view.
pub fn view(run: &Run) -> View {
    let status = run.status.clone().unwrap_or_default();
    let succeeded = find_condition(&status.conditions, condition_type::SUCCEEDED);
    let report = status.report.unwrap_or_default();
    let phase = status.phase.unwrap_or_else(|| phase_of(&status.conditions));
    View {
        phase,
        reason: succeeded.map(|c| c.reason.clone()).unwrap_or_default(),
        message: succeeded.map(|c| c.message.clone()).unwrap_or_default(),
        attempt: status.attempt,
        title: report.title,
        todos: report.todos,
        children: status.children,
        usage: report.usage,
        cancelling: run.spec.cancel && !phase.is_finished(),
        has_pod: status.pod_name.is_some(),
        answered: phase == RunPhase::InputRequired && pending_question(run).is_none(),
    }
}

/// The name a phase is shown with.
pub fn phase_name(phase: RunPhase) -> &'static str {
    match phase {
        RunPhase::Pending => "Pending",
        RunPhase::Queued => "Queued",
        RunPhase::Running => "Running",
        RunPhase::InputRequired => "InputRequired",
        RunPhase::Suspended => "Suspended",
        RunPhase::Succeeded => "Succeeded",
        RunPhase::Failed => "Failed",
        RunPhase::Cancelled => "Cancelled",
    }
}

fn todo_mark(status: TodoStatus) -> &'static str {
    match status {
        TodoStatus::Pending => "[ ]",
        TodoStatus::InProgress => "[>]",
        TodoStatus::Completed => "[x]",
    }
}

/// `Starting: pod r-1 is starting`, `Failed (TimedOut): …`: the phase (a Run whose Pod is
/// pending is `Starting`), the reason when it says more, the message when there is one.
fn phase_line(view: &View) -> String {
    if view.answered {
        return "Resuming: the question is answered".to_owned();
    }
    let starting = view.phase == RunPhase::Running && view.reason == POD_PENDING;
    let mut line = if starting {
        "Starting"
    } else {
        phase_name(view.phase)
    }
    .to_owned();
    if !starting && !view.reason.is_empty() && view.reason != line {
        line.push_str(&format!(" ({})", one_line(&view.reason)));
    }
    if !view.message.is_empty() {
        line.push_str(&format!(": {}", one_line(&view.message)));
    }
    line
}

/// The lines that tell what changed from `previous` (none yet: everything) to `next`, for
/// output that is not a terminal. Text from the Run is made safe to print.
pub fn changes(previous: Option<&View>, next: &View) -> Vec<String> {
    let mut lines = Vec::new();
    let phase_changed = previous.is_none_or(|p| {
        (p.phase, &p.reason, &p.message, p.answered)
            != (next.phase, &next.reason, &next.message, next.answered)
    });
    if phase_changed {
        lines.push(phase_line(next));
    }
    if next.cancelling && previous.is_none_or(|p| !p.cancelling) {
        let line = if next.has_pod {
            "cancelling: its pod is being deleted"
        } else {
            "cancelling"
        };
        lines.push(line.to_owned());
    }
    if let Some(attempt) = next.attempt
        && attempt > 1
        && previous.is_some_and(|p| p.attempt != next.attempt)
    {
        lines.push(format!("attempt {attempt}"));
    }
    if next.title.is_some() && previous.is_none_or(|p| p.title != next.title) {
        lines.push(format!(
            "title: {}",
            one_line(next.title.as_deref().unwrap_or_default())
        ));
    }
    if !next.todos.is_empty() && previous.is_none_or(|p| p.todos != next.todos) {
        lines.push("todos:".to_owned());
        for todo in &next.todos {
            lines.push(format!(
                "  {} {}",
                todo_mark(todo.status),
                one_line(&todo.content)
            ));
        }
    }
    for child in &next.children {
        let before = previous.and_then(|p| p.children.iter().find(|c| c.name == child.name));
        if before.is_none_or(|b| b.state != child.state) {
            lines.push(format!(
                "child {}: {}",
                one_line(&child.name),
                phase_name(child.state)
            ));
        }
    }
    if next.usage.model_calls > 0
        && previous.is_none_or(|p| p.usage.model_calls != next.usage.model_calls)
    {
        lines.push(usage_line(&next.usage));
    }
    lines
}

/// `3 model calls · 2 tool calls · 300 tokens in / 6 out`.
pub fn usage_line(usage: &Usage) -> String {
    format!(
        "{} model calls · {} tool calls · {} tokens in / {} out",
        usage.model_calls, usage.tool_calls, usage.input_tokens, usage.output_tokens
    )
}

/// The spinner's message: `notes-x1y2z Running · Six notes · todos 1/3 · children 2/6 done ·
/// model call 3 · 1.2k tokens`; a Run whose question is answered is `Resuming`.
pub fn status_line(name: &str, view: &View) -> String {
    let phase = if view.answered {
        "Resuming"
    } else {
        phase_name(view.phase)
    };
    let mut parts = vec![format!("{} {phase}", one_line(name))];
    if view.cancelling {
        parts.push("cancelling".to_owned());
    }
    if let Some(title) = &view.title {
        parts.push(one_line(title));
    }
    if !view.todos.is_empty() {
        let done = view
            .todos
            .iter()
            .filter(|t| t.status == TodoStatus::Completed)
            .count();
        parts.push(format!("todos {done}/{}", view.todos.len()));
    }
    if !view.children.is_empty() {
        let done = view
            .children
            .iter()
            .filter(|c| c.state.is_finished())
            .count();
        parts.push(format!("children {done}/{} done", view.children.len()));
    }
    if view.usage.model_calls > 0 {
        parts.push(format!("model call {}", view.usage.model_calls));
    }
    if view.usage.total_tokens() > 0 {
        parts.push(format!("{} tokens", tokens_text(view.usage.total_tokens())));
    }
    parts.join(" · ")
}

/// Tokens as a person reads them: `-` for none, `850`, `1.2k`, `35k`, `1.4M`.
pub fn tokens_text(tokens: u64) -> String {
    match tokens {
        0 => "-".to_owned(),
        1..1_000 => tokens.to_string(),
        1_000..10_000 => format!("{:.1}k", tokens as f64 / 1_000.0),
        10_000..1_000_000 => format!("{}k", tokens / 1_000),
        _ => format!("{:.1}M", tokens as f64 / 1_000_000.0),
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::condition::ConditionStatus;
    use herd_crds::run::RunStatus;

    use super::*;
    use crate::testing::{question_run, run_named, run_with};

    fn todo(content: &str, status: TodoStatus) -> Todo {
        Todo {
            content: content.into(),
            status,
        }
    }

    fn child(name: &str, state: RunPhase) -> ChildRef {
        ChildRef {
            name: name.into(),
            state,
        }
    }

    fn running() -> View {
        view(&run_with(
            Some((ConditionStatus::Unknown, "Running")),
            None,
            None,
        ))
    }

    #[test]
    fn tokens_read_short() {
        let shown: Vec<String> = [0, 850, 1_234, 35_600, 1_400_000].map(tokens_text).to_vec();
        assert_eq!(shown, ["-", "850", "1.2k", "35k", "1.4M"]);
    }

    #[test]
    fn a_run_without_status_is_pending() {
        let view = view(&run_named("r"));
        assert_eq!(view.phase, RunPhase::Pending);
        assert_eq!(changes(None, &view), vec!["Pending"]);
        assert_eq!(status_line("r", &view), "r Pending");
        let mut empty = run_named("r");
        empty.status = Some(RunStatus::default());
        assert_eq!(super::view(&empty).phase, RunPhase::Pending);
    }

    #[test]
    fn the_first_view_shows_everything() {
        let mut next = running();
        next.title = Some("A colour".into());
        next.todos = vec![
            todo("Ask", TodoStatus::Completed),
            todo("Paint", TodoStatus::InProgress),
            todo("Dry", TodoStatus::Pending),
        ];
        next.children = vec![child("r-1", RunPhase::Running)];
        next.usage = Usage {
            input_tokens: 300,
            output_tokens: 6,
            model_calls: 2,
            tool_calls: 1,
            ..Usage::default()
        };
        assert_eq!(
            changes(None, &next),
            vec![
                "Running: said Running",
                "title: A colour",
                "todos:",
                "  [x] Ask",
                "  [>] Paint",
                "  [ ] Dry",
                "child r-1: Running",
                "2 model calls · 1 tool calls · 300 tokens in / 6 out",
            ]
        );
        assert_eq!(
            status_line("r", &next),
            "r Running · A colour · todos 1/3 · children 0/1 done · model call 2 · 306 tokens"
        );
    }

    #[test]
    fn later_views_show_only_what_changed() {
        let before = running();
        assert!(changes(Some(&before), &before).is_empty());

        let mut next = before.clone();
        next.usage.input_tokens = 10;
        assert!(
            changes(Some(&before), &next).is_empty(),
            "tokens alone wait for a model call"
        );
        next.usage.model_calls = 1;
        assert_eq!(changes(Some(&before), &next).len(), 1);

        let mut parent = before.clone();
        parent.children = vec![child("a", RunPhase::Running), child("b", RunPhase::Queued)];
        let mut later = parent.clone();
        later.children = vec![
            child("a", RunPhase::Succeeded),
            child("b", RunPhase::Queued),
        ];
        assert_eq!(changes(Some(&parent), &later), vec!["child a: Succeeded"]);

        let mut retried = before.clone();
        retried.attempt = Some(2);
        retried.reason = "Queued".into();
        retried.phase = RunPhase::Queued;
        retried.message = "attempt 2 after attempt 1 failed: evicted".into();
        assert_eq!(
            changes(Some(&before), &retried),
            vec![
                "Queued: attempt 2 after attempt 1 failed: evicted",
                "attempt 2"
            ]
        );
    }

    #[test]
    fn a_cancel_shows_until_the_run_ends() {
        let mut asked = run_with(Some((ConditionStatus::Unknown, "Running")), None, None);
        if let Some(status) = asked.status.as_mut() {
            status.pod_name = Some("r-1".into());
        }
        let before = view(&asked);
        asked.spec.cancel = true;
        let cancelling = view(&asked);
        assert_eq!(
            changes(Some(&before), &cancelling),
            vec!["cancelling: its pod is being deleted"]
        );
        assert_eq!(status_line("r", &cancelling), "r Running · cancelling");
        let mut ended = run_with(Some((ConditionStatus::False, "Cancelled")), None, None);
        ended.spec.cancel = true;
        assert!(!view(&ended).cancelling);
    }

    #[test]
    fn reasons_show_when_they_say_more_than_the_phase() {
        let mut next = running();
        next.reason = "PodPending".into();
        next.message = String::new();
        assert_eq!(changes(None, &next), vec!["Starting"]);
        next.reason = "ModelError".into();
        assert_eq!(changes(None, &next), vec!["Running (ModelError)"]);
    }

    #[test]
    fn an_answered_question_is_not_shown_as_waiting() {
        let waiting = question_run("q", &[]);
        let before = view(&waiting);
        assert!(!before.answered);
        assert_eq!(status_line("r", &before), "r InputRequired");
        let answered = question_run("q", &[herd_crds::run::Response::answer("q", "teal")]);
        let after = view(&answered);
        assert_eq!(status_line("r", &after), "r Resuming");
        assert_eq!(
            changes(Some(&before), &after),
            vec!["Resuming: the question is answered"]
        );
    }

    #[test]
    fn run_text_cannot_drive_the_terminal() {
        let mut next = running();
        next.title = Some("\u{1b}[2Jgone\nline".into());
        next.todos = vec![todo("\u{1b}]0;x\u{7}", TodoStatus::Pending)];
        let lines = changes(None, &next);
        assert!(
            lines
                .iter()
                .all(|l| !l.contains('\u{1b}') && !l.contains('\n')),
            "{lines:?}"
        );
        assert!(!status_line("r", &next).contains('\u{1b}'));
    }
}
