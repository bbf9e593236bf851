//! Argo CD's custom health checks as Argo CD runs them, with Debian's `lua5.1` standing in for
//! gopher-lua (also Lua 5.1): the object in the global `obj`, only the libraries Argo CD opens
//! for a script from `argocd-cm` (base, table, package and a safe `os`: no `string`, `math`, `io`
//! or `debug`, and no string methods), and the returned table read as `{status, message}`. A
//! status outside Argo CD's six is `Unknown`, as Argo CD makes it.
//!
//! Also what the chart ships: the scripts in `charts/herd/files/argocd/` (each resource's is
//! `prologue.lua` followed by its own file) and the snippets for `argocd-cm` that embed them.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::fixtures::{read_yaml, repo_root};
use crate::lua_literal::{lua_string, lua_value};

/// Argo CD's health statuses.
pub const STATUSES: [&str; 6] = [
    "Healthy",
    "Progressing",
    "Degraded",
    "Suspended",
    "Missing",
    "Unknown",
];

/// What Argo CD says when a script returns a status outside [`STATUSES`].
pub const INVALID_STATUS_MESSAGE: &str = "Lua returned an invalid health status";

/// A health script's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// One of [`STATUSES`].
    pub status: String,
    /// The message, empty when the script gave none.
    pub message: String,
}

/// The kinds the chart ships a health script for, with their `argocd-cm` keys and files.
pub const SCRIPTS: [(&str, &str); 5] = [
    ("Agent", "agent.lua"),
    ("Skill", "skill.lua"),
    ("Run", "run.lua"),
    ("Schedule", "schedule.lua"),
    ("Budget", "budget.lua"),
];

/// The `argocd-cm` key of a herd.dev kind's health script.
pub fn config_map_key(kind: &str) -> String {
    format!("resource.customizations.health.herd.dev_{kind}")
}

/// The folder of the shipped scripts.
pub fn scripts_dir() -> PathBuf {
    repo_root().join("charts/herd/files/argocd")
}

/// The part every health script starts with (the helpers they share).
pub const PROLOGUE: &str = "prologue.lua";

/// The shipped health script of `kind` as Argo CD receives it: [`PROLOGUE`], then the kind's
/// own file.
pub fn script(kind: &str) -> anyhow::Result<String> {
    let (_, file) = SCRIPTS
        .iter()
        .find(|(k, _)| *k == kind)
        .with_context(|| format!("no health script for {kind}"))?;
    Ok(read_script_file(PROLOGUE)? + &read_script_file(file)?)
}

fn read_script_file(name: &str) -> anyhow::Result<String> {
    let path = scripts_dir().join(name);
    std::fs::read_to_string(&path).with_context(|| path.display().to_string())
}

/// The snippets that embed the scripts: the argo-cd chart's values (`configs.cm`) and a merge
/// patch of `argocd-cm` (`data`), each with the JSON pointer to its `argocd-cm` data.
pub const SNIPPETS: [(&str, &str); 2] = [
    ("argocd-cm-values.yaml", "/configs/cm"),
    ("argocd-cm-patch.yaml", "/data"),
];

/// The scripts a snippet of [`SNIPPETS`] embeds, by `argocd-cm` key.
pub fn embedded_scripts(
    file: &str,
    pointer: &str,
) -> anyhow::Result<serde_json::Map<String, Value>> {
    let snippet = read_yaml(&scripts_dir().join(file))?;
    snippet
        .pointer(pointer)
        .and_then(Value::as_object)
        .cloned()
        .with_context(|| format!("{file} has nothing at {pointer}"))
}

/// The Lua program that runs `script` on `object` as Argo CD does and writes the returned
/// status, a newline and the message.
pub fn program(script: &str, object: &Value) -> String {
    format!(
        r#"local obj = {object}
local script = {script}
-- Argo CD opens these for a script from argocd-cm; everything else is missing.
local env = {{ obj = obj, table = table, package = package, require = require,
  os = {{ time = os.time, date = os.date, clock = os.clock, difftime = os.difftime,
    getenv = os.getenv }} }}
for _, name in ipairs({{ "assert", "error", "getmetatable", "ipairs", "load", "loadstring",
  "next", "pairs", "pcall", "print", "rawequal", "rawget", "rawset", "select", "setmetatable",
  "tonumber", "tostring", "type", "unpack", "xpcall", "_VERSION" }}) do
  env[name] = _G[name]
end
env._G = env
local write, stderr, exit = io.write, io.stderr, os.exit
local chunk, err = loadstring(script, "=health.lua")
if chunk == nil then
  stderr:write("the script does not compile: ", err)
  exit(2)
end
setfenv(chunk, env)
-- Without the string library, strings have no methods either.
getmetatable("").__index = nil
local ok, hs = pcall(chunk)
if not ok then
  stderr:write("the script failed: ", tostring(hs))
  exit(3)
end
if type(hs) ~= "table" then
  stderr:write("expect table output from Lua script, not ", type(hs))
  exit(4)
end
if type(hs.status) ~= "string" or (hs.message ~= nil and type(hs.message) ~= "string") then
  stderr:write("status and message must be strings")
  exit(5)
end
write(hs.status, "\n", hs.message or "")
"#,
        object = lua_value(object),
        script = lua_string(script),
    )
}

