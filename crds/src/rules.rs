//! The CEL rules (`x-kubernetes-validations`) of the three CRDs, with their messages.
//!
//! The derives put these into the generated schemas, and the pure-Rust `validate()` methods
//! report the same messages, so a manifest run locally with `herd-runner run -f` fails with the
//! words the API server would use.

use std::ops::RangeInclusive;

/// The CEL rule that keeps an integer field inside a range constant.
macro_rules! range_rule {
    ($range:expr) => {
        const_format::formatcp!("self >= {} && self <= {}", *$range.start(), *$range.end())
    };
}

/// The message of [`range_rule!`], as `validate()` reports it too.
macro_rules! range_message {
    ($range:expr) => {
        const_format::formatcp!("must be between {} and {}", *$range.start(), *$range.end())
    };
}

/// Pattern of a duration field: one or more `<digits><unit>` groups, units `ms`, `s`, `m`, `h`,
/// at most six digits a group (so the value fits Go's and Rust's duration types).
///
/// A `duration()` call in CEL would reject bad input with the evaluator's own text, so the rule
/// matches the pattern instead and carries a message of ours.
pub const DURATION_PATTERN: &str = "^([0-9]{1,6}(ms|s|m|h))+$";

/// CEL rule on every duration field.
pub const DURATION: &str = "self.matches('^([0-9]{1,6}(ms|s|m|h))+$')";
/// Message of [`DURATION`].
pub const DURATION_MESSAGE: &str = "must be a duration made of <number><unit> groups with units ms, s, m or h and at most 6 digits a group, such as 90s, 30m or 1h30m";

/// CEL rule of `timeout`, `subagents.timeout` and `requestTimeout`: 1s to 168h (a week). A
/// value that is not a duration is left to [`DURATION`].
pub const DURATION_UP_TO_168H: &str = "!self.matches('^([0-9]{1,6}(ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('168h'))";
/// messageExpression of [`DURATION_UP_TO_168H`]; see [`DURATION_UP_TO_168H_SUFFIX`].
pub const DURATION_UP_TO_168H_MESSAGE: &str = "'\"' + self + '\" must be between 1s and 168h'";
/// What [`DURATION_UP_TO_168H_MESSAGE`] says after the quoted value.
pub const DURATION_UP_TO_168H_SUFFIX: &str = " must be between 1s and 168h";

/// CEL rule of `inputTimeout`: 1s to 720h (30 days).
pub const DURATION_UP_TO_720H: &str = "!self.matches('^([0-9]{1,6}(ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('720h'))";
/// messageExpression of [`DURATION_UP_TO_720H`].
pub const DURATION_UP_TO_720H_MESSAGE: &str = "'\"' + self + '\" must be between 1s and 720h'";
/// What [`DURATION_UP_TO_720H_MESSAGE`] says after the quoted value.
pub const DURATION_UP_TO_720H_SUFFIX: &str = " must be between 1s and 720h";

/// A rule's `messageExpression`, for `Rule::message`.
pub fn expression(cel: &str) -> kube::core::Message {
    kube::core::Message::Expression(cel.to_owned())
}

/// The message of a rule whose messageExpression is `'"' + <value> + '"' + <suffix>`: the
/// pure-Rust checks build the same text.
pub fn quoted(value: &str, suffix: &str) -> String {
    format!("\"{value}\"{suffix}")
}

/// Agent `skills`: every item is a skill name.
pub const SKILL_REFS: &str = "self.all(s, s.matches('^[a-z0-9]+(-[a-z0-9]+)*$'))";
/// messageExpression of [`SKILL_REFS`], naming the first bad item.
pub const SKILL_REFS_MESSAGE: &str = "'\"' + self.filter(s, !s.matches('^[a-z0-9]+(-[a-z0-9]+)*$'))[0] + '\" is not a skill name: lowercase letters and digits in groups joined by single hyphens'";
/// What [`SKILL_REFS_MESSAGE`] says after the quoted value.
pub const SKILL_REFS_SUFFIX: &str =
    " is not a skill name: lowercase letters and digits in groups joined by single hyphens";

