//! `-o FORMAT` of the listing commands: the table (default), `wide`, `json`, `yaml`, `name`
//! and `jsonpath=TEMPLATE`, printed as kubectl prints them — one object for a named object,
//! a `List` otherwise, `metadata.managedFields` left out, `apiVersion` and `kind` always there.

use kube::Resource;
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::CliError;
use crate::jsonpath::Template;

/// How a command prints what it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// The command's table.
    Table,
    /// The table with more columns.
    Wide,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// `<kind>.<group>/<name>` (`run.herd.dev/notes`), one a line.
    Name,
    /// A kubectl-style JSONPath template.
    JsonPath(Template),
}

impl Output {
    /// Whether this prints a table (`wide` included).
    pub fn is_table(&self) -> bool {
        matches!(self, Output::Table | Output::Wide)
    }
}

/// Parses an `-o` value (clap's value parser).
pub fn parse_output(text: &str) -> Result<Output, String> {
    if let Some(template) = text.strip_prefix("jsonpath=") {
        return Template::parse(template).map(Output::JsonPath);
    }
    match text {
        "wide" => Ok(Output::Wide),
        "json" => Ok(Output::Json),
        "yaml" => Ok(Output::Yaml),
        "name" => Ok(Output::Name),
        other => Err(format!(
            "{other:?} is not an output format: use json, yaml, name, wide or jsonpath=TEMPLATE"
        )),
    }
}

/// `object` as JSON, with its `apiVersion` and `kind` and without `managedFields`.
pub fn object_value<K>(object: &K) -> Result<Value, CliError>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let mut value = serde_json::to_value(object)
        .map_err(|e| CliError::new(format!("cannot write {} as JSON: {e}", K::kind(&()))))?;
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), json!(K::api_version(&())));
        map.insert("kind".into(), json!(K::kind(&())));
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
        }
    }
    Ok(value)
}

/// `objects` in `format` (not a table): the object itself when `single`, else a `List`.
pub fn print_objects<K>(objects: &[K], single: bool, format: &Output) -> Result<String, CliError>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    if let Output::Name = format {
        let names: String = objects
            .iter()
            .map(|o| {
                format!(
                    "{}.{}/{}\n",
                    K::kind(&()).to_lowercase(),
                    K::group(&()),
                    o.meta().name.clone().unwrap_or_default()
                )
            })
            .collect();
        return Ok(names);
    }
    let items = objects
        .iter()
        .map(object_value)
        .collect::<Result<Vec<_>, _>>()?;
    let value = match (single, items.as_slice()) {
        (true, [one]) => one.clone(),
        _ => json!({"apiVersion": "v1", "kind": "List", "items": items,
            "metadata": {"resourceVersion": ""}}),
    };
    match format {
        Output::Json => serde_json::to_string_pretty(&value)
            .map(|text| format!("{text}\n"))
            .map_err(|e| CliError::new(format!("cannot write JSON: {e}"))),
        Output::Yaml => serde_saphyr::to_string(&value)
            .map_err(|e| CliError::new(format!("cannot write YAML: {e}"))),
        Output::JsonPath(template) => Ok(template.render(&value)),
        Output::Table | Output::Wide | Output::Name => Ok(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::run::Run;

    use super::*;
    use crate::testing::run_named;

    #[test]
    fn formats_parse_and_unknown_ones_say_which_exist() {
        assert_eq!(parse_output("wide"), Ok(Output::Wide));
        assert!(matches!(
            parse_output("jsonpath={.spec.task}"),
            Ok(Output::JsonPath(_))
        ));
        assert!(
            parse_output("table")
                .unwrap_err()
                .contains("use json, yaml")
        );
        assert!(parse_output("jsonpath={range .items}").is_err());
    }

    #[test]
    fn json_and_yaml_round_trip_into_runs() {
        let mut run = run_named("notes");
        run.metadata.managed_fields = Some(vec![Default::default()]);
        let json = print_objects(std::slice::from_ref(&run), true, &Output::Json).unwrap();
        let back: Run = serde_json::from_str(&json).unwrap();
        assert_eq!(back.metadata.managed_fields, None);
        assert_eq!(back.spec, run.spec);
        let list = print_objects(&[run.clone(), run_named("other")], false, &Output::Yaml).unwrap();
        let list: Value = serde_saphyr::from_str(&list).unwrap();
        assert_eq!(list["kind"], "List");
        let second: Run = serde_json::from_value(list["items"][1].clone()).unwrap();
        assert_eq!(second.metadata.name.as_deref(), Some("other"));
    }

    #[test]
    fn names_and_jsonpath() {
        let runs = [run_named("a"), run_named("b")];
        assert_eq!(
            print_objects(&runs, false, &Output::Name).unwrap(),
            "run.herd.dev/a\nrun.herd.dev/b\n"
        );
        let names = parse_output("jsonpath={.items[*].metadata.name}").unwrap();
        assert_eq!(print_objects(&runs, false, &names).unwrap(), "a b");
        let one = parse_output("jsonpath={.spec.task}").unwrap();
        assert_eq!(print_objects(&runs[..1], true, &one).unwrap(), "Do it.");
    }
}
