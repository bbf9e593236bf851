//! `kubectl herd answer RUN TEXT`: appends `{id, answer}` to `spec.responses` with a JSON
//! patch, the id being the pending question's; answers are append-only, and the patch only
//! applies to the Run and the answers it was decided on.

use herd_crds::run::{MAX_ANSWER, MAX_RESPONSES, Run};
use herd_crds::terminal_text::one_line;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::connect::Cluster;
use crate::error::{CliError, api_error};
use crate::outcome::{Outcome, outcome, pending_question};
use crate::runs::{get_run, run_target, runs};
use crate::view::{phase_name, view};

/// The answer to a pending question, as a patch.
#[derive(Clone, Debug, PartialEq)]
pub struct AnswerPatch {
    /// The question's id.
    pub id: String,
    /// The JSON patch (RFC 6902).
    pub patch: Value,
}

/// The JSON patch answering `run`'s pending question with `text`, or why there is none to
/// answer. It tests the Run's uid and its answers so far: a Run recreated under the same name
/// or answered meanwhile refuses it.
pub fn answer_patch(run: &Run, text: &str) -> Result<AnswerPatch, String> {
    let name = run.name_any();
    if text.trim().is_empty() {
        return Err(format!(
            "the answer is empty: give it as text, e.g. kubectl herd answer {name} \"Europe only\""
        ));
    }
    let chars = text.chars().count();
    if chars > MAX_ANSWER {
        return Err(format!(
            "the answer has {chars} characters; a Run takes at most {MAX_ANSWER}"
        ));
    }
    let Some(question) = pending_question(run) else {
        return Err(no_question(run));
    };
    if run.spec.responses.len() >= MAX_RESPONSES {
        return Err(format!(
            "Run {name} already has {} answers, the most a Run takes: it cannot be answered \
             again (kubectl herd cancel {name} stops it)",
            run.spec.responses.len()
        ));
    }
    let patch = json!([
        {"op": "test", "path": "/metadata/uid", "value": run.metadata.uid},
        {"op": "test", "path": "/spec/responses", "value": run.spec.responses},
        {"op": "add", "path": "/spec/responses/-", "value": {"id": question.id, "answer": text}},
    ]);
    Ok(AnswerPatch {
        id: question.id.clone(),
        patch,
    })
}

/// Why `run` has nothing to answer.
fn no_question(run: &Run) -> String {
    let name = run.name_any();
    let asked = run
        .status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .and_then(|r| r.clarification.as_ref());
    match (outcome(run), asked) {
        (Outcome::Going, _) if run.spec.cancel => format!(
            "Run {name} is being cancelled: it takes no answer any more (kubectl herd get {name})"
        ),
        (Outcome::Answered(_) | Outcome::Failed { .. }, _) => format!(
            "Run {name} has finished ({}): it asks nothing any more (kubectl herd result {name})",
            phase_name(view(run).phase)
        ),
        (_, Some(question)) => {
            let given = run
                .spec
                .responses
                .iter()
                .find(|r| r.id == question.id)
                .map(|r| one_line(r.answer.as_deref().unwrap_or_default()))
                .unwrap_or_default();
            format!(
                "the question {} of Run {name} is already answered ({given:?}); the agent picks \
                 the answer up shortly (kubectl herd follow {name})",
                one_line(&question.id)
            )
        }
        (_, None) => format!(
            "Run {name} has no pending question: it is {} (kubectl herd get {name})",
            phase_name(view(run).phase)
        ),
    }
}

/// Answers the Run `name`'s question with `text`; the question's id.
pub async fn answer(cluster: &Cluster, name: &str, text: &str) -> Result<String, CliError> {
    let run = get_run(cluster, name).await?;
    let AnswerPatch { id, patch } = answer_patch(&run, text).map_err(CliError::new)?;
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| CliError::new(e.to_string()))?;
    let object = format!("Run {name}");
    match runs(cluster)
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        Ok(_) => Ok(id),
        // A failed `test` operation: the Run was answered or recreated since it was read.
        Err(kube::Error::Api(status)) if status.code == 422 => {
            let again = get_run(cluster, name).await?;
            match answer_patch(&again, text) {
                Err(why) => Err(CliError::new(why)),
                Ok(_) => Err(CliError::new(format!(
                    "the API server refused the answer to Run {name}: {} (run the command again)",
                    one_line(&status.message)
                ))),
            }
        }
        Err(error) => Err(api_error(&error, run_target(cluster, &object, "answering"))),
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::condition::ConditionStatus;
    use herd_crds::run::Response;

    use super::*;
    use crate::testing::{question_run, run_with};

    fn response(id: &str, answer: &str) -> Response {
        Response::answer(id, answer)
    }

    #[test]
    fn the_patch_appends_the_answer_to_the_pending_question() {
        let run = question_run("q2", &[response("q1", "teal")]);
        let answer = answer_patch(&run, "Europe only").unwrap();
        assert_eq!(answer.id, "q2");
        assert_eq!(
            answer.patch,
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "uid-r"},
                {"op": "test", "path": "/spec/responses", "value": [{"id": "q1", "answer": "teal"}]},
                {"op": "add", "path": "/spec/responses/-", "value": {"id": "q2", "answer": "Europe only"}},
            ])
        );
        let patch: Result<json_patch::Patch, _> =
            serde_json::from_value(answer_patch(&run, "x").unwrap().patch);
        assert!(patch.is_ok(), "a valid RFC 6902 patch");
    }

    #[test]
    fn no_pending_question_says_where_the_run_is() {
        let running = run_with(Some((ConditionStatus::Unknown, "Running")), None, None);
        assert_eq!(
            answer_patch(&running, "x").unwrap_err(),
            "Run r has no pending question: it is Running (kubectl herd get r)"
        );
        let done = run_with(Some((ConditionStatus::True, "Succeeded")), None, None);
        assert_eq!(
            answer_patch(&done, "x").unwrap_err(),
            "Run r has finished (Succeeded): it asks nothing any more (kubectl herd result r)"
        );
        let mut cancelling = question_run("q1", &[]);
        cancelling.spec.cancel = true;
        assert_eq!(
            answer_patch(&cancelling, "x").unwrap_err(),
            "Run r is being cancelled: it takes no answer any more (kubectl herd get r)"
        );
        let answered = question_run("q1", &[response("q1", "teal")]);
        assert_eq!(
            answer_patch(&answered, "red").unwrap_err(),
            "the question q1 of Run r is already answered (\"teal\"); the agent picks the answer \
             up shortly (kubectl herd follow r)"
        );
    }

    #[test]
    fn empty_long_and_one_too_many_answers_are_refused() {
        let run = question_run("q1", &[]);
        assert!(answer_patch(&run, " \n").unwrap_err().contains("empty"));
        let long = "x".repeat(MAX_ANSWER + 1);
        assert!(
            answer_patch(&run, &long)
                .unwrap_err()
                .contains("at most 16384")
        );
        assert!(answer_patch(&run, &"x".repeat(MAX_ANSWER)).is_ok());
        let full: Vec<Response> = (0..MAX_RESPONSES)
            .map(|i| response(&format!("q{i}"), "a"))
            .collect();
        let run = question_run("next", &full);
        assert!(
            answer_patch(&run, "x")
                .unwrap_err()
                .contains("the most a Run takes")
        );
    }
}