/// Run `inputs[].path`: relative, inside `uploads/`.
pub const RELATIVE_PATH: &str = "!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')";
/// messageExpression of [`RELATIVE_PATH`].
pub const RELATIVE_PATH_MESSAGE: &str =
    "'\"' + self + '\" must be a relative path without a leading / or a .. segment'";
/// What [`RELATIVE_PATH_MESSAGE`] and [`RELATIVE_KEYS_MESSAGE`] say after the quoted value.
pub const RELATIVE_PATH_SUFFIX: &str =
    " must be a relative path without a leading / or a .. segment";

/// Skill `files`: every key is a relative path inside the skill's folder.
pub const RELATIVE_KEYS: &str = "self.all(k, !k.startsWith('/') && !k.matches('(^|/)[.][.](/|$)'))";
/// messageExpression of [`RELATIVE_KEYS`], naming the first bad key.
pub const RELATIVE_KEYS_MESSAGE: &str = "'\"' + self.filter(k, k.startsWith('/') || k.matches('(^|/)[.][.](/|$)'))[0] + '\" must be a relative path without a leading / or a .. segment'";

/// `sandbox.egress.cidrs` and `model.egressCIDRs`: every item is a CIDR.
pub const CIDRS: &str = "self.all(c, isCIDR(c))";
/// messageExpression of [`CIDRS`], naming the first bad item.
pub const CIDRS_MESSAGE: &str =
    "'\"' + self.filter(c, !isCIDR(c))[0] + '\" is not a CIDR such as 10.20.0.0/16 or fd00::/8'";
/// What [`CIDRS_MESSAGE`] says after the quoted value.
pub const CIDRS_SUFFIX: &str = " is not a CIDR such as 10.20.0.0/16 or fd00::/8";

/// `sandbox.resources.requests` and `.limits`: every value is a quantity. `string()` because an
/// integer (`cpu: 2`) has no `isQuantity` overload. The maps hold at most
/// [`MAX_RESOURCES`] entries: with 16, a 1.32 API server estimates this rule 0.7% over the
/// per-rule cost budget and refuses the whole CRD.
pub const QUANTITIES: &str = "self.all(k, isQuantity(string(self[k])))";
/// messageExpression of [`QUANTITIES`], naming the first bad entry's resource (quoting its
/// value too would exceed the messageExpression budget).
pub const QUANTITIES_MESSAGE: &str = "'\"' + self.filter(k, !isQuantity(string(self[k])))[0] + '\" is not a quantity such as 500m, 2, 512Mi or 10Gi'";
/// Most entries of `sandbox.resources.requests` and `.limits`.
pub const MAX_RESOURCES: usize = 15;
/// What [`QUANTITIES_MESSAGE`] and [`QUANTITY_MESSAGE`] say after the quoted name or value.
pub const QUANTITY_SUFFIX: &str = " is not a quantity such as 500m, 2, 512Mi or 10Gi";

/// The workspace claim's `size`: a quantity.
pub const QUANTITY: &str = "isQuantity(string(self))";
/// messageExpression of [`QUANTITY`].
pub const QUANTITY_MESSAGE: &str =
    "'\"' + string(self) + '\" is not a quantity such as 500m, 2, 512Mi or 10Gi'";

/// Run `agentRef.name`: a name an Agent can have (DNS-1123 subdomain, at most 63 characters).
pub const AGENT_REF_NAME: &str =
    "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')";
/// messageExpression of [`AGENT_REF_NAME`].
pub const AGENT_REF_NAME_MESSAGE: &str = "'\"' + self + '\" is not an Agent name: lowercase letters, digits, - and ., starting and ending with a letter or digit'";
/// What [`AGENT_REF_NAME_MESSAGE`] says after the quoted value.
pub const AGENT_REF_NAME_SUFFIX: &str = " is not an Agent name: lowercase letters, digits, - and ., starting and ending with a letter or digit";

