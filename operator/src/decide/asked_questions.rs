//! Which questions (and approval requests) a Run asked: listed, oldest first, as JSON in the
//! annotation `herd.dev/questions` of its checkpoint ConfigMap `<run>-checkpoint`, so an answer
//! can be told from one that matches none. The run API writes the list; the Run controller
//! reads it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The annotation listing the ids of the questions the Run asked.
pub const QUESTIONS_ANNOTATION: &str = "herd.dev/questions";
/// Most question ids kept in [`QUESTIONS_ANNOTATION`] (a Run takes at most 32 answers).
pub const MAX_QUESTIONS: usize = 64;
/// The name of a Run's checkpoint ConfigMap.
pub fn checkpoint_name(run: &str) -> String {
    format!("{run}-checkpoint")
}

/// The question ids a checkpoint ConfigMap lists (none when it lists none or not readably).
pub fn asked_questions(config_map: &ObjectMeta) -> Vec<String> {
    config_map
        .annotations
        .as_ref()
        .and_then(|a| a.get(QUESTIONS_ANNOTATION))
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// `asked` with `id` last, the oldest dropped past [`MAX_QUESTIONS`].
pub fn with_question(mut asked: Vec<String>, id: &str) -> Vec<String> {
    asked.retain(|a| a != id);
    asked.push(id.to_owned());
    let excess = asked.len().saturating_sub(MAX_QUESTIONS);
    asked.drain(..excess);
    asked
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn unreadable_lists_are_empty() {
        let mut meta = ObjectMeta::default();
        assert!(asked_questions(&meta).is_empty());
        meta.annotations = Some(BTreeMap::from([(
            QUESTIONS_ANNOTATION.to_owned(),
            "q-1,q-2".to_owned(),
        )]));
        assert!(asked_questions(&meta).is_empty());
    }

    #[test]
    fn each_question_is_listed_once_and_the_list_is_bounded() {
        let asked = with_question(vec!["a".into(), "b".into()], "a");
        assert_eq!(asked, vec!["b", "a"], "asked again: last");
        let many = (0..MAX_QUESTIONS).fold(Vec::new(), |asked, n| {
            with_question(asked, &format!("q-{n}"))
        });
        let more = with_question(many, "last");
        assert_eq!(more.len(), MAX_QUESTIONS);
        assert_eq!(more.first().map(String::as_str), Some("q-1"));
        assert_eq!(more.last().map(String::as_str), Some("last"));
    }
}
