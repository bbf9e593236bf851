//! The Agent's create-time rules in plain Rust, with the CRD's messages.

use super::{Agent, AgentSpec, EgressMode, McpSpec, SandboxSpec};
use crate::duration::{MAX_INPUT_TIMEOUT, MAX_TIMEOUT};
use crate::formats;
use crate::refs::{ConfigMapKeyRef, SecretKeyRef};
use crate::rules;
use crate::skill::is_valid_skill_name;
use crate::validation::{Checker, fits_a_label, validate_methods};

validate_methods! {
    /// Checks the rules the API server checks on create: the name's length and the spec's rules.
    Agent, name by fits_a_label, rules::NAME_63_MESSAGE;
    /// Checks the spec's CEL rules and the size limits they rely on.
    AgentSpec
}

impl AgentSpec {
    /// The rules of the spec's own fields. Long because it is a flat list of rules, each with
    /// its field and message: splitting it would only scatter the list.
    fn check(&self, c: &mut Checker) {
        if let Some(approval) = &self.approval {
            approval.check(c, "spec.approval");
        }
        c.check(
            !(self.soul.is_some() && self.soul_from.is_some()),
            "spec",
            rules::SOUL_EXCLUSIVE_MESSAGE,
        );
        if let Some(soul) = &self.soul {
            c.max_length("spec.soul", soul, 32768);
        }
        if let Some(from) = &self.soul_from {
            config_map_key(c, "spec.soulFrom.configMapKeyRef", &from.config_map_key_ref);
        }
        if let Some(model) = &self.model {
            http_url(c, "spec.model.baseURL", model.base_url.as_deref());
            if let Some(secret) = &model.api_key_secret_ref {
                secret_key(c, "spec.model.apiKeySecretRef", secret);
            }
            c.duration(
                "spec.model.requestTimeout",
                model.request_timeout.as_deref(),
                MAX_TIMEOUT,
            );
            if let Some(cidrs) = &model.egress_cidrs {
                c.max_items("spec.model.egressCIDRs", cidrs.len(), 16);
                cidrs_rule(c, "spec.model.egressCIDRs", cidrs);
            }
            if let Some(from) = &model.script_from {
                config_map_key(
                    c,
                    "spec.model.scriptFrom.configMapKeyRef",
                    &from.config_map_key_ref,
                );
            }
        }
        if let Some(skills) = &self.skills {
            c.max_items("spec.skills", skills.len(), 64);
            if let Some(bad) = skills.iter().find(|s| !is_valid_skill_name(s)) {
                c.quoted(false, "spec.skills", bad, rules::SKILL_REFS_SUFFIX);
            }
            c.unique("spec.skills", skills);
        }
        if let Some(search) = self.tools.as_ref().and_then(|t| t.web_search.as_ref()) {
            http_url(
                c,
                "spec.tools.webSearch.baseURL",
                search.base_url.as_deref(),
            );
            if let Some(secret) = &search.api_key_secret_ref {
                secret_key(c, "spec.tools.webSearch.apiKeySecretRef", secret);
            }
        }
        if let Some(mcp) = &self.mcp {
            mcp.check(c);
        }
        let subagents = &self.subagents;
        c.check(
            rules::MAX_CONCURRENT_RANGE.contains(&subagents.max_concurrent),
            "spec.subagents.maxConcurrent",
            rules::MAX_CONCURRENT_MESSAGE,
        );
        c.check(
            rules::MAX_TOTAL_RANGE.contains(&subagents.max_total),
            "spec.subagents.maxTotal",
            rules::MAX_TOTAL_MESSAGE,
        );
        c.check(
            rules::MAX_DEPTH_RANGE.contains(&subagents.max_depth),
            "spec.subagents.maxDepth",
            rules::MAX_DEPTH_MESSAGE,
        );
        c.duration(
            "spec.subagents.timeout",
            Some(&subagents.timeout),
            MAX_TIMEOUT,
        );
        let defaults = &self.run_defaults;
        c.duration(
            "spec.runDefaults.timeout",
            Some(&defaults.timeout),
            MAX_TIMEOUT,
        );
        c.duration(
            "spec.runDefaults.inputTimeout",
            Some(&defaults.input_timeout),
            MAX_INPUT_TIMEOUT,
        );
        c.check(
            defaults.suspend_after().is_ok(),
            "spec.runDefaults.suspendAfter",
            "must be 0 (never) or a duration such as 2m",
        );
        c.check(
            defaults.retries <= 3,
            "spec.runDefaults.retries",
            rules::RETRIES_MESSAGE,
        );
        self.sandbox.check(c);
    }
}