/// `runtimeClassName` and `storageClassName`: DNS-1123 subdomains.
pub const DNS_SUBDOMAIN: &str =
    "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')";
/// messageExpression of [`DNS_SUBDOMAIN`].
pub const DNS_SUBDOMAIN_MESSAGE: &str = "'\"' + self + '\" is not a DNS-1123 subdomain: lowercase letters, digits, - and ., starting and ending with a letter or digit'";
/// What [`DNS_SUBDOMAIN_MESSAGE`] says after the quoted value.
pub const DNS_SUBDOMAIN_SUFFIX: &str = " is not a DNS-1123 subdomain: lowercase letters, digits, - and ., starting and ending with a letter or digit";

/// `sandbox.tolerations[]`: the operator is one a Pod accepts. (On each item: the same check
/// on the list, naming the bad operator, exceeds the messageExpression budget.)
pub const TOLERATION_OPERATOR: &str =
    "!has(self.operator) || self.operator == 'Exists' || self.operator == 'Equal'";
/// messageExpression of [`TOLERATION_OPERATOR`].
pub const TOLERATION_OPERATOR_MESSAGE: &str =
    "'\"' + self.operator + '\" is not a toleration operator: use Exists or Equal'";
/// What [`TOLERATION_OPERATOR_MESSAGE`] says after the quoted value.
pub const TOLERATION_OPERATOR_SUFFIX: &str = " is not a toleration operator: use Exists or Equal";

/// `status.report.clarification.askedAt`: an RFC 3339 date-time.
pub const DATE_TIME: &str = "self.matches('^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$')";
/// messageExpression of [`DATE_TIME`].
pub const DATE_TIME_MESSAGE: &str =
    "'\"' + self + '\" is not an RFC 3339 date-time such as 2026-01-31T09:30:00Z'";
/// What [`DATE_TIME_MESSAGE`] says after the quoted value.
pub const DATE_TIME_SUFFIX: &str = " is not an RFC 3339 date-time such as 2026-01-31T09:30:00Z";

/// `sandbox.image`: an image reference without whitespace, optionally pinned by digest.
pub const IMAGE: &str = "self.matches('^[^\\\\s@]+(@sha256:[a-f0-9]{64})?$')";
/// messageExpression of [`IMAGE`].
pub const IMAGE_MESSAGE: &str = "'\"' + self + '\" is not an image reference: no whitespace, and a digest only as @sha256:<64 hex digits>'";
/// What [`IMAGE_MESSAGE`] says after the quoted value.
pub const IMAGE_SUFFIX: &str =
    " is not an image reference: no whitespace, and a digest only as @sha256:<64 hex digits>";

/// `sandbox.nodeSelector`: label keys (optional DNS prefix, `/`, a name of at most 63
/// characters) and label values (at most 63 characters).
pub const NODE_SELECTOR: &str = "self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self[k].matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$'))";
/// messageExpression of [`NODE_SELECTOR`], naming the first bad entry as `"<key>=<value>"`.
pub const NODE_SELECTOR_MESSAGE: &str = "'\"' + self.filter(k, !(size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self[k].matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$'))).map(k, k + '=' + self[k])[0] + '\" is not a node label: a key of an optional DNS prefix, /, and a name of at most 63 letters, digits, -, _ or ., and a value of at most 63 of them'";
/// What [`NODE_SELECTOR_MESSAGE`] says after the quoted entry.
pub const NODE_SELECTOR_SUFFIX: &str = " is not a node label: a key of an optional DNS prefix, /, and a name of at most 63 letters, digits, -, _ or ., and a value of at most 63 of them";

/// Secret and ConfigMap `key`s: what a key of `data` may be.
pub const CONFIG_KEY: &str = "self.matches('^[-._a-zA-Z0-9]+$')";
/// messageExpression of [`CONFIG_KEY`].
pub const CONFIG_KEY_MESSAGE: &str =
    "'\"' + self + '\" is not a Secret or ConfigMap key: letters, digits, -, _ and . only'";
