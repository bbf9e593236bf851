//! The value formats the CRDs' CEL rules check ([`crate::rules`]), in plain Rust for manifests
//! that never reach an API server. Regular expressions are the rules' own, which mean the same
//! in RE2 (CEL) and in the `regex` crate.

use std::net::IpAddr;
use std::sync::LazyLock;

use regex::Regex;

/// A compiled pattern; `None` never happens for these constants (a test compiles each), and
/// would only make its check refuse everything.
type Pattern = LazyLock<Option<Regex>>;

fn regex(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

fn matches(pattern: &Pattern, text: &str) -> bool {
    pattern.as_ref().is_some_and(|r| r.is_match(text))
}

static DNS_SUBDOMAIN: Pattern =
    LazyLock::new(|| regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"));
static IMAGE: Pattern = LazyLock::new(|| regex("^[^\t\n\x0C\r @]+(@sha256:[a-f0-9]{64})?$"));
static LABEL_KEY: Pattern = LazyLock::new(|| {
    regex(
        "^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$",
    )
});
static LABEL_VALUE: Pattern =
    LazyLock::new(|| regex("^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"));
static CONFIG_KEY: Pattern = LazyLock::new(|| regex("^[-._a-zA-Z0-9]+$"));
static DATE_TIME: Pattern = LazyLock::new(|| {
    regex(
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$",
    )
});
static QUANTITY: Pattern = LazyLock::new(|| {
    regex(
        "^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$",
    )
});
static DOT_DOT_SEGMENT: Pattern = LazyLock::new(|| regex("(^|/)[.][.](/|$)"));
static HYPHENATED_LOWERCASE: Pattern = LazyLock::new(|| regex("^[a-z0-9]+(-[a-z0-9]+)*$"));
static HEADER_NAME: Pattern = LazyLock::new(|| regex("^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$"));
static ENV_NAME: Pattern = LazyLock::new(|| regex("^[A-Za-z_][A-Za-z0-9_]*$"));
static RESERVED_HEADER: Pattern = LazyLock::new(|| regex(crate::rules::RESERVED_HEADER_PATTERN));

/// A DNS-1123 subdomain: what `runtimeClassName`, `storageClassName` and most object names are.
/// (Lengths are the schema's `maxLength`.)
pub fn is_dns_subdomain(text: &str) -> bool {
    matches(&DNS_SUBDOMAIN, text)
}

/// An image reference: no whitespace, and an `@` only for a `sha256` digest.
pub fn is_image(text: &str) -> bool {
    matches(&IMAGE, text)
}

/// A node label: a key of an optional DNS prefix, `/` and a name of at most 63 characters, and
/// a value of at most 63 characters.
pub fn is_label(key: &str, value: &str) -> bool {
    key.len() <= 317 && matches(&LABEL_KEY, key) && matches(&LABEL_VALUE, value)
}

/// An MCP server name: lowercase letters and digits in groups joined by single hyphens.
pub fn is_mcp_server_name(text: &str) -> bool {
    matches(&HYPHENATED_LOWERCASE, text)
}

/// An HTTP header name: letters and digits in groups joined by single hyphens.
pub fn is_header_name(text: &str) -> bool {
    matches(&HEADER_NAME, text)
}

/// A header an Agent cannot set on an MCP server (`rules::RESERVED_HEADERS` or an `Mcp-`
/// header), in any case: the API server's rule and local runs both ask this.
pub fn is_reserved_header(name: &str) -> bool {
    matches(&RESERVED_HEADER, name)
}

/// An environment variable name.
pub fn is_env_name(text: &str) -> bool {
    matches(&ENV_NAME, text)
}

/// A key of a Secret's or ConfigMap's `data`.
pub fn is_config_key(text: &str) -> bool {
    matches(&CONFIG_KEY, text)
}

/// An RFC 3339 date-time, as Kubernetes writes them.
pub fn is_date_time(text: &str) -> bool {
    matches(&DATE_TIME, text)
}

/// A Kubernetes quantity (`500m`, `2`, `512Mi`, `1e3`).
pub fn is_quantity(text: &str) -> bool {
    matches(&QUANTITY, text)
}

/// A relative path without a `..` segment.
pub fn is_relative_path(text: &str) -> bool {
    !text.starts_with('/') && !matches(&DOT_DOT_SEGMENT, text)
}

/// A CIDR as Go's `netip.ParsePrefix` (CEL's `isCIDR`) reads it: an IPv4 or IPv6 address
/// without a zone, `/`, and a prefix length in range without leading zeros.
pub fn is_cidr(text: &str) -> bool {
    let Some((address, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(address) = address.parse::<IpAddr>() else {
        return false;
    };
    let canonical_bits = !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && (bits == "0" || !bits.starts_with('0'));
    let max = if address.is_ipv4() { 32 } else { 128 };
    canonical_bits && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// An `http` or `https` URL with a host and no whitespace.
pub fn is_http_url(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let host = match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    !host.is_empty() && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        for pattern in [
            &DNS_SUBDOMAIN,
            &IMAGE,
            &LABEL_KEY,
            &LABEL_VALUE,
            &CONFIG_KEY,
            &DATE_TIME,
            &QUANTITY,
            &DOT_DOT_SEGMENT,
            &HYPHENATED_LOWERCASE,
            &HEADER_NAME,
            &ENV_NAME,
            &RESERVED_HEADER,
        ] {
            assert!(pattern.is_some());
        }
    }

    #[test]
    fn cidrs() {
        for good in ["10.0.0.0/8", "0.0.0.0/0", "fd00::/8", "::/0", "10.1.2.3/32"] {
            assert!(is_cidr(good), "{good}");
        }
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "10.0.0/8",
            "fd00::/129",
            "10.0.0.0/08",
            "a/8",
            "/8",
            "10.0.0.0/",
        ] {
            assert!(!is_cidr(bad), "{bad}");
        }
    }

    #[test]
    fn urls() {
        for good in [
            "http://vllm.models:8000/v1",
            "https://api.openai.com/v1",
            "HTTP://x",
            "http://[::1]:8080/",
        ] {
            assert!(is_http_url(good), "{good}");
        }
        for bad in [
            "ftp://x",
            "vllm:8000",
            "http://",
            "http:///v1",
            "https://a b",
            "file:///etc/passwd",
        ] {
            assert!(!is_http_url(bad), "{bad}");
        }
    }

    #[test]
    fn paths() {
        for good in ["reports", "a/b.txt", "..a", "a..", "a/..b/c"] {
            assert!(is_relative_path(good), "{good}");
        }
        for bad in ["/etc", "..", "../x", "a/../b", "a/.."] {
            assert!(!is_relative_path(bad), "{bad}");
        }
    }

    #[test]
    fn reserved_headers() {
        for reserved in [
            "Host",
            "content-type",
            "MCP-SESSION-ID",
            "Mcp-Param-Region",
            "te",
        ] {
            assert!(is_reserved_header(reserved), "{reserved}");
        }
        for free in [
            "Authorization",
            "X-Api-Key",
            "X-Content-Type",
            "Hosts",
            "Mcp",
            "Tea",
        ] {
            assert!(!is_reserved_header(free), "{free}");
        }
    }

    /// `name` with the case of each letter flipped where `flips` says so.
    fn recased(name: &str, flips: &[bool]) -> String {
        name.chars()
            .zip(flips.iter().cycle())
            .map(|(c, flip)| {
                if *flip {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect()
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_reserved_header_is_reserved_in_any_case(
            index in 0..crate::rules::RESERVED_HEADERS.len(),
            flips in proptest::collection::vec(any::<bool>(), 1..24),
        ) {
            let name = recased(crate::rules::RESERVED_HEADERS[index], &flips);
            prop_assert!(is_reserved_header(&name), "{}", name);
            let protocol = recased("Mcp-Session-Id", &flips);
            prop_assert!(is_reserved_header(&protocol), "{}", protocol);
        }

        #[test]
        fn case_never_changes_whether_a_header_is_reserved(
            name in "[A-Za-z0-9]{1,10}(-[A-Za-z0-9]{1,10}){0,3}",
            flips in proptest::collection::vec(any::<bool>(), 1..24),
        ) {
            let reserved = is_reserved_header(&name);
            prop_assert_eq!(is_reserved_header(&recased(&name, &flips)), reserved);
            let listed = crate::rules::RESERVED_HEADERS
                .iter()
                .any(|r| r.eq_ignore_ascii_case(&name));
            let protocol = name.len() > 4 && name[..4].eq_ignore_ascii_case("mcp-");
            prop_assert_eq!(reserved, listed || protocol, "{}", name);
        }

        #[test]
        fn never_panic(text in "\\PC{0,80}") {
            let _ = (is_cidr(&text), is_http_url(&text), is_image(&text), is_quantity(&text));
            let _ = (is_label(&text, &text), is_date_time(&text), is_relative_path(&text));
        }

        #[test]
        fn a_dot_dot_segment_or_leading_slash_is_never_relative(
            before in proptest::collection::vec("[a-z.]{1,4}", 0..3),
            after in proptest::collection::vec("[a-z.]{1,4}", 0..3),
        ) {
            let mut segments = before.clone();
            segments.push("..".to_owned());
            segments.extend(after.clone());
            let path = segments.join("/");
            prop_assert!(!is_relative_path(&path), "{}", path);
            let absolute = format!("/{}", before.join("/"));
            prop_assert!(!is_relative_path(&absolute), "{}", absolute);
        }

        #[test]
        fn paths_of_plain_segments_are_relative(
            segments in proptest::collection::vec("[a-z0-9_-][a-z0-9_.-]{0,8}", 1..4),
        ) {
            let path = segments.join("/");
            prop_assert_eq!(
                is_relative_path(&path),
                !segments.iter().any(|s| s == ".."),
                "{}", path
            );
        }
    }
}
