//! GitOps: the health checks the chart ships for Argo CD (Lua, `charts/herd/files/argocd/`)
//! and Flux (CEL, `charts/herd/files/flux/`), run on Agents, Skills, Runs, Schedules and Budgets taken from the API
//! server in each state; `examples/gitops` applied with `kubectl apply -k`; the `argocd-cm`
//! patch applied with `kubectl patch`.

mod apply;
mod budget_states;
mod health;
mod states;

use herd_e2e::{E2eTest, TestEnv};

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![
        E2eTest::shared(
            "gitops::agent_and_skill_health_in_each_state",
            agent_and_skill_health_in_each_state,
        ),
        E2eTest::shared("gitops::run_health_in_each_state", run_health_in_each_state),
        E2eTest::shared(
            "gitops::schedule_health_in_each_state",
            schedule_health_in_each_state,
        ),
        E2eTest::shared(
            "gitops::budget_health_in_each_state",
            budget_health_in_each_state,
        ),
        E2eTest::shared(
            "gitops::example_applies_with_kubectl_kustomize",
            apply::example_applies_with_kubectl_kustomize,
        ),
        E2eTest::shared(
            "gitops::argocd_cm_patch_adds_the_health_checks",
            apply::argocd_cm_patch_adds_the_health_checks,
        ),
    ]
}

/// Agent and Skill: ready is Healthy/Current, a missing Skill or a rejected spec
/// Degraded/Failed, a disabled Skill Suspended/Current, a spec not observed yet or no status
/// Progressing (Flux: InProgress, or Unknown without status).
async fn agent_and_skill_health_in_each_state(env: TestEnv) -> anyhow::Result<()> {
    let cases = states::agents_and_skills(&env).await?;
    health::check("gitops::agent_and_skill_health_in_each_state", &cases)
}

/// Run: Succeeded is Healthy/Current, Failed and Cancelled Degraded/Failed, Pending, Queued and
/// Running Progressing/InProgress, InputRequired Suspended/InProgress.
async fn run_health_in_each_state(env: TestEnv) -> anyhow::Result<()> {
    let cases = states::runs(&env).await?;
    health::check("gitops::run_health_in_each_state", &cases)
}

/// Schedule: scheduling is Healthy/Current, suspended Suspended/Current, a bad timetable or a
/// refused Run Degraded/Failed, a spec not observed yet or no status Progressing.
async fn schedule_health_in_each_state(env: TestEnv) -> anyhow::Result<()> {
    let cases = states::schedules(&env).await?;
    health::check("gitops::schedule_health_in_each_state", &cases)
}

/// Budget: counting is Healthy/Current, a limit reached Suspended/Current, an unknown time
/// zone Degraded/Failed, a spec not observed yet or no status Progressing.
async fn budget_health_in_each_state(env: TestEnv) -> anyhow::Result<()> {
    let cases = budget_states::budgets(&env).await?;
    health::check("gitops::budget_health_in_each_state", &cases)
}
