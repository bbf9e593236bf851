//! The scripted conversations of the kubectl herd and dashboard tests: the question tests' lead
//! asks which colour, then paints with the one it was told; the family tests' lead delegates two
//! notes.

use serde_json::{Value, json};

/// The question's text.
pub const QUESTION: &str = "Which colour?";
/// The colour the user answers (the first option).
pub const COLOUR: &str = "teal";
/// The lead's answer once told.
pub const PAINTED: &str = "Painting it teal.";

/// The opening rules of every script asking the colour: the title, then the question.
pub fn asking() -> [Value; 2] {
    [
        json!({"match": {"purpose": "title"}, "respond": {"content": "A colour"}}),
        json!({"match": {"role": "lead", "call": 1}, "respond": {"toolCalls": [
            {"name": "ask_clarification", "arguments": {"question": QUESTION,
                "clarification_type": "missing_info", "options": [COLOUR, "red"]}}]}}),
    ]
}

/// The script: ask, then answer with the colour given.
pub fn ask_script() -> String {
    let [title, question] = asking();
    json!({"rules": [
        title,
        question,
        // The answer comes as a user message (the question's tool result lists every option).
        {"match": {"role": "lead", "call": 2, "anyMessage": {"role": "user", "contains": COLOUR}},
            "respond": {"content": PAINTED}},
        {"match": {"role": "lead", "call": 2}, "respond": {"content": "No colour given."}},
    ]})
    .to_string()
}

/// The parent's answer once both children answered.
pub const BOTH: &str = "Both notes are written.";

/// The lead delegates two notes at once, then answers; each child answers at once.
pub fn fan_out_script() -> String {
    let task = |note: &str| {
        json!({"name": "task", "arguments": {"description": format!("Note {note}"),
            "prompt": format!("Write the note {note}."), "subagent_type": "general-purpose"}})
    };
    json!({"rules": [
        {"match": {"purpose": "title"}, "respond": {"content": "Two notes"}},
        {"match": {"role": "lead", "call": 1}, "respond": {"toolCalls": [task("alpha"), task("beta")]}},
        {"match": {"role": "lead", "call": 2}, "respond": {"content": BOTH}},
        {"match": {"role": "subagent", "call": 1}, "respond": {"content": "Written."}},
    ]})
    .to_string()
}
