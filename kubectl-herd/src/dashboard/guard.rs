//! Who may use the dashboard: requests to the loopback address and port it serves on (a
//! `Host` or `Origin` naming any other place is a DNS-rebinding or cross-site attempt), that
//! carry the token printed at start, once in the first URL (then swapped for an HttpOnly,
//! SameSite=Strict cookie and taken out of the address bar) and after that in the cookie.
//!
//! The dashboard acts with the caller's kubeconfig: whoever gets past this acts as them, so
//! every request is checked, assets included.

use rand::Rng;

/// The name of the query parameter carrying the token in the first URL.
pub const TOKEN_PARAMETER: &str = "token";

/// The checks of one dashboard: its port and its token.
#[derive(Clone)]
pub struct Guard {
    token: String,
    port: u16,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// What a request shows of itself to [`Guard::admit`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Knock<'a> {
    /// Whether the method only reads (GET, HEAD).
    pub reads: bool,
    /// The `Host` header.
    pub host: Option<&'a str>,
    /// The `Origin` header.
    pub origin: Option<&'a str>,
    /// The path.
    pub path: &'a str,
    /// The query string, without `?`.
    pub query: Option<&'a str>,
    /// The `Cookie` headers, joined by `; `.
    pub cookies: Option<&'a str>,
}

/// The guard's decision on a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Serve it.
    Allow,
    /// The first URL's token is right: set the cookie and go to `location` (the same page
    /// without the token).
    Enter {
        /// Where to go.
        location: String,
    },
    /// Refuse it with this status and why.
    Refuse {
        /// 403 for a foreign Host or Origin, 401 without the token.
        status: u16,
        /// What to do.
        why: &'static str,
    },
}

/// Refusal texts; they name no secret.
const FOREIGN_HOST: &str = "this dashboard answers only at 127.0.0.1 or localhost with its own \
                            port (the Host header names another place)";
const FOREIGN_ORIGIN: &str = "this dashboard takes requests only from its own pages (the Origin \
                              header names another site)";
const NO_ORIGIN: &str = "a change must come from the dashboard's own pages (the request has no \
                         Origin header)";
const NO_TOKEN: &str = "open the URL that `kubectl herd dashboard` printed: it carries the \
                        token this dashboard asks for (a restarted dashboard has a new one)";

impl Guard {
    /// A guard for the dashboard on `port` with a new random token.
    pub fn new(port: u16) -> Guard {
        let bytes: [u8; 32] = rand::rng().random();
        let token = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Guard { token, port }
    }

    /// A guard with a given token (tests).
    pub fn with_token(port: u16, token: &str) -> Guard {
        Guard {
            token: token.to_owned(),
            port,
        }
    }

    /// The token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The URL to open first: the dashboard with its token.
    pub fn first_url(&self) -> String {
        format!(
            "http://127.0.0.1:{}/?{TOKEN_PARAMETER}={}",
            self.port, self.token
        )
    }

    /// The cookie's name: with the port, since cookies do not tell ports apart and two
    /// dashboards may run side by side.
    pub fn cookie_name(&self) -> String {
        format!("herd-dashboard-{}", self.port)
    }

    /// The `Set-Cookie` value that lets the browser in: the page's scripts cannot read it, and
    /// no other site's page sends it.
    pub fn set_cookie(&self) -> String {
        format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            self.cookie_name(),
            self.token
        )
    }

    /// Whether `knock` may be served.
    pub fn admit(&self, knock: &Knock<'_>) -> Admission {
        if !knock.host.is_some_and(|host| self.is_own_host(host)) {
            return refuse(403, FOREIGN_HOST);
        }
        match knock.origin {
            Some(origin) if !self.is_own_origin(origin) => return refuse(403, FOREIGN_ORIGIN),
            None if !knock.reads => return refuse(403, NO_ORIGIN),
            _ => {}
        }
        let cookie = knock
            .cookies
            .and_then(|c| cookie_value(c, &self.cookie_name()));
        if cookie.is_some_and(|c| same(c, &self.token)) {
            return Admission::Allow;
        }
        let (given, rest) = split_token(knock.query.unwrap_or_default());
        if knock.reads && given.is_some_and(|t| same(t, &self.token)) {
            let location = if rest.is_empty() {
                knock.path.to_owned()
            } else {
                format!("{}?{rest}", knock.path)
            };
            return Admission::Enter { location };
        }
        refuse(401, NO_TOKEN)
    }

    fn is_own_host(&self, host: &str) -> bool {
        let Some((name, port)) = host.rsplit_once(':') else {
            return false;
        };
        port == self.port.to_string()
            && (name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost"))
    }

    fn is_own_origin(&self, origin: &str) -> bool {
        origin
            .strip_prefix("http://")
            .is_some_and(|host| self.is_own_host(host))
    }
}

fn refuse(status: u16, why: &'static str) -> Admission {
    Admission::Refuse { status, why }
}

/// The value of the cookie `name` among `cookies` (`a=1; b=2`).
fn cookie_value<'a>(cookies: &'a str, name: &str) -> Option<&'a str> {
    cookies
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// The token parameter's value in `query`, and the query without it.
fn split_token(query: &str) -> (Option<&str>, String) {
    let mut token = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((TOKEN_PARAMETER, value)) => token = Some(value),
            _ => rest.push(pair),
        }
    }
    (token, rest.join("&"))
}

