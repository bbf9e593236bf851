//! The SSRF guard: which addresses `web_fetch` refuses to reach.
//!
//! The model decides which URLs get fetched, and pages it reads can steer it, so without a
//! guard a prompt injection could read cloud metadata (`169.254.169.254`), the Kubernetes API
//! or a developer's local services. Literal IPs are checked before a request is sent, host
//! names after resolving them, on every redirect hop; the addresses that pass are the ones
//! connected to (see `resolver`). Ranges the Agent's egress allows (`AllowedRanges`) pass.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use reqwest::Url;

use super::allowed_ranges::AllowedRanges;

/// Why an address is not public.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressClass {
    Loopback,
    Private,
    LinkLocal,
    /// `0.0.0.0`, `::` — connecting to them reaches the local host on Linux.
    Unspecified,
    /// `100.64.0.0/10`, where some clouds put their metadata services.
    SharedAddressSpace,
    /// Multicast and broadcast addresses.
    Multicast,
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link-local",
            AddressClass::Unspecified => "unspecified",
            AddressClass::SharedAddressSpace => "shared (carrier-grade NAT)",
            AddressClass::Multicast => "multicast/broadcast",
        })
    }
}

/// The class of a non-public address, or `None` for a public one.
pub fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some(AddressClass::Loopback)
    } else if ip.is_private() {
        Some(AddressClass::Private)
    } else if ip.is_link_local() {
        Some(AddressClass::LinkLocal)
    } else if a == 0 {
        Some(AddressClass::Unspecified)
    } else if a == 100 && (b & 0xc0) == 64 {
        Some(AddressClass::SharedAddressSpace)
    } else if ip.is_multicast() || ip.is_broadcast() {
        Some(AddressClass::Multicast)
    } else {
        None
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    // `::ffff:127.0.0.1` and NAT64 `64:ff9b::10.0.0.1` reach the IPv4 address they embed.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let segments = ip.segments();
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [.., hi, lo] = segments;
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        return classify_v4(Ipv4Addr::new(a, b, c, d));
    }
    if ip.is_loopback() {
        Some(AddressClass::Loopback)
    } else if ip.is_unspecified() {
        Some(AddressClass::Unspecified)
    } else if ip.is_unique_local() {
        Some(AddressClass::Private)
    } else if ip.is_unicast_link_local() || (segments[0] & 0xffc0) == 0xfec0 {
        // fec0::/10 is the deprecated site-local range, still routed inside some networks.
        Some(AddressClass::LinkLocal)
    } else if ip.is_multicast() {
        Some(AddressClass::Multicast)
    } else {
        None
    }
}

/// A URL the guard refused, with the model-facing reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to fetch {host}: it is a {class} address ({ip}); only public internet addresses \
     and the Agent's egress CIDRs can be fetched"
)]
pub struct BlockedAddress {
    pub host: String,
    pub ip: IpAddr,
    pub class: AddressClass,
}

/// Refuses an address that is neither public nor in `allowed`.
pub fn check_ip(host: &str, ip: IpAddr, allowed: &AllowedRanges) -> Result<(), BlockedAddress> {
    match classify(ip) {
        Some(_) if allowed.contains(ip) => Ok(()),
        Some(class) => Err(BlockedAddress {
            host: host.to_owned(),
            ip,
            class,
        }),
        None => Ok(()),
    }
}

/// Why a URL's host was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error(transparent)]
    Blocked(#[from] BlockedAddress),
    #[error("could not resolve host {host}: {reason}")]
    Unresolvable { host: String, reason: String },
}

/// Refuses a URL whose host is, or resolves to, an address that is neither public nor in
/// `allowed`.
///
/// Every resolved address must pass: a name with one private address among public ones could
/// still be connected through the private one.
pub async fn check_url(url: &Url, allowed: &AllowedRanges) -> Result<(), GuardError> {
    let Some(host) = url.host_str() else {
        return Err(GuardError::Unresolvable {
            host: url.to_string(),
            reason: "the URL has no host".to_owned(),
        });
    };
    if let Some(ip) = literal_ip(url) {
        return Ok(check_ip(host, ip, allowed)?);
    }
    let addresses = tokio::net::lookup_host((host, url.port_or_known_default().unwrap_or(80)))
        .await
        .map_err(|error| GuardError::Unresolvable {
            host: host.to_owned(),
            reason: error.to_string(),
        })?;
    for address in addresses {
        check_ip(host, address.ip(), allowed)?;
    }
    Ok(())
}