/// What [`CONFIG_KEY_MESSAGE`] says after the quoted value.
pub const CONFIG_KEY_SUFFIX: &str =
    " is not a Secret or ConfigMap key: letters, digits, -, _ and . only";

/// Every `baseURL`: an http or https URL with a host.
pub const HTTP_URL: &str =
    "isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHost() != ''";
/// messageExpression of [`HTTP_URL`].
pub const HTTP_URL_MESSAGE: &str =
    "'\"' + self + '\" is not an http or https URL such as http://vllm.models:8000/v1'";
/// What [`HTTP_URL_MESSAGE`] says after the quoted value.
pub const HTTP_URL_SUFFIX: &str = " is not an http or https URL such as http://vllm.models:8000/v1";

/// Agent and Run: names are copied into label values, which hold at most 63 characters.
pub const NAME_63: &str = "size(self.metadata.name) <= 63";
/// Message of [`NAME_63`].
pub const NAME_63_MESSAGE: &str =
    "metadata.name must be at most 63 characters, because it is used as a label value";

/// Skill: the name is also the skill's folder and its frontmatter `name`.
pub const SKILL_NAME: &str =
    "size(self.metadata.name) <= 64 && self.metadata.name.matches('^[a-z0-9]+(-[a-z0-9]+)*$')";
/// Message of [`SKILL_NAME`].
pub const SKILL_NAME_MESSAGE: &str = "metadata.name of a Skill must be at most 64 characters of lowercase letters and digits in groups joined by single hyphens (^[a-z0-9]+(-[a-z0-9]+)*$)";

/// Agent: the SOUL is written inline or taken from a ConfigMap, not both.
pub const SOUL_EXCLUSIVE: &str = "!(has(self.soul) && has(self.soulFrom))";
/// Message of [`SOUL_EXCLUSIVE`].
pub const SOUL_EXCLUSIVE_MESSAGE: &str =
    "soul and soulFrom are mutually exclusive: set at most one";

/// Allowed values of Agent `subagents.maxConcurrent` (DeerFlow clamps to the same range).
pub const MAX_CONCURRENT_RANGE: RangeInclusive<u32> = 1..=4;
/// Agent `subagents.maxConcurrent`.
pub const MAX_CONCURRENT: &str = range_rule!(MAX_CONCURRENT_RANGE);
/// Message of [`MAX_CONCURRENT`].
pub const MAX_CONCURRENT_MESSAGE: &str = range_message!(MAX_CONCURRENT_RANGE);

/// Allowed values of Agent `subagents.maxTotal`.
pub const MAX_TOTAL_RANGE: RangeInclusive<u32> = 1..=50;
/// Agent `subagents.maxTotal`.
pub const MAX_TOTAL: &str = range_rule!(MAX_TOTAL_RANGE);
/// Message of [`MAX_TOTAL`].
pub const MAX_TOTAL_MESSAGE: &str = range_message!(MAX_TOTAL_RANGE);

/// Allowed values of Agent `subagents.maxDepth`.
pub const MAX_DEPTH_RANGE: RangeInclusive<u32> = 1..=3;
/// Agent `subagents.maxDepth`.
pub const MAX_DEPTH: &str = range_rule!(MAX_DEPTH_RANGE);
/// Message of [`MAX_DEPTH`].
pub const MAX_DEPTH_MESSAGE: &str = range_message!(MAX_DEPTH_RANGE);

/// Agent `runDefaults.retries`.
pub const RETRIES: &str = "self >= 0 && self <= 3";
/// Message of [`RETRIES`].
pub const RETRIES_MESSAGE: &str = "must be between 0 and 3";

/// Agent `sandbox.egress`: the CIDR list goes with mode `CIDRs` and only with it.
pub const EGRESS_CIDRS: &str =
    "(has(self.mode) && self.mode == 'CIDRs') == (has(self.cidrs) && size(self.cidrs) > 0)";
