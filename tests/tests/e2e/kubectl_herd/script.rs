//! The scripted conversation of the question tests: the lead asks which colour, then paints
//! with the one it was told.

use serde_json::json;

/// The question's text.
pub const QUESTION: &str = "Which colour?";
/// The colour the user answers (the first option).
pub const COLOUR: &str = "teal";
/// The lead's answer once told.
pub const PAINTED: &str = "Painting it teal.";

/// The script: ask, then answer with the colour given.
pub fn ask_script() -> String {
    json!({"rules": [
        {"match": {"purpose": "title"}, "respond": {"content": "A colour"}},
        {"match": {"role": "lead", "call": 1}, "respond": {"toolCalls": [
            {"name": "ask_clarification", "arguments": {"question": QUESTION,
                "clarification_type": "missing_info", "options": [COLOUR, "red"]}}]}},
        // The answer comes as a user message (the question's tool result lists every option).
        {"match": {"role": "lead", "call": 2, "anyMessage": {"role": "user", "contains": COLOUR}},
            "respond": {"content": PAINTED}},
        {"match": {"role": "lead", "call": 2}, "respond": {"content": "No colour given."}},
    ]})
    .to_string()
}
