//! The non-public ranges an Agent lets `web_fetch` reach: the CIDRs of its
//! `sandbox.egress` in mode `CIDRs`, the one place a manifest states that an internal service
//! is a legitimate destination. Nothing else opens the SSRF guard.

use std::net::IpAddr;

use herd_crds::agent::{EgressMode, EgressSpec};
use ipnet::IpNet;

/// Ranges exempt from the SSRF guard; empty by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedRanges(Vec<IpNet>);

impl AllowedRanges {
    /// Parses CIDRs (`10.20.0.0/16`, `fd00::/8`); a bare address means that address alone.
    pub fn parse<S: AsRef<str>>(cidrs: &[S]) -> Result<Self, String> {
        cidrs
            .iter()
            .enumerate()
            .map(|(index, cidr)| {
                let text = cidr.as_ref().trim();
                text.parse::<IpNet>()
                    .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        format!("cidrs[{index}]: {text:?} is not a CIDR such as 10.0.0.0/8")
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(AllowedRanges)
    }

    /// The ranges an Agent's `sandbox.egress` allows: its `cidrs` in mode `CIDRs`, none
    /// otherwise (`Internet` means public addresses only).
    pub fn from_egress(egress: Option<&EgressSpec>) -> Result<Self, String> {
        match egress {
            Some(egress) if egress.mode == Some(EgressMode::Cidrs) => Self::parse(&egress.cidrs),
            _ => Ok(AllowedRanges::default()),
        }
    }

    /// Whether `ip` lies in one of the ranges. An IPv4-mapped IPv6 address is the IPv4
    /// address it carries (the socket reaches that host).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|range| range.contains(&ip))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn parses_cidrs_and_bare_addresses() {
        let ranges = AllowedRanges::parse(&["127.0.0.0/8", " fd00::/8 ", "10.1.2.3"]).unwrap();
        assert!(ranges.contains(ip("127.9.9.9")));
        assert!(ranges.contains(ip("fd12::1")));
        assert!(ranges.contains(ip("10.1.2.3")));
        assert!(!ranges.contains(ip("10.1.2.4")));
        assert!(!ranges.contains(ip("::1")));
        assert!(ranges.contains(ip("::ffff:127.0.0.1")), "IPv4-mapped");
    }

    #[test]
    fn names_the_bad_entry() {
        let error = AllowedRanges::parse(&["10.0.0.0/8", "intranet.corp"]).unwrap_err();
        assert!(error.starts_with("cidrs[1]: \"intranet.corp\""), "{error}");
        assert!(AllowedRanges::parse(&["10.0.0.0/33"]).is_err());
    }

    #[test]
    fn only_cidrs_mode_allows_anything() {
        let spec = |mode, cidrs: &[&str]| EgressSpec {
            mode,
            cidrs: cidrs.iter().map(|c| (*c).to_owned()).collect(),
        };
        let cidrs = spec(Some(EgressMode::Cidrs), &["192.168.0.0/16"]);
        assert!(
            AllowedRanges::from_egress(Some(&cidrs))
                .unwrap()
                .contains(ip("192.168.1.1"))
        );
        for other in [
            spec(Some(EgressMode::Internet), &[]),
            spec(Some(EgressMode::None), &[]),
            spec(None, &[]),
        ] {
            assert!(
                AllowedRanges::from_egress(Some(&other))
                    .unwrap()
                    .0
                    .is_empty()
            );
        }
        assert!(AllowedRanges::from_egress(None).unwrap().0.is_empty());
    }

    proptest! {
        #[test]
        fn a_range_contains_exactly_its_addresses(a in any::<u32>(), b in any::<u32>(), len in 0u8..=32) {
            let cidr = format!("{}/{len}", std::net::Ipv4Addr::from(a));
            let ranges = AllowedRanges::parse(&[cidr]).map_err(TestCaseError::fail)?;
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            let inside = (a & mask) == (b & mask);
            prop_assert_eq!(ranges.contains(IpAddr::from(std::net::Ipv4Addr::from(b))), inside);
        }
    }
}
