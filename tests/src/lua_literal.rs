//! JSON as Lua 5.1 source: the table constructor that builds the same value Argo CD gives a
//! health script as `obj` (objects become tables with string keys, arrays sequences from 1,
//! numbers Lua numbers, `null` nil).

use std::fmt::Write as _;

use serde_json::Value;

/// The Lua expression for `value`.
pub fn lua_value(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// A Lua 5.1 string literal holding exactly `text`'s bytes.
pub fn lua_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_string(&mut out, text);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("nil"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // Display gives the shortest decimal that reads back as the same double, which Lua's
        // reader accepts; integers print without a fraction.
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('{');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push('}');
        }
        Value::Object(fields) => {
            out.push('{');
            for (i, (key, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push('[');
                write_string(out, key);
                out.push_str("] = ");
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Always three digits: Lua reads up to three, so a digit that follows stays text.
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\{:03}", u32::from(c));
            }
            // Lua strings are bytes: UTF-8 goes in as it is.
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::argo_cd;
    use crate::external_tools::LUA;

    #[test]
    fn scalars() {
        assert_eq!(lua_value(&json!(null)), "nil");
        assert_eq!(lua_value(&json!(true)), "true");
        assert_eq!(lua_value(&json!(-3)), "-3");
        assert_eq!(lua_value(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(lua_value(&json!(0.5)), "0.5");
        assert_eq!(lua_value(&json!("a")), "\"a\"");
    }

    #[test]
    fn escapes_what_a_lua_string_cannot_hold() {
        assert_eq!(lua_string("say \"hi\""), r#""say \"hi\"""#);
        assert_eq!(lua_string("a\\b"), r#""a\\b""#);
        assert_eq!(lua_string("1\n2\r\t"), r#""1\n2\r\t""#);
        assert_eq!(lua_string("\u{0}7"), r#""\0007""#);
        assert_eq!(lua_string("\u{1b}[\u{7f}"), r#""\027[\127""#);
        assert_eq!(lua_string("ü → 🐑"), "\"ü → 🐑\"");
    }

    #[test]
    fn objects_are_tables_with_string_keys_and_arrays_sequences() {
        let value = json!({"a": [1, "x"], "herd.dev/run": {"b": false}});
        assert_eq!(
            lua_value(&value),
            r#"{["a"] = {1, "x"}, ["herd.dev/run"] = {["b"] = false}}"#
        );
        assert_eq!(lua_value(&json!({})), "{}");
        assert_eq!(lua_value(&json!([])), "{}");
    }

    /// Runs `program` with `lua5.1`, returning its stdout; `None` when lua5.1 is missing
    /// outside CI (said on stderr).
    fn run_lua(program: &str) -> Option<Vec<u8>> {
        let lua = LUA.find("lua_literal tests").unwrap()?;
        Some(argo_cd::run_lua(&lua, program).unwrap())
    }

    #[test]
    fn lua_reads_the_table_as_argo_cd_builds_it() {
        let value = json!({
            "metadata": {"name": "a", "generation": 3,
                "labels": {"herd.dev/run": "x"}, "deletionTimestamp": null},
            "status": {"conditions": [{"type": "Ready", "status": "True"},
                {"type": "Accepted", "status": "False"}], "ratio": 0.25},
        });
        let program = format!(
            "local obj = {}\n\
             io.write(obj.metadata.name, ' ', obj.metadata.generation + 1, ' ',\n\
               obj.metadata.labels['herd.dev/run'], ' ', tostring(obj.metadata.deletionTimestamp), ' ',\n\
               #obj.status.conditions, ' ', obj.status.conditions[2].type, ' ', obj.status.ratio * 4)",
            lua_value(&value)
        );
        let Some(out) = run_lua(&program) else {
            return;
        };
        assert_eq!(String::from_utf8(out).unwrap(), "a 4 x nil 2 Accepted 1");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Any string, quotes, backslashes, control characters, newlines and non-ASCII
        /// included, reads back byte for byte.
        #[test]
        fn strings_round_trip(
            text in prop_oneof![
                any::<String>(),
                "[\"\\\\\n\r\t\u{0}-\u{1f}\u{7f}0-9a-zé→🐑]{0,40}",
            ]
        ) {
            let program = format!("io.write({})", lua_string(&text));
            if let Some(out) = run_lua(&program) {
                prop_assert_eq!(out, text.into_bytes());
            }
        }
    }
}