/// Compares in time independent of where the strings differ, so the token cannot be guessed
/// byte by byte from response times.
fn same(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    let differ = a
        .iter()
        .zip(b.iter())
        .fold(u8::from(a.len() != b.len()), |acc, (x, y)| acc | (x ^ y));
    differ == 0
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const PORT: u16 = 8123;
    const TOKEN: &str = "0123456789abcdef";

    fn guard() -> Guard {
        Guard::with_token(PORT, TOKEN)
    }

    fn knock<'a>(host: &'a str, cookies: Option<&'a str>, query: Option<&'a str>) -> Knock<'a> {
        Knock {
            reads: true,
            host: Some(host),
            origin: None,
            path: "/runs",
            query,
            cookies,
        }
    }

    const COOKIE: &str = "other=1; herd-dashboard-8123=0123456789abcdef";

    #[test]
    fn the_first_url_enters_and_loses_its_token() {
        assert_eq!(
            guard().admit(&knock(
                "127.0.0.1:8123",
                None,
                Some("token=0123456789abcdef")
            )),
            Admission::Enter {
                location: "/runs".into()
            }
        );
        assert_eq!(
            guard().admit(&knock(
                "localhost:8123",
                None,
                Some("agent=a&token=0123456789abcdef&page=2")
            )),
            Admission::Enter {
                location: "/runs?agent=a&page=2".into()
            }
        );
        assert_eq!(
            guard().first_url(),
            "http://127.0.0.1:8123/?token=0123456789abcdef"
        );
        assert_eq!(
            guard().set_cookie(),
            "herd-dashboard-8123=0123456789abcdef; HttpOnly; SameSite=Strict; Path=/"
        );
    }

    #[test]
    fn the_cookie_lets_in_and_nothing_else_does() {
        assert_eq!(
            guard().admit(&knock("127.0.0.1:8123", Some(COOKIE), None)),
            Admission::Allow
        );
        for (cookies, query) in [
            (None, None),
            (Some("herd-dashboard-8123=0123456789abcdee"), None),
            (Some("herd-dashboard-8124=0123456789abcdef"), None),
            (None, Some("token=0123456789abcde")),
            (None, Some("token=")),
            (None, Some("tokens=0123456789abcdef")),
        ] {
            assert!(
                matches!(
                    guard().admit(&knock("127.0.0.1:8123", cookies, query)),
                    Admission::Refuse { status: 401, .. }
                ),
                "{cookies:?} {query:?}"
            );
        }
    }

    #[test]
    fn foreign_hosts_and_origins_are_refused_even_with_the_token() {
        for host in [
            "evil.example:8123",
            "127.0.0.1:8124",
            "127.0.0.1",
            "127.0.0.1.evil.example:8123",
            "[::1]:8123",
        ] {
            assert!(
                matches!(
                    guard().admit(&knock(host, Some(COOKIE), None)),
                    Admission::Refuse { status: 403, .. }
                ),
                "{host}"
            );
        }
        let mut missing = knock("127.0.0.1:8123", Some(COOKIE), None);
        missing.host = None;
        assert!(matches!(
            guard().admit(&missing),
            Admission::Refuse { status: 403, .. }
        ));
        for origin in ["http://evil.example", "https://127.0.0.1:8123", "null"] {
            let mut from = knock("127.0.0.1:8123", Some(COOKIE), None);
            from.origin = Some(origin);
            assert!(
                matches!(guard().admit(&from), Admission::Refuse { status: 403, .. }),
                "{origin}"
            );
        }
    }

    #[test]
    fn changes_need_the_cookie_and_an_own_origin() {
        let mut post = knock("127.0.0.1:8123", Some(COOKIE), None);
        post.reads = false;
        assert!(matches!(
            guard().admit(&post),
            Admission::Refuse { status: 403, .. }
        ));
        post.origin = Some("http://localhost:8123");
        assert_eq!(guard().admit(&post), Admission::Allow);
        post.cookies = None;
        post.query = Some("token=0123456789abcdef");
        assert!(
            matches!(guard().admit(&post), Admission::Refuse { status: 401, .. }),
            "the URL's token only opens pages"
        );
    }

    #[test]
    fn new_tokens_are_long_and_differ() {
        let (a, b) = (Guard::new(1), Guard::new(1));
        assert_eq!(a.token().len(), 64);
        assert_ne!(a.token(), b.token());
        assert!(!format!("{a:?}").contains(a.token()));
    }

    proptest! {
        #[test]
        fn only_the_token_opens(given in "[0-9a-f]{0,20}") {
            let query = format!("token={given}");
            let admitted = guard().admit(&knock("127.0.0.1:8123", None, Some(&query)));
            prop_assert_eq!(matches!(admitted, Admission::Enter { .. }), given == TOKEN);
            let cookie = format!("herd-dashboard-8123={given}");
            let admitted = guard().admit(&knock("127.0.0.1:8123", Some(&cookie), None));
            prop_assert_eq!(admitted == Admission::Allow, given == TOKEN);
        }

        #[test]
        fn only_own_hosts_are_served(host in "[a-z0-9.:\\[\\]]{0,24}") {
            let own = host == "127.0.0.1:8123" || host == "localhost:8123";
            let admitted = guard().admit(&knock(&host, Some(COOKIE), None));
            prop_assert_eq!(admitted == Admission::Allow, own);
        }

        #[test]
        fn only_own_origins_may_change(origin in "[a-z0-9.:/]{0,30}") {
            let own = origin == "http://127.0.0.1:8123" || origin == "http://localhost:8123";
            let mut post = knock("127.0.0.1:8123", Some(COOKIE), None);
            post.reads = false;
            post.origin = Some(&origin);
            prop_assert_eq!(guard().admit(&post) == Admission::Allow, own);
        }
    }
}