impl SandboxSpec {
    /// The rules of `spec.sandbox`. Long because it is a flat list of rules, one per field.
    fn check(&self, c: &mut Checker) {
        if let Some(image) = &self.image {
            c.quoted(
                formats::is_image(image),
                "spec.sandbox.image",
                image,
                rules::IMAGE_SUFFIX,
            );
        }
        if let Some(resources) = &self.resources {
            for (path, map) in [
                ("spec.sandbox.resources.limits", &resources.limits),
                ("spec.sandbox.resources.requests", &resources.requests),
            ] {
                c.max_properties(path, map.len(), rules::MAX_RESOURCES);
                if let Some(name) = map
                    .iter()
                    .find_map(|(name, q)| (!formats::is_quantity(&q.0)).then_some(name))
                {
                    c.quoted(false, path, name, rules::QUANTITY_SUFFIX);
                }
            }
        }
        if let Some(class) = &self.runtime_class_name {
            c.quoted(
                formats::is_dns_subdomain(class),
                "spec.sandbox.runtimeClassName",
                class,
                rules::DNS_SUBDOMAIN_SUFFIX,
            );
        }
        c.max_properties("spec.sandbox.nodeSelector", self.node_selector.len(), 32);
        if let Some((key, value)) = self
            .node_selector
            .iter()
            .find(|(k, v)| !formats::is_label(k, v))
        {
            c.quoted(
                false,
                "spec.sandbox.nodeSelector",
                &format!("{key}={value}"),
                rules::NODE_SELECTOR_SUFFIX,
            );
        }
        c.max_items("spec.sandbox.tolerations", self.tolerations.len(), 32);
        for (i, toleration) in self.tolerations.iter().enumerate() {
            if let Some(operator) = toleration.operator.as_deref() {
                c.quoted(
                    matches!(operator, "Exists" | "Equal"),
                    &format!("spec.sandbox.tolerations[{i}]"),
                    operator,
                    rules::TOLERATION_OPERATOR_SUFFIX,
                );
            }
        }
        if let Some(claim) = &self.workspace.persistent_volume_claim {
            if let Some(class) = &claim.storage_class_name {
                c.quoted(
                    formats::is_dns_subdomain(class),
                    "spec.sandbox.workspace.persistentVolumeClaim.storageClassName",
                    class,
                    rules::DNS_SUBDOMAIN_SUFFIX,
                );
            }
            c.quoted(
                formats::is_quantity(&claim.size.0),
                "spec.sandbox.workspace.persistentVolumeClaim.size",
                &claim.size.0,
                rules::QUANTITY_SUFFIX,
            );
        }
        if let Some(egress) = &self.egress {
            c.check(
                (egress.mode == Some(EgressMode::Cidrs)) != egress.cidrs.is_empty(),
                "spec.sandbox.egress",
                rules::EGRESS_CIDRS_MESSAGE,
            );
            c.max_items("spec.sandbox.egress.cidrs", egress.cidrs.len(), 32);
            cidrs_rule(c, "spec.sandbox.egress.cidrs", &egress.cidrs);
        }
    }
}

