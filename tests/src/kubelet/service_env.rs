//! Where a container finds the API server. A real node gives every container
//! `KUBERNETES_SERVICE_HOST`/`PORT` of the `kubernetes` Service, whose ClusterIP kube-proxy
//! routes to the API server; there is no kube-proxy here and containers share the host's
//! network, so the variables name the API server itself, as the kubelet's kubeconfig does.
//! With the ServiceAccount volume the API server's admission adds to each Pod, that is what
//! in-cluster clients (kube-rs's `Client::try_default`, client-go's `InClusterConfig`) read.

use http::Uri;

/// The API server's address as containers are told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiServer {
    /// A host name or IP address (an IPv6 one without brackets, as in-cluster clients expect).
    pub host: String,
    /// The port.
    pub port: u16,
}

impl ApiServer {
    /// The address of `url` (a kubeconfig's `server`); the port defaults to the scheme's.
    pub fn from_url(url: &Uri) -> Result<ApiServer, String> {
        let host = url
            .host()
            .filter(|host| !host.is_empty())
            .ok_or_else(|| format!("the API server URL {url} has no host"))?;
        let port = match (url.port_u16(), url.scheme_str()) {
            (Some(port), _) => port,
            (None, Some("http")) => 80,
            (None, _) => 443,
        };
        Ok(ApiServer {
            host: host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host)
                .to_owned(),
            port,
        })
    }

    /// The variables every container gets (under what the Pod defines).
    pub fn env(&self) -> [(String, String); 2] {
        [
            ("KUBERNETES_SERVICE_HOST".to_owned(), self.host.clone()),
            ("KUBERNETES_SERVICE_PORT".to_owned(), self.port.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(url: &str) -> Result<ApiServer, String> {
        ApiServer::from_url(&url.parse().unwrap())
    }

    #[test]
    fn the_address_comes_from_the_url() {
        for (url, host, port) in [
            ("https://127.0.0.1:36443", "127.0.0.1", 36443),
            ("https://127.0.0.1:36443/", "127.0.0.1", 36443),
            ("https://api.example.com", "api.example.com", 443),
            ("http://localhost", "localhost", 80),
            ("https://[::1]:6443", "::1", 6443),
        ] {
            assert_eq!(
                server(url),
                Ok(ApiServer {
                    host: host.to_owned(),
                    port
                }),
                "{url}"
            );
        }
        assert!(server("/api").unwrap_err().contains("no host"));
    }

    #[test]
    fn the_variables_are_those_in_cluster_clients_read() {
        let env = server("https://127.0.0.1:36443").unwrap().env();
        assert_eq!(
            env,
            [
                ("KUBERNETES_SERVICE_HOST".to_owned(), "127.0.0.1".to_owned()),
                ("KUBERNETES_SERVICE_PORT".to_owned(), "36443".to_owned()),
            ]
        );
    }
}
