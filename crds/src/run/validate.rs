//! The Run's create-time rules in plain Rust, with the CRD's messages.

use super::{MAX_ANSWER, MAX_INPUTS, MAX_RESPONSES, MAX_TASK, Run, RunSpec};
use crate::duration::{MAX_INPUT_TIMEOUT, MAX_TIMEOUT};
use crate::formats;
use crate::rules;
use crate::validation::{Checker, fits_a_label, validate_methods};

validate_methods! {
    /// Checks the rules the API server checks on create: the name's length and the spec's rules.
    Run, name by fits_a_label, rules::NAME_63_MESSAGE;
    /// Checks the spec's create-time CEL rules and the size limits they rely on. (The
    /// update-time rules, immutability and append-only answers, need the old object: the API
    /// server enforces them.)
    RunSpec
}

impl RunSpec {
    fn check(&self, c: &mut Checker) {
        c.check(
            self.parent_ref.is_some() == self.subagent_type.is_some(),
            "spec",
            rules::PARENT_WITH_TYPE_MESSAGE,
        );
        c.quoted(
            formats::is_dns_subdomain(&self.agent_ref.name),
            "spec.agentRef.name",
            &self.agent_ref.name,
            rules::AGENT_REF_NAME_SUFFIX,
        );
        c.max_length("spec.task", &self.task, MAX_TASK);
        c.max_items("spec.inputs", self.inputs.len(), MAX_INPUTS);
        for (i, input) in self.inputs.iter().enumerate() {
            if let Some(path) = &input.path {
                c.quoted(
                    formats::is_relative_path(path),
                    &format!("spec.inputs[{i}].path"),
                    path,
                    rules::RELATIVE_PATH_SUFFIX,
                );
            }
        }
        c.duration("spec.timeout", self.timeout.as_deref(), MAX_TIMEOUT);
        c.duration(
            "spec.inputTimeout",
            self.input_timeout.as_deref(),
            MAX_INPUT_TIMEOUT,
        );
        c.max_items("spec.responses", self.responses.len(), MAX_RESPONSES);
        for (i, response) in self.responses.iter().enumerate() {
            if let Some(answer) = &response.answer {
                c.max_length(&format!("spec.responses[{i}].answer"), answer, MAX_ANSWER);
            }
            if let Some(reason) = &response.reason {
                c.max_length(
                    &format!("spec.responses[{i}].reason"),
                    reason,
                    crate::approval::MAX_DECISION_REASON,
                );
            }
            c.check(
                response.answer.is_some() != response.decision.is_some()
                    && (response.reason.is_none() || response.decision.is_some()),
                format!("spec.responses[{i}]"),
                crate::approval::RESPONSE_KIND_MESSAGE,
            );
        }
        if let Some(approval) = &self.approval {
            approval.check(c, "spec.approval");
        }
    }
}