impl McpSpec {
    /// The rules of `spec.mcp`. Long because it is a flat list of rules, one per field.
    fn check(&self, c: &mut Checker) {
        c.max_items(
            "spec.mcp.servers",
            self.servers.len(),
            super::mcp::MAX_SERVERS,
        );
        let names: Vec<String> = self.servers.iter().map(|s| s.name.clone()).collect();
        c.unique("spec.mcp.servers", &names);
        for (i, server) in self.servers.iter().enumerate() {
            let path = format!("spec.mcp.servers[{i}]");
            c.max_length(&format!("{path}.name"), &server.name, 32);
            c.quoted(
                formats::is_mcp_server_name(&server.name),
                &format!("{path}.name"),
                &server.name,
                rules::MCP_SERVER_NAME_SUFFIX,
            );
            c.check(
                server.url.is_some() != server.command.is_some(),
                path.clone(),
                rules::MCP_TRANSPORT_MESSAGE,
            );
            c.check(
                server.url.is_some()
                    || (server.headers.is_empty() && server.egress_cidrs.is_none()),
                path.clone(),
                rules::MCP_HTTP_ONLY_MESSAGE,
            );
            c.check(
                server.command.is_some() || server.env.is_empty(),
                path.clone(),
                rules::MCP_STDIO_ONLY_MESSAGE,
            );
            http_url(c, &format!("{path}.url"), server.url.as_deref());
            c.max_items(&format!("{path}.headers"), server.headers.len(), 8);
            for (j, header) in server.headers.iter().enumerate() {
                let header_path = format!("{path}.headers[{j}]");
                c.quoted(
                    formats::is_header_name(&header.name),
                    &format!("{header_path}.name"),
                    &header.name,
                    rules::HEADER_NAME_SUFFIX,
                );
                c.quoted(
                    !formats::is_reserved_header(&header.name),
                    &format!("{header_path}.name"),
                    &header.name,
                    rules::MCP_HEADER_NOT_RESERVED_SUFFIX,
                );
                secret_key(
                    c,
                    &format!("{header_path}.secretKeyRef"),
                    &header.secret_key_ref,
                );
            }
            let header_names: Vec<String> = server.headers.iter().map(|h| h.name.clone()).collect();
            c.unique(&format!("{path}.headers"), &header_names);
            if let Some(command) = &server.command {
                c.check(
                    !command.is_empty(),
                    format!("{path}.command"),
                    "Too few: must have at least 1 items",
                );
                c.max_items(&format!("{path}.command"), command.len(), 32);
            }
            c.max_items(&format!("{path}.env"), server.env.len(), 32);
            for (j, var) in server.env.iter().enumerate() {
                c.quoted(
                    formats::is_env_name(&var.name),
                    &format!("{path}.env[{j}].name"),
                    &var.name,
                    rules::ENV_NAME_SUFFIX,
                );
            }
            let env_names: Vec<String> = server.env.iter().map(|v| v.name.clone()).collect();
            c.unique(&format!("{path}.env"), &env_names);
            if let Some(tools) = &server.tools {
                c.max_items(&format!("{path}.tools"), tools.len(), 128);
                c.unique(&format!("{path}.tools"), tools);
            }
            if let Some(cidrs) = &server.egress_cidrs {
                c.max_items(&format!("{path}.egressCIDRs"), cidrs.len(), 16);
                cidrs_rule(c, &format!("{path}.egressCIDRs"), cidrs);
            }
            c.duration(
                &format!("{path}.timeout"),
                server.timeout.as_deref(),
                MAX_TIMEOUT,
            );
        }
    }
}

fn cidrs_rule(c: &mut Checker, path: &str, cidrs: &[String]) {
    if let Some(bad) = cidrs.iter().find(|cidr| !formats::is_cidr(cidr)) {
        c.quoted(false, path, bad, rules::CIDRS_SUFFIX);
    }
}

fn http_url(c: &mut Checker, path: &str, url: Option<&str>) {
    if let Some(url) = url {
        c.quoted(formats::is_http_url(url), path, url, rules::HTTP_URL_SUFFIX);
    }
}

fn secret_key(c: &mut Checker, path: &str, reference: &SecretKeyRef) {
    c.quoted(
        formats::is_config_key(&reference.key),
        &format!("{path}.key"),
        &reference.key,
        rules::CONFIG_KEY_SUFFIX,
    );
}

fn config_map_key(c: &mut Checker, path: &str, reference: &ConfigMapKeyRef) {
    c.quoted(
        formats::is_config_key(&reference.key),
        &format!("{path}.key"),
        &reference.key,
        rules::CONFIG_KEY_SUFFIX,
    );
}
