//! A Run that asks: `run --follow` without a terminal prints the question as JSON and exits 3;
//! `answer` appends the answer (and refuses a second one); `follow` then shows it to its end.
//! With someone at the terminal, `--follow` takes the answer there and goes on.

use anyhow::ensure;
use herd_e2e::TestEnv;
use serde_json::{Value, json};

use super::script::{COLOUR, PAINTED, QUESTION, ask_script};
use super::{kubectl_herd, kubectl_herd_typing};
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

/// No terminal: exit 3 with the question; `__complete answer` offers the waiting Run; `answer`
/// answers once; `follow` prints the answer. Then a Run answered at the "terminal" by typing
/// the option's number.
pub async fn a_question_stops_follow_with_3_until_answer_answers_it(
    env: TestEnv,
) -> anyhow::Result<()> {
    let scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &ask_script()).await?;

    let asked = kubectl_herd(&env, &["run", "helper", "Paint the fence.", "--follow"])
        .await?
        .expect_code(3)?;
    let name = asked.created()?;
    let question: Value = serde_json::from_str(asked.stdout.trim())?;
    ensure!(
        question["question"] == QUESTION,
        "the question as JSON: {asked:?}"
    );
    ensure!(question["options"] == json!([COLOUR, "red"]), "{question}");
    ensure!(
        asked
            .stderr
            .contains(&format!("kubectl herd answer {name} \"...\"")),
        "what to do next: {asked:?}"
    );

    let offered = kubectl_herd(&env, &["__complete", "--", "answer", ""])
        .await?
        .expect_code(0)?;
    ensure!(
        offered.stdout == format!("{name}\n:4\n"),
        "the waiting Run is offered to `answer`: {offered:?}"
    );

    let answered = kubectl_herd(&env, &["answer", &name, COLOUR])
        .await?
        .expect_code(0)?;
    ensure!(
        answered.stdout.starts_with("answered question ") && answered.stdout.contains(&name),
        "{answered:?}"
    );
    let twice = kubectl_herd(&env, &["answer", &name, "red"])
        .await?
        .expect_code(1)?;
    ensure!(
        twice.stderr.starts_with("error: the question ")
            && twice.stderr.contains("is already answered (\"teal\")")
            || twice.stderr.starts_with(&format!("error: Run {name} has")),
        "a second answer is refused, naming the Run: {twice:?}"
    );

    let done = kubectl_herd(&env, &["follow", &name])
        .await?
        .expect_code(0)?;
    ensure!(done.stdout == format!("{PAINTED}\n"), "{done:?}");
    let late = kubectl_herd(&env, &["answer", &name, "red"])
        .await?
        .expect_code(1)?;
    ensure!(
        late.stderr
            == format!(
                "error: Run {name} has finished (Succeeded): it asks nothing any more (kubectl \
                 herd result {name})\n"
            ),
        "{late:?}"
    );

    let typed = kubectl_herd_typing(
        &env,
        &["run", "helper", "Paint the gate.", "--follow"],
        &["1"],
    )
    .await?
    .expect_code(0)?;
    ensure!(typed.stdout == format!("{PAINTED}\n"), "{typed:?}");
    ensure!(
        typed.stderr.contains(QUESTION) && typed.stderr.contains("answered: teal"),
        "the question shown and answered at the terminal: {typed:?}"
    );
    Ok(())
}