/// Message of [`EGRESS_CIDRS`].
pub const EGRESS_CIDRS_MESSAGE: &str =
    "cidrs must be a non-empty list when mode is CIDRs, and must not be set for other modes";

/// Run: every spec field except `responses` and `cancel` is immutable, presence included.
pub const RUN_SPEC_IMMUTABLE: &str = concat!(
    "(has(self.agentRef) == has(oldSelf.agentRef) && (!has(self.agentRef) || self.agentRef == oldSelf.agentRef))",
    " && (has(self.task) == has(oldSelf.task) && (!has(self.task) || self.task == oldSelf.task))",
    " && (has(self.inputs) == has(oldSelf.inputs) && (!has(self.inputs) || self.inputs == oldSelf.inputs))",
    " && (has(self.model) == has(oldSelf.model) && (!has(self.model) || self.model == oldSelf.model))",
    " && (has(self.planMode) == has(oldSelf.planMode) && (!has(self.planMode) || self.planMode == oldSelf.planMode))",
    " && (has(self.thinking) == has(oldSelf.thinking) && (!has(self.thinking) || self.thinking == oldSelf.thinking))",
    " && (has(self.timeout) == has(oldSelf.timeout) && (!has(self.timeout) || self.timeout == oldSelf.timeout))",
    " && (has(self.inputTimeout) == has(oldSelf.inputTimeout) && (!has(self.inputTimeout) || self.inputTimeout == oldSelf.inputTimeout))",
    " && (has(self.parentRef) == has(oldSelf.parentRef) && (!has(self.parentRef) || self.parentRef == oldSelf.parentRef))",
    " && (has(self.subagentType) == has(oldSelf.subagentType) && (!has(self.subagentType) || self.subagentType == oldSelf.subagentType))",
    " && (has(self.ttlSecondsAfterFinished) == has(oldSelf.ttlSecondsAfterFinished) && (!has(self.ttlSecondsAfterFinished) || self.ttlSecondsAfterFinished == oldSelf.ttlSecondsAfterFinished))",
);
/// Message of [`RUN_SPEC_IMMUTABLE`].
pub const RUN_SPEC_IMMUTABLE_MESSAGE: &str =
    "a Run's spec is immutable except responses and cancel; create a new Run instead";

/// Run: a child Run carries both its parent and the subagent type, a top-level Run neither.
pub const PARENT_WITH_TYPE: &str = "has(self.parentRef) == has(self.subagentType)";
/// Message of [`PARENT_WITH_TYPE`].
pub const PARENT_WITH_TYPE_MESSAGE: &str =
    "parentRef and subagentType are set together, and only on child Runs";

/// Run `cancel`: once true, it stays true.
pub const CANCEL_STAYS: &str = "self || !oldSelf";
/// Message of [`CANCEL_STAYS`].
pub const CANCEL_STAYS_MESSAGE: &str = "cancel cannot be set back to false once a Run is cancelled";

/// Run `responses`: no answer is ever removed. Compares ids only: comparing whole answers of
/// every pair would exceed the per-rule cost limit.
pub const RESPONSES_APPEND_ONLY: &str = "oldSelf.all(o, self.exists(n, n.id == o.id))";
/// Message of [`RESPONSES_APPEND_ONLY`].
pub const RESPONSES_APPEND_ONLY_MESSAGE: &str =
    "responses are append-only: an answer cannot be removed";

/// Run `responses[]`: an answer, once given, does not change (correlated by `id`).
pub const RESPONSE_IMMUTABLE: &str = "self == oldSelf";
/// Message of [`RESPONSE_IMMUTABLE`].
pub const RESPONSE_IMMUTABLE_MESSAGE: &str = "an answer cannot be changed once given";

/// Run `status.report`: a delayed write from the runner never replaces a newer one.
pub const REPORT_NOT_STALE: &str = "self.attempt > oldSelf.attempt || (self.attempt == oldSelf.attempt && self.seq >= oldSelf.seq)";
/// Message of [`REPORT_NOT_STALE`].
pub const REPORT_NOT_STALE_MESSAGE: &str =
    "stale report: attempt must not decrease, and seq must not decrease within an attempt";