/// Runs `script` on `object` with the `lua5.1` at `lua`.
pub fn run_health_script(lua: &Path, script: &str, object: &Value) -> anyhow::Result<Health> {
    let stdout = run_lua(lua, &program(script, object))?;
    parse_output(&String::from_utf8(stdout)?)
}

/// Runs the Lua `program` with the `lua5.1` at `lua`, returning its stdout; fails with its
/// stderr unless it exits 0.
pub fn run_lua(lua: &Path, program: &str) -> anyhow::Result<Vec<u8>> {
    let mut child = Command::new(lua)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", lua.display()))?;
    child
        .stdin
        .take()
        .context("lua5.1's stdin")?
        .write_all(program.as_bytes())?;
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "{} ({}): {}\n{program}",
            lua.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(output.stdout)
}

fn parse_output(stdout: &str) -> anyhow::Result<Health> {
    let (status, message) = stdout
        .split_once('\n')
        .with_context(|| format!("no status line in {stdout:?}"))?;
    if !STATUSES.contains(&status) {
        return Ok(Health {
            status: "Unknown".into(),
            message: INVALID_STATUS_MESSAGE.into(),
        });
    }
    Ok(Health {
        status: status.to_owned(),
        message: message.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::external_tools::LUA;

    #[test]
    fn the_snippets_embed_exactly_the_scripts() {
        let mut expected: Vec<String> = SCRIPTS.iter().map(|(k, _)| config_map_key(k)).collect();
        expected.sort();
        for (snippet, pointer) in SNIPPETS {
            let embedded = embedded_scripts(snippet, pointer).unwrap();
            let mut found: Vec<String> = embedded.keys().cloned().collect();
            found.sort();
            assert_eq!(found, expected, "the keys of {snippet}");
            for (kind, file) in SCRIPTS {
                assert_eq!(
                    embedded[&config_map_key(kind)].as_str(),
                    Some(script(kind).unwrap().as_str()),
                    "{pointer} of {snippet} is not {PROLOGUE} + {file}: run scripts/argocd-snippets"
                );
            }
        }
    }

    #[test]
    fn the_chart_readme_shows_the_shipped_run_script() {
        let readme = std::fs::read_to_string(repo_root().join("charts/herd/README.md")).unwrap();
        let blocks = crate::fixtures::fenced_blocks(&readme, "lua");
        assert_eq!(
            blocks,
            [script("Run").unwrap()],
            "the lua block of charts/herd/README.md is not {PROLOGUE} + run.lua: copy them in"
        );
    }

    #[test]
    fn output_is_a_status_line_and_the_message() {
        let health = parse_output("Degraded\nskill x not found\nsecond line").unwrap();
        assert_eq!(health.status, "Degraded");
        assert_eq!(health.message, "skill x not found\nsecond line");
        assert_eq!(parse_output("Healthy\n").unwrap().message, "");
        let invalid = parse_output("Fine\nall good").unwrap();
        assert_eq!(
            (invalid.status.as_str(), invalid.message.as_str()),
            ("Unknown", INVALID_STATUS_MESSAGE)
        );
        assert!(parse_output("").is_err());
    }

    fn lua() -> Option<PathBuf> {
        LUA.find("argo_cd tests").unwrap()
    }

    #[test]
    fn runs_a_script_with_obj_and_reads_its_table() {
        let Some(lua) = lua() else { return };
        let script = r#"local hs = {}
hs.status = "Degraded"
hs.message = obj.metadata.name .. " says \"no\"\n" .. obj.metadata.generation
return hs
"#;
        let health = run_health_script(
            &lua,
            script,
            &json!({"metadata": {"name": "ü", "generation": 2}}),
        )
        .unwrap();
        assert_eq!(health.status, "Degraded");
        assert_eq!(health.message, "ü says \"no\"\n2");
    }

    #[test]
    fn only_argo_cds_libraries_are_there() {
        let Some(lua) = lua() else { return };
        let object = json!({"metadata": {"name": "a"}});
        for missing in [
            "string.format('%s', 'x')",
            "('x'):upper()",
            "math.floor(1.5)",
            "io.write('x')",
            "debug.traceback()",
            "os.execute('true')",
        ] {
            let script = format!("local v = {missing}\nreturn {{ status = \"Healthy\" }}\n");
            let error = run_health_script(&lua, &script, &object).unwrap_err();
            assert!(
                error.to_string().contains("the script failed"),
                "{missing}: {error}"
            );
        }
        let script = "table.insert({}, 1)\nreturn { status = tostring(#obj.metadata.name == 1 and 'Healthy') }\n";
        assert_eq!(
            run_health_script(&lua, script, &object).unwrap().status,
            "Healthy"
        );
    }

    #[test]
    fn a_script_must_return_a_table_with_a_valid_status() {
        let Some(lua) = lua() else { return };
        let object = json!({});
        let error = run_health_script(&lua, "return 'Healthy'\n", &object).unwrap_err();
        assert!(error.to_string().contains("expect table output"), "{error}");
        let invalid = run_health_script(&lua, "return { status = 'Fine' }\n", &object).unwrap();
        assert_eq!(invalid.status, "Unknown");
        let error = run_health_script(&lua, "return {\n", &object).unwrap_err();
        assert!(error.to_string().contains("does not compile"), "{error}");
    }
}