/// The literal IP of a URL's host, if it is one (`http://[::1]/` gives `::1`).
///
/// The URL parser has already normalised IPv4 spellings such as `http://2130706433/`.
pub fn literal_ip(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    let host = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    host.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(text: &str) -> Option<AddressClass> {
        classify(text.parse().unwrap())
    }

    #[test]
    fn refuses_internal_ranges() {
        let cases = [
            ("127.0.0.1", AddressClass::Loopback),
            ("127.255.0.9", AddressClass::Loopback),
            ("10.1.2.3", AddressClass::Private),
            ("172.16.0.1", AddressClass::Private),
            ("172.31.255.255", AddressClass::Private),
            ("192.168.1.1", AddressClass::Private),
            ("169.254.169.254", AddressClass::LinkLocal),
            ("0.0.0.0", AddressClass::Unspecified),
            ("100.100.100.200", AddressClass::SharedAddressSpace),
            ("255.255.255.255", AddressClass::Multicast),
            ("::1", AddressClass::Loopback),
            ("::", AddressClass::Unspecified),
            ("fc00::1", AddressClass::Private),
            ("fd00:ec2::254", AddressClass::Private),
            ("fe80::1", AddressClass::LinkLocal),
            ("::ffff:127.0.0.1", AddressClass::Loopback),
            ("::ffff:169.254.169.254", AddressClass::LinkLocal),
            ("64:ff9b::a00:1", AddressClass::Private),
        ];
        for (ip, expected) in cases {
            assert_eq!(class(ip), Some(expected), "{ip}");
        }
    }

    #[test]
    fn allows_public_addresses() {
        for ip in [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(class(ip), None, "{ip}");
        }
    }

    #[test]
    fn literal_ip_reads_bracketed_ipv6_and_ignores_names() {
        let url = Url::parse("http://[::1]:8080/x").unwrap();
        assert_eq!(literal_ip(&url), Some("::1".parse().unwrap()));
        let url = Url::parse("http://2130706433/").unwrap();
        assert_eq!(literal_ip(&url), Some("127.0.0.1".parse().unwrap()));
        let url = Url::parse("http://example.com/").unwrap();
        assert_eq!(literal_ip(&url), None);
    }

    #[tokio::test]
    async fn check_url_refuses_names_resolving_to_loopback() {
        let url = Url::parse("http://localhost:9/").unwrap();
        let none = AllowedRanges::default();
        let error = check_url(&url, &none).await.unwrap_err();
        assert!(
            matches!(&error, GuardError::Blocked(b) if b.class == AddressClass::Loopback),
            "{error:?}"
        );
        let url = Url::parse("http://[fe80::1]/").unwrap();
        assert!(matches!(
            check_url(&url, &none).await,
            Err(GuardError::Blocked(_))
        ));
    }

    #[tokio::test]
    async fn check_url_reports_unresolvable_names() {
        // `.invalid` is reserved never to resolve (RFC 6761).
        let url = Url::parse("http://no-such-host.invalid/").unwrap();
        let error = check_url(&url, &AllowedRanges::default())
            .await
            .unwrap_err();
        assert!(
            matches!(&error, GuardError::Unresolvable { host, .. } if host == "no-such-host.invalid"),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn allowed_ranges_pass_and_nothing_else_does() {
        let loopback = AllowedRanges::parse(&["127.0.0.0/8", "::1"]).unwrap();
        let url = Url::parse("http://localhost:9/").unwrap();
        assert_eq!(check_url(&url, &loopback).await, Ok(()));
        // A name must pass with every address it has: `localhost` also has `::1`.
        let v4_only = AllowedRanges::parse(&["127.0.0.0/8"]).unwrap();
        if tokio::net::lookup_host(("localhost", 9))
            .await
            .unwrap()
            .any(|a| a.is_ipv6())
        {
            assert!(check_url(&url, &v4_only).await.is_err());
        }
        let metadata = "169.254.169.254".parse().unwrap();
        assert!(check_ip("m", metadata, &loopback).is_err());
        let link_local = AllowedRanges::parse(&["169.254.0.0/16"]).unwrap();
        assert_eq!(check_ip("m", metadata, &link_local), Ok(()));
    }

    #[test]
    fn blocked_message_names_host_and_class() {
        let error = check_ip(
            "metadata",
            "169.254.169.254".parse().unwrap(),
            &AllowedRanges::default(),
        )
        .unwrap_err();
        let text = error.to_string();
        assert!(text.contains("metadata"), "{text}");
        assert!(text.contains("link-local"), "{text}");
    }
}
