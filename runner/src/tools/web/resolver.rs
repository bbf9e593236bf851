//! A DNS resolver for reqwest that enforces the SSRF guard at connect time.
//!
//! `check_url` resolves a host before the request, but the HTTP client resolves it again
//! when connecting; a hostile DNS server could answer the second time with a private
//! address (DNS rebinding). Resolving through this resolver closes that gap.

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::address::check_ip;
use super::allowed_ranges::AllowedRanges;

/// Resolves with the system resolver and fails when a name has an address that is neither
/// public nor allowed. The client connects to exactly the addresses returned here, so what
/// was checked is what is reached: there is no second lookup a rebinding DNS server could
/// answer differently.
///
/// Configured proxies are exempt: a proxy at a private address is the user's own egress
/// path, and behind it the target names are resolved by the proxy, not here.
#[derive(Clone, Debug, Default)]
pub struct GuardedResolver {
    exempt_hosts: Vec<String>,
    allowed: AllowedRanges,
}

impl GuardedResolver {
    /// A resolver allowing `allowed` and exempting the proxy hosts named in the standard
    /// proxy variables.
    pub fn from_env(allowed: AllowedRanges) -> Self {
        let exempt_hosts = [
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
        ]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .filter_map(|value| proxy_host(&value))
        .collect();
        GuardedResolver {
            exempt_hosts,
            allowed,
        }
    }
}

/// The host of a proxy variable's value, which may lack a scheme (`proxy.corp:3128`).
fn proxy_host(value: &str) -> Option<String> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    let with_scheme = if value.contains("://") {
        value.to_owned()
    } else {
        format!("http://{value}")
    };
    let url = reqwest::Url::parse(&with_scheme).ok()?;
    url.host_str().map(|host| host.to_ascii_lowercase())
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let exempt = self.exempt_hosts.contains(&host);
        let allowed = self.allowed.clone();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !exempt {
                for address in &addresses {
                    check_ip(&host, address.ip(), &allowed)?;
                }
            }
            let addresses: Addrs = Box::new(addresses.into_iter());
            Ok(addresses)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::web::address::BlockedAddress;

    #[tokio::test]
    async fn refuses_private_names_unless_exempt_or_allowed() {
        let resolver = GuardedResolver::default();
        let error = match resolver.resolve("localhost".parse().unwrap()).await {
            Ok(_) => panic!("localhost must be refused"),
            Err(error) => error,
        };
        assert!(error.downcast_ref::<BlockedAddress>().is_some(), "{error}");

        let resolver = GuardedResolver {
            exempt_hosts: vec!["localhost".to_owned()],
            allowed: AllowedRanges::default(),
        };
        let addresses: Vec<_> = match resolver.resolve("localhost".parse().unwrap()).await {
            Ok(addresses) => addresses.collect(),
            Err(error) => panic!("exempt host refused: {error}"),
        };
        assert!(!addresses.is_empty());

        let resolver = GuardedResolver {
            exempt_hosts: Vec::new(),
            allowed: AllowedRanges::parse(&["127.0.0.0/8", "::1/128"]).unwrap(),
        };
        let addresses: Vec<_> = match resolver.resolve("localhost".parse().unwrap()).await {
            Ok(addresses) => addresses.collect(),
            Err(error) => panic!("allowed range refused: {error}"),
        };
        assert!(!addresses.is_empty());
    }

    #[test]
    fn proxy_host_accepts_values_with_and_without_scheme() {
        assert_eq!(
            proxy_host("http://user:pw@Proxy.Corp:3128/"),
            Some("proxy.corp".to_owned())
        );
        assert_eq!(proxy_host("10.0.0.1:8080"), Some("10.0.0.1".to_owned()));
        assert_eq!(proxy_host("  "), None);
    }
}
