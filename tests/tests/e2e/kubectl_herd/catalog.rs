//! `kubectl herd agents` and `skills` against the real API server, on Agents and Skills whose
//! status the test writes as the operator would.

use anyhow::{Context, ensure};
use herd_crds::agent::Agent;
use herd_crds::skill::Skill;
use herd_e2e::TestEnv;
use kube::ResourceExt;
use serde_json::Value;

use super::fixtures::{create_agent, create_skill, set_agent_ready};
use super::kubectl_herd;

pub async fn agents_and_skills_say_what_runs_can_use(env: TestEnv) -> anyhow::Result<()> {
    create_skill(&env, "notes", "Writes notes.").await?;
    create_agent(&env, "writer", &["notes"]).await?;
    set_agent_ready(&env, "writer", true, "Ready", "").await?;
    create_agent(&env, "broken", &["missing"]).await?;
    set_agent_ready(
        &env,
        "broken",
        false,
        "SkillNotFound",
        "Skill missing not found",
    )
    .await?;

    let table = kubectl_herd(&env, &["agents"]).await?.expect_code(0)?;
    let lines: Vec<Vec<&str>> = table
        .stdout
        .lines()
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    ensure!(
        lines.first().map(Vec::as_slice)
            == Some(
                &[
                    "NAME", "READY", "REASON", "MODEL", "SKILLS", "MISSING", "AGE"
                ][..]
            ),
        "{table:?}"
    );
    ensure!(
        lines.get(1).and_then(|l| l.get(..6))
            == Some(
                &[
                    "broken",
                    "False",
                    "SkillNotFound",
                    "<default>",
                    "missing",
                    "Skill missing not found"
                ][..]
            ),
        "{table:?}"
    );
    ensure!(
        lines.get(2).and_then(|l| l.get(..6))
            == Some(&["writer", "True", "Ready", "<default>", "notes", "-"][..]),
        "{table:?}"
    );

    let json = kubectl_herd(&env, &["agents", "-o", "json"])
        .await?
        .expect_code(0)?;
    let list: Value = serde_json::from_str(&json.stdout)?;
    let agents: Vec<Agent> = serde_json::from_value(list["items"].clone()).context("items")?;
    let names: Vec<String> = agents.iter().map(ResourceExt::name_any).collect();
    ensure!(names == ["broken", "writer"], "{json:?}");
    let one = kubectl_herd(&env, &["agents", "writer", "-o", "yaml"])
        .await?
        .expect_code(0)?;
    let writer: Agent = serde_saphyr::from_str(&one.stdout)?;
    ensure!(
        writer.spec.skills == Some(vec!["notes".to_owned()]),
        "{one:?}"
    );
    let missing = kubectl_herd(&env, &["agents", "nobody"])
        .await?
        .expect_code(1)?;
    ensure!(
        missing.stderr.contains("Agent nobody not found"),
        "{missing:?}"
    );

    let skills = kubectl_herd(&env, &["skills"]).await?.expect_code(0)?;
    let row: Vec<&str> = skills
        .stdout
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    ensure!(
        row.get(..5) == Some(&["notes", "True", "Ready", "yes", "Writes notes."][..]),
        "{skills:?}"
    );
    let yaml = kubectl_herd(&env, &["skills", "-o", "yaml"])
        .await?
        .expect_code(0)?;
    let list: Value = serde_saphyr::from_str(&yaml.stdout)?;
    let skills: Vec<Skill> = serde_json::from_value(list["items"].clone())?;
    ensure!(
        skills.len() == 1 && skills[0].name_any() == "notes",
        "{yaml:?}"
    );
    let name = kubectl_herd(&env, &["skills", "-o", "name"])
        .await?
        .expect_code(0)?;
    ensure!(name.stdout == "skill.herd.dev/notes\n", "{name:?}");
    Ok(())
}
