//! Which answers in `spec.responses` match no question: each is judged once, when the Run
//! controller first sees it, and one that answers no question the Run asked (the open one, or
//! one listed in its checkpoint) is ignored with a Warning Event. The ids judged are kept in the
//! Run's annotation [`JUDGED_ANNOTATION`], so a reconcile, or a restarted operator, never warns
//! twice. Answers a Run has before it is accepted are given ahead of the questions (the runner
//! hands them out when the question comes), never ignored.
//!
//! Judging against the questions asked, not only the open one, keeps an answer the runner took
//! and moved on from before the controller looked from being taken for a stray.

use std::collections::BTreeSet;

use herd_crds::run::Response;

/// The Run annotation listing the ids of the answers judged (a JSON list).
pub const JUDGED_ANNOTATION: &str = "herd.dev/answers-judged";
/// The reason of the Event about an ignored answer.
pub const ANSWER_IGNORED: &str = "AnswerIgnored";

/// The answers judged so far, from [`JUDGED_ANNOTATION`]'s value (none when absent or
/// unreadable).
pub fn judged_answers(annotation: Option<&str>) -> BTreeSet<String> {
    annotation
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// The answers not judged yet, in their order.
pub fn new_answers<'a>(responses: &'a [Response], judged: &BTreeSet<String>) -> Vec<&'a Response> {
    responses
        .iter()
        .filter(|r| !judged.contains(&r.id))
        .collect()
}

/// What the Run's questions make of its new answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    /// Every answer judged, these included: the annotation's next value.
    pub judged: BTreeSet<String>,
    /// The new answers that match no question, with the Event's message.
    pub ignored: Vec<(String, String)>,
}

impl Judgement {
    /// The value of [`JUDGED_ANNOTATION`].
    pub fn annotation(&self) -> String {
        // invariant: a set of strings always serializes.
        serde_json::to_string(&self.judged).unwrap_or_else(|_| "[]".to_owned())
    }
}

/// Judges `new` answers of a Run `accepted` or not, whose open question is `pending` and which
/// asked `asked`, adding them to `judged`.
pub fn judge(
    new: &[&Response],
    judged: &BTreeSet<String>,
    accepted: bool,
    pending: Option<&str>,
    asked: &[String],
) -> Judgement {
    let matches = |id: &str| pending == Some(id) || asked.iter().any(|a| a == id);
    let ignored = new
        .iter()
        .filter(|answer| accepted && !matches(&answer.id))
        .map(|answer| {
            let open = match pending {
                Some(open) => format!("the open question is {open:?}"),
                None => "no question is open".to_owned(),
            };
            (
                answer.id.clone(),
                format!(
                    "the answer {:?} in spec.responses matches no question of this Run ({open}); \
                     it is ignored",
                    answer.id
                ),
            )
        })
        .collect();
    let mut all = judged.clone();
    all.extend(new.iter().map(|answer| answer.id.clone()));
    Judgement {
        judged: all,
        ignored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(ids: &[&str]) -> Vec<Response> {
        ids.iter().map(|id| Response::answer(id, "yes")).collect()
    }

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    #[test]
    fn only_answers_not_judged_yet_are_new() {
        let given = answers(&["q-1", "q-2", "q-3"]);
        let new: Vec<_> = new_answers(&given, &set(&["q-2"]))
            .iter()
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(new, vec!["q-1", "q-3"]);
        assert!(new_answers(&given, &set(&["q-1", "q-2", "q-3"])).is_empty());
    }

    #[test]
    fn an_answer_to_the_open_or_an_earlier_question_is_taken() {
        let given = answers(&["q-2", "q-1"]);
        let new = new_answers(&given, &BTreeSet::new());
        let judged = judge(&new, &BTreeSet::new(), true, Some("q-2"), &["q-1".into()]);
        assert_eq!(judged.ignored, vec![]);
        assert_eq!(judged.judged, set(&["q-1", "q-2"]));
        assert_eq!(judged.annotation(), r#"["q-1","q-2"]"#);
    }

    #[test]
    fn an_answer_matching_no_question_is_ignored_once() {
        let given = answers(&["q-1", "typo"]);
        let judged_before = set(&["q-1"]);
        let new = new_answers(&given, &judged_before);
        let first = judge(
            &new,
            &judged_before,
            true,
            Some("q-2"),
            &["q-1".into(), "q-2".into()],
        );
        assert_eq!(first.ignored.len(), 1);
        let (id, message) = &first.ignored[0];
        assert_eq!(id, "typo");
        assert_eq!(
            message,
            "the answer \"typo\" in spec.responses matches no question of this Run (the open \
             question is \"q-2\"); it is ignored"
        );
        let again = new_answers(&given, &first.judged);
        assert!(again.is_empty(), "judged: never warned again");
        let closed = judge(&new, &judged_before, true, None, &[]);
        assert!(closed.ignored[0].1.contains("(no question is open)"));
    }

    #[test]
    fn answers_before_acceptance_are_given_ahead_of_the_questions() {
        let given = answers(&["q-call_1"]);
        let new = new_answers(&given, &BTreeSet::new());
        let judged = judge(&new, &BTreeSet::new(), false, None, &[]);
        assert_eq!(judged.ignored, vec![]);
        assert_eq!(judged.judged, set(&["q-call_1"]));
    }

    #[test]
    fn an_unreadable_annotation_judges_again_rather_than_never() {
        assert_eq!(judged_answers(None), BTreeSet::new());
        assert_eq!(judged_answers(Some("q-1,q-2")), BTreeSet::new());
        assert_eq!(judged_answers(Some(r#"["q-1"]"#)), set(&["q-1"]));
    }
}
