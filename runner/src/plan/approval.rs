//! The approval part of a run plan: the Agent's and the Run's `approval` rules together (a Run
//! only adds to its Agent's), how long a request waits and what its timeout becomes.

use std::time::Duration;

use herd_crds::agent::AgentSpec;
use herd_crds::approval::{ApprovalSpec, OnApprovalTimeout};
use herd_crds::duration::{MAX_INPUT_TIMEOUT, parse_duration_within};

use super::PlanError;

/// Which tool calls of the run need a person's yes, and how long one waits.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalPlan {
    /// The rules that apply (the Agent's and the Run's); they compile.
    pub spec: ApprovalSpec,
    /// How long a request waits for its decision.
    pub wait: Duration,
    /// What a request nobody decided in time becomes.
    pub on_timeout: OnApprovalTimeout,
}

/// The approval plan of a run of `agent` whose Run sets `run` and `input_timeout` (`None`:
/// the Agent's `runDefaults.inputTimeout`); `None` when no call needs approval.
pub fn plan_approval(
    agent: &AgentSpec,
    run: Option<&ApprovalSpec>,
    input_timeout: Option<&str>,
) -> Result<Option<ApprovalPlan>, PlanError> {
    let Some(spec) = ApprovalSpec::effective(agent.approval.as_ref(), run) else {
        return Ok(None);
    };
    spec.compile()
        .map_err(|error| PlanError(format!("spec.{error}")))?;
    let input_timeout = input_timeout.unwrap_or(&agent.run_defaults.input_timeout);
    let input_timeout = parse_duration_within(input_timeout, MAX_INPUT_TIMEOUT)
        .map_err(|error| PlanError(format!("spec.inputTimeout: {error}")))?;
    if let Some(timeout) = &spec.timeout {
        parse_duration_within(timeout, MAX_INPUT_TIMEOUT)
            .map_err(|error| PlanError(format!("spec.approval.timeout: {error}")))?;
    }
    Ok(Some(ApprovalPlan {
        wait: spec.wait(input_timeout).min(input_timeout),
        on_timeout: spec.on_timeout.unwrap_or_default(),
        spec,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(yaml: &str) -> AgentSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn no_rules_no_plan_and_the_runs_rules_add_to_the_agents() {
        assert_eq!(plan_approval(&agent("{}"), None, None), Ok(None));
        let with =
            agent("approval: {tools: [write_file], timeout: 10m}\nrunDefaults: {inputTimeout: 1h}");
        let run = ApprovalSpec {
            commands: vec!["git push".into()],
            on_timeout: Some(OnApprovalTimeout::Fail),
            ..ApprovalSpec::default()
        };
        let plan = plan_approval(&with, Some(&run), None).unwrap().unwrap();
        assert_eq!(plan.spec.tools, ["write_file"]);
        assert_eq!(plan.spec.commands, ["git push"]);
        assert_eq!(plan.wait, Duration::from_secs(600));
        assert_eq!(plan.on_timeout, OnApprovalTimeout::Fail);
    }

    #[test]
    fn the_wait_defaults_to_and_never_exceeds_the_input_timeout() {
        let bare = agent("approval: {tools: [bash]}");
        let plan = plan_approval(&bare, None, Some("2h")).unwrap().unwrap();
        assert_eq!(plan.wait, Duration::from_secs(7200));
        assert_eq!(plan.on_timeout, OnApprovalTimeout::Deny);
        let long = agent("approval: {tools: [bash], timeout: 5h}");
        let plan = plan_approval(&long, None, Some("2h")).unwrap().unwrap();
        assert_eq!(plan.wait, Duration::from_secs(7200));
    }

    #[test]
    fn a_bad_regex_is_a_plan_error_naming_the_field() {
        let bad = agent("approval: {commands: ['git (push']}");
        let error = plan_approval(&bad, None, None).unwrap_err();
        assert!(
            error.0.starts_with("spec.approval.commands: \"git (push\""),
            "{error}"
        );
    }
}