/// Agent `mcp.servers[].name`: the prefix of its tools' names (`<server>__<tool>`), so
/// lowercase letters, digits and single hyphens, which every model API accepts in a tool name.
pub const MCP_SERVER_NAME: &str = "self.matches('^[a-z0-9]+(-[a-z0-9]+)*$')";
/// messageExpression of [`MCP_SERVER_NAME`].
pub const MCP_SERVER_NAME_MESSAGE: &str = "'\"' + self + '\" is not an MCP server name: lowercase letters and digits in groups joined by single hyphens'";
/// What [`MCP_SERVER_NAME_MESSAGE`] says after the quoted value.
pub const MCP_SERVER_NAME_SUFFIX: &str =
    " is not an MCP server name: lowercase letters and digits in groups joined by single hyphens";

/// Agent `mcp.servers[]`: a server is reached over streamable HTTP (`url`) or started as a
/// stdio process (`command`), never both.
pub const MCP_TRANSPORT: &str = "has(self.url) != has(self.command)";
/// Message of [`MCP_TRANSPORT`].
pub const MCP_TRANSPORT_MESSAGE: &str =
    "set exactly one of url (a streamable HTTP server) and command (a stdio server)";

/// Agent `mcp.servers[]`: headers (secrets) and egress belong to HTTP servers only; a stdio
/// server runs in the sandbox, which holds no secret.
pub const MCP_HTTP_ONLY: &str = "has(self.url) || (!has(self.headers) && !has(self.egressCIDRs))";
/// Message of [`MCP_HTTP_ONLY`].
pub const MCP_HTTP_ONLY_MESSAGE: &str = "headers and egressCIDRs belong to HTTP servers (url): a stdio server runs in the sandbox, which holds no secret";

/// Agent `mcp.servers[]`: `env` belongs to stdio servers only.
pub const MCP_STDIO_ONLY: &str = "has(self.command) || !has(self.env)";
/// Message of [`MCP_STDIO_ONLY`].
pub const MCP_STDIO_ONLY_MESSAGE: &str = "env belongs to stdio servers (command)";

/// Agent `mcp.servers[].headers[].name`: an HTTP header name as servers expect them.
pub const HEADER_NAME: &str = "self.matches('^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$')";
/// messageExpression of [`HEADER_NAME`].
pub const HEADER_NAME_MESSAGE: &str = "'\"' + self + '\" is not an HTTP header name: letters and digits in groups joined by single hyphens, such as Authorization or X-Api-Key'";
/// What [`HEADER_NAME_MESSAGE`] says after the quoted value.
pub const HEADER_NAME_SUFFIX: &str = " is not an HTTP header name: letters and digits in groups joined by single hyphens, such as Authorization or X-Api-Key";

/// Headers an Agent cannot set on an MCP server, as they read in messages: the ones the MCP
/// client sets itself (the body's framing, content negotiation, the session) and the hop-by-hop
/// ones, which describe one connection and are never forwarded. Every `Mcp-` header is the
/// protocol's own too.
pub const RESERVED_HEADERS: [&str; 17] = [
    "Accept",
    "Accept-Encoding",
    "Connection",
    "Content-Encoding",
    "Content-Length",
    "Content-Type",
    "Expect",
    "Host",
    "Keep-Alive",
    "Last-Event-ID",
    "Proxy-Authenticate",
    "Proxy-Authorization",
    "Proxy-Connection",
    "TE",
    "Trailer",
    "Transfer-Encoding",
    "Upgrade",
];

/// The regular expression of [`RESERVED_HEADERS`] and the `Mcp-` prefix, case-insensitive as
/// header names are (RE2 and the `regex` crate read it alike).
pub const RESERVED_HEADER_PATTERN: &str = "(?i)^(accept|accept-encoding|connection|content-encoding|content-length|content-type|expect|host|keep-alive|last-event-id|proxy-authenticate|proxy-authorization|proxy-connection|te|trailer|transfer-encoding|upgrade|mcp-[a-z0-9-]+)$";

