//! The Agent's create-time rules in plain Rust, with the CRD's messages.

use super::{Agent, AgentSpec, EgressMode};
use crate::rules;
use crate::validation::{Checker, FieldErrors};

impl Agent {
    /// Checks the rules the API server checks on create: the name's length and the spec's rules.
    pub fn validate(&self) -> Result<(), FieldErrors> {
        let mut checker = Checker::default();
        let name = self.metadata.name.as_deref().unwrap_or_default();
        checker.check(
            name.chars().count() <= 63,
            "metadata.name",
            rules::NAME_63_MESSAGE,
        );
        self.spec.check(&mut checker);
        checker.finish()
    }
}

impl AgentSpec {
    /// Checks the spec's CEL rules and the size limits they rely on.
    pub fn validate(&self) -> Result<(), FieldErrors> {
        let mut checker = Checker::default();
        self.check(&mut checker);
        checker.finish()
    }

    fn check(&self, c: &mut Checker) {
        c.check(
            !(self.soul.is_some() && self.soul_from.is_some()),
            "spec",
            rules::SOUL_EXCLUSIVE_MESSAGE,
        );
        if let Some(soul) = &self.soul {
            c.max_length("spec.soul", soul, 32768);
        }
        if let Some(model) = &self.model {
            c.duration(
                "spec.model.requestTimeout",
                model.request_timeout.as_deref(),
            );
            if let Some(cidrs) = &model.egress_cidrs {
                c.max_items("spec.model.egressCIDRs", cidrs.len(), 16);
            }
        }
        if let Some(skills) = &self.skills {
            c.max_items("spec.skills", skills.len(), 64);
        }
        let subagents = &self.subagents;
        c.check(
            (1..=4).contains(&subagents.max_concurrent),
            "spec.subagents.maxConcurrent",
            rules::MAX_CONCURRENT_MESSAGE,
        );
        c.check(
            (1..=50).contains(&subagents.max_total),
            "spec.subagents.maxTotal",
            rules::MAX_TOTAL_MESSAGE,
        );
        c.check(
            (1..=3).contains(&subagents.max_depth),
            "spec.subagents.maxDepth",
            rules::MAX_DEPTH_MESSAGE,
        );
        c.duration("spec.subagents.timeout", Some(&subagents.timeout));
        let defaults = &self.run_defaults;
        c.duration("spec.runDefaults.timeout", Some(&defaults.timeout));
        c.duration(
            "spec.runDefaults.inputTimeout",
            Some(&defaults.input_timeout),
        );
        c.check(
            defaults.retries <= 3,
            "spec.runDefaults.retries",
            rules::RETRIES_MESSAGE,
        );
        if let Some(egress) = &self.sandbox.egress {
            c.check(
                (egress.mode == Some(EgressMode::Cidrs)) != egress.cidrs.is_empty(),
                "spec.sandbox.egress",
                rules::EGRESS_CIDRS_MESSAGE,
            );
            c.max_items("spec.sandbox.egress.cidrs", egress.cidrs.len(), 32);
        }
    }
}
