//! `kubectl herd agents` and `kubectl herd skills`: what a Run can use — each Agent ready or
//! not and why, its model, its skills and the references it misses; each Skill ready or not,
//! enabled or not, and what it is for.

use herd_crds::agent::Agent;
use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::reason::condition_type;
use herd_crds::skill::Skill;
use herd_crds::terminal_text::one_line;
use jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cli::CatalogArgs;
use crate::connect::Cluster;
use crate::error::{CliError, api_error};
use crate::io::Io;
use crate::outcome::EXIT_ANSWERED;
use crate::output::{Output, print_objects};
use crate::table::{namespaced_header, namespaced_row, render};
use crate::tree::age;

/// Most characters of a message in a column.
const MESSAGE_WIDTH: usize = 60;

/// The Agents table's header (`-A` adds NAMESPACE, `-o wide` MESSAGE).
pub fn agent_header(all_namespaces: bool, wide: bool) -> Vec<&'static str> {
    let mut header = namespaced_header(
        all_namespaces,
        &[
            "NAME", "READY", "REASON", "MODEL", "SKILLS", "MISSING", "AGE",
        ],
    );
    if wide {
        header.push("MESSAGE");
    }
    header
}

/// An Agent's row.
pub fn agent_row(agent: &Agent, all_namespaces: bool, wide: bool, now: Timestamp) -> Vec<String> {
    let conditions = agent
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let ready = find_condition(conditions, condition_type::READY);
    let refs = find_condition(conditions, condition_type::RESOLVED_REFS);
    let missing = refs
        .filter(|c| c.status == ConditionStatus::False)
        .map(|c| shorten(&one_line(&c.message)))
        .unwrap_or_default();
    let skills = agent.spec.skills.clone().unwrap_or_default();
    let mut row = namespaced_row(all_namespaces, agent);
    row.extend([
        one_line(&agent.name_any()),
        ready.map_or("Unknown".to_owned(), |c| format!("{:?}", c.status)),
        one_line(ready.map(|c| c.reason.as_str()).unwrap_or_default()),
        one_line(
            agent
                .spec
                .model
                .as_ref()
                .map_or("<default>", |m| m.name.as_str()),
        ),
        if skills.is_empty() {
            "-".to_owned()
        } else {
            one_line(&skills.join(","))
        },
        if missing.is_empty() {
            "-".to_owned()
        } else {
            missing
        },
        created_age(agent, now),
    ]);
    if wide {
        row.push(one_line(
            ready.map(|c| c.message.as_str()).unwrap_or_default(),
        ));
    }
    row
}

/// The Skills table's header.
pub fn skill_header(all_namespaces: bool) -> Vec<&'static str> {
    namespaced_header(
        all_namespaces,
        &["NAME", "READY", "REASON", "ENABLED", "DESCRIPTION", "AGE"],
    )
}

/// A Skill's row.
pub fn skill_row(skill: &Skill, all_namespaces: bool, now: Timestamp) -> Vec<String> {
    let status = skill.status.as_ref();
    let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let ready = find_condition(conditions, condition_type::READY);
    let mut row = namespaced_row(all_namespaces, skill);
    row.extend([
        one_line(&skill.name_any()),
        ready.map_or("Unknown".to_owned(), |c| format!("{:?}", c.status)),
        one_line(ready.map(|c| c.reason.as_str()).unwrap_or_default()),
        if skill.spec.enabled { "yes" } else { "no" }.to_owned(),
        shorten(&one_line(
            status
                .and_then(|s| s.description.as_deref())
                .unwrap_or_default(),
        )),
        created_age(skill, now),
    ]);
    row
}

fn created_age<K: Resource>(object: &K, now: Timestamp) -> String {
    object
        .meta()
        .creation_timestamp
        .as_ref()
        .map_or_else(|| "<unknown>".to_owned(), |t| age(t.0, now))
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= MESSAGE_WIDTH {
        return text.to_owned();
    }
    let kept: String = text.chars().take(MESSAGE_WIDTH - 1).collect();
    format!("{kept}…")
}

/// The objects of kind `K` the arguments choose; an error names the missing ones.
async fn chosen<K>(cluster: &Cluster, args: &CatalogArgs) -> Result<Vec<K>, CliError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let kind = K::kind(&());
    let api: Api<K> = if args.all_namespaces {
        Api::all(cluster.client.clone())
    } else {
        Api::namespaced(cluster.client.clone(), &cluster.namespace)
    };
    let params = ListParams {
        label_selector: args.selector.clone(),
        ..ListParams::default()
    };
    let object = format!("the {kind}s");
    let target = cluster.target("listing", &object, "Herd's CRDs may not be installed");
    let items = api
        .list(&params)
        .await
        .map_err(|e| api_error(&e, target))?
        .items;
    if args.names.is_empty() {
        return Ok(items);
    }
    args.names
        .iter()
        .map(|name| {
            items
                .iter()
                .find(|o| o.name_any() == *name)
                .cloned()
                .ok_or_else(|| {
                    CliError::new(format!(
                        "{kind} {} not found in namespace {}",
                        one_line(name),
                        cluster.namespace
                    ))
                })
        })
        .collect()
}

/// Prints `objects` as the table `rows` makes, or in the `-o` format.
fn print<K>(
    objects: &[K],
    args: &CatalogArgs,
    table: impl FnOnce(&[K]) -> String,
    cluster: &Cluster,
    io: &mut Io<'_>,
) -> Result<u8, CliError>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let format = args.output.clone().unwrap_or(Output::Table);
    if format.is_table() {
        if objects.is_empty() {
            let _ = writeln!(
                io.stderr,
                "No {}s found in namespace {}.",
                K::kind(&()),
                cluster.namespace
            );
        } else {
            let _ = write!(io.stdout, "{}", table(objects));
        }
    } else {
        let text = print_objects(objects, args.names.len() == 1, &format)?;
        let _ = write!(io.stdout, "{text}");
    }
    Ok(EXIT_ANSWERED)
}

/// `kubectl herd <kind>s`: the objects the arguments choose, as the table `table` makes
/// (given whether all namespaces are listed, and the time now), or in the `-o` format.
pub(crate) async fn list<K>(
    cluster: &Cluster,
    args: &CatalogArgs,
    io: &mut Io<'_>,
    table: impl FnOnce(&[K], bool, Timestamp) -> String,
) -> Result<u8, CliError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let objects: Vec<K> = chosen(cluster, args).await?;
    let all = args.all_namespaces;
    let now = Timestamp::now();
    print(
        &objects,
        args,
        |objects| table(objects, all, now),
        cluster,
        io,
    )
}

/// `kubectl herd agents`.
pub async fn agents(
    cluster: &Cluster,
    args: &CatalogArgs,
    io: &mut Io<'_>,
) -> Result<u8, CliError> {
    let wide = args.output == Some(Output::Wide);
    list(cluster, args, io, |agents: &[Agent], all, now| {
        let rows: Vec<Vec<String>> = agents
            .iter()
            .map(|a| agent_row(a, all, wide, now))
            .collect();
        render(&agent_header(all, wide), &rows)
    })
    .await
}

/// `kubectl herd skills`.
pub async fn skills(
    cluster: &Cluster,
    args: &CatalogArgs,
    io: &mut Io<'_>,
) -> Result<u8, CliError> {
    list(cluster, args, io, |skills: &[Skill], all, now| {
        let rows: Vec<Vec<String>> = skills.iter().map(|s| skill_row(s, all, now)).collect();
        render(&skill_header(all), &rows)
    })
    .await
}