/// Agent `mcp.servers[].headers[].name`: not a reserved header ([`RESERVED_HEADERS`]), in any
/// case. The client would send both values, or the user's would break the request.
pub const MCP_HEADER_NOT_RESERVED: &str =
    const_format::formatcp!("!self.matches('{}')", RESERVED_HEADER_PATTERN);
/// What [`MCP_HEADER_NOT_RESERVED_MESSAGE`] says after the quoted value.
pub const MCP_HEADER_NOT_RESERVED_SUFFIX: &str = " cannot be set: the MCP client sets it itself or it is hop-by-hop (Accept, Accept-Encoding, Connection, Content-Encoding, Content-Length, Content-Type, Expect, Host, Keep-Alive, Last-Event-ID, Proxy-Authenticate, Proxy-Authorization, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade and every Mcp- header, in any case)";
/// messageExpression of [`MCP_HEADER_NOT_RESERVED`].
pub const MCP_HEADER_NOT_RESERVED_MESSAGE: &str =
    const_format::formatcp!("'\"' + self + '\"{}'", MCP_HEADER_NOT_RESERVED_SUFFIX);

/// Agent `mcp.servers[].env[].name`: an environment variable name.
pub const ENV_NAME: &str = "self.matches('^[A-Za-z_][A-Za-z0-9_]*$')";
/// messageExpression of [`ENV_NAME`].
pub const ENV_NAME_MESSAGE: &str = "'\"' + self + '\" is not an environment variable name: letters, digits and _, not starting with a digit'";
/// What [`ENV_NAME_MESSAGE`] says after the quoted value.
pub const ENV_NAME_SUFFIX: &str =
    " is not an environment variable name: letters, digits and _, not starting with a digit";

/// Schedule: Run names are `<schedule>-<slot in Unix seconds>` (11 characters more), and a Run's
/// name holds at most 63 characters.
pub const NAME_52: &str = "size(self.metadata.name) <= 52";
/// Message of [`NAME_52`].
pub const NAME_52_MESSAGE: &str = "metadata.name of a Schedule must be at most 52 characters, because its Runs are named <schedule>-<slot time in Unix seconds>";

/// Schedule `schedule`: five cron fields, a macro such as `@hourly`, or `@every <duration>`.
/// The controller parses the fields themselves and reports a bad one as `Accepted=False`.
pub const CRON_SHAPE: &str = "self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every ([0-9]{1,6}(s|m|h))+|[^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+)$')";
/// messageExpression of [`CRON_SHAPE`].
pub const CRON_SHAPE_MESSAGE: &str = "'\"' + self + '\" is not a schedule: use five cron fields (minute hour day-of-month month day-of-week, one space apart), @yearly, @monthly, @weekly, @daily, @hourly or @every <duration> such as @every 15m'";
/// What [`CRON_SHAPE_MESSAGE`] says after the quoted value.
pub const CRON_SHAPE_SUFFIX: &str = " is not a schedule: use five cron fields (minute hour day-of-month month day-of-week, one space apart), @yearly, @monthly, @weekly, @daily, @hourly or @every <duration> such as @every 15m";

/// Schedule `timeZone`: the characters of an IANA time zone name; the controller looks the
/// name up and reports an unknown one as `Accepted=False`.
pub const TIME_ZONE: &str = "self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$')";
/// messageExpression of [`TIME_ZONE`].
pub const TIME_ZONE_MESSAGE: &str =
    "'\"' + self + '\" is not a time zone name such as Europe/Berlin, America/New_York or UTC'";

/// Schedule: a timetable (`schedule`) or one time (`at`), exactly one of them.
pub const SCHEDULE_OR_AT: &str = "has(self.schedule) != has(self.at)";
/// Message of [`SCHEDULE_OR_AT`].
pub const SCHEDULE_OR_AT_MESSAGE: &str =
    "set exactly one of schedule (a timetable) and at (one time)";

/// Schedule `successfulRunsHistoryLimit` and `failedRunsHistoryLimit`.
pub const HISTORY_LIMIT_RANGE: RangeInclusive<u32> = 0..=100;
/// CEL rule of the history limits.
pub const HISTORY_LIMIT: &str = range_rule!(HISTORY_LIMIT_RANGE);
/// Message of [`HISTORY_LIMIT`].
pub const HISTORY_LIMIT_MESSAGE: &str = range_message!(HISTORY_LIMIT_RANGE);

/// Budget `limits`: at least one limit.
pub const BUDGET_SOME_LIMIT: &str = "has(self.tokens) || has(self.inputTokens) || has(self.outputTokens) || has(self.runs) || has(self.cost)";
/// Message of [`BUDGET_SOME_LIMIT`].
pub const BUDGET_SOME_LIMIT_MESSAGE: &str =
    "set at least one limit: tokens, inputTokens, outputTokens, runs or cost";

/// Budget `window`: a period or a calendar window, exactly one; a time zone only with a
/// calendar window.
pub const BUDGET_WINDOW_ONE: &str =
    "has(self.period) != has(self.calendar) && (!has(self.timeZone) || has(self.calendar))";
/// Message of [`BUDGET_WINDOW_ONE`].
pub const BUDGET_WINDOW_ONE_MESSAGE: &str = "set exactly one of period (such as 24h or 7d) and calendar (Day, Week or Month); timeZone goes with calendar only";

/// Pattern of a Budget `period`.
pub const BUDGET_PERIOD_PATTERN: &str = "^[0-9]{1,6}[smhd]$";
/// Budget `period`: `<number><unit>`, 10s to 366d.
pub const BUDGET_PERIOD: &str = "self.matches('^[0-9]{1,6}[smhd]$') && int(self.substring(0, size(self) - 1)) * (self.endsWith('d') ? 86400 : self.endsWith('h') ? 3600 : self.endsWith('m') ? 60 : 1) >= 10 && int(self.substring(0, size(self) - 1)) * (self.endsWith('d') ? 86400 : self.endsWith('h') ? 3600 : self.endsWith('m') ? 60 : 1) <= 31622400";
/// messageExpression of [`BUDGET_PERIOD`].
pub const BUDGET_PERIOD_MESSAGE: &str = "'\"' + self + '\" is not a period: a number and one unit of s, m, h or d, such as 24h, 7d or 30d, from 10s to 366d'";

/// Budget `selector.agents`: every item is an Agent name.
pub const BUDGET_AGENTS: &str =
    "self.all(a, a.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))";
/// messageExpression of [`BUDGET_AGENTS`], naming the first bad item.
pub const BUDGET_AGENTS_MESSAGE: &str = "'\"' + self.filter(a, !a.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))[0] + '\" is not an Agent name: lowercase letters, digits, - and ., starting and ending with a letter or digit'";

/// Budget `selector.runLabels`: every key is a label key (an optional DNS prefix and `/`, a
/// name of at most 63 characters).
pub const LABEL_KEYS: &str = "self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))";
/// Message of [`LABEL_KEYS`].
pub const LABEL_KEYS_MESSAGE: &str = "every key must be a label key: an optional DNS prefix and /, then at most 63 letters, digits, -, _ and ., starting and ending with a letter or digit";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserved_header_pattern_and_message_name_every_reserved_header() {
        let names: Vec<String> = RESERVED_HEADERS
            .iter()
            .map(|name| name.to_ascii_lowercase())
            .collect();
        assert_eq!(
            RESERVED_HEADER_PATTERN,
            format!("(?i)^({}|mcp-[a-z0-9-]+)$", names.join("|"))
        );
        assert!(MCP_HEADER_NOT_RESERVED_SUFFIX.ends_with(&format!(
            "({} and every Mcp- header, in any case)",
            RESERVED_HEADERS.join(", ")
        )));
        assert!(!MCP_HEADER_NOT_RESERVED_SUFFIX.contains('\''));
    }
}
