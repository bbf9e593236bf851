//! A run API for tests: real HTTPS on a loopback port with a certificate issued by the
//! operator's own code (`herd_operator::certificates`), answering from a closure (`canned`
//! answers every route as a Run would, long polls held back as the server holds them) and
//! recording every request. Used by the unit tests of the run-API client and, through `#[path]`, by the
//! `herd-runner pod` tests in `runner/tests/`, so it names no `crate::` item.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Response, StatusCode, Uri};
use herd_operator::certificates::{CertificatePem, new_ca, new_leaf};
use herd_operator::decide::run_api_tls::Validity;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// The path, e.g. `/v1/runs/ns/r/result`.
    pub path: String,
    /// The query string, e.g. `wait=55`.
    pub query: Option<String>,
    pub authorization: Option<String>,
    /// The W3C `traceparent` header, when the request carried one.
    pub traceparent: Option<String>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The body as JSON (`Null` when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// An answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// How long the server holds the answer back (a long poll's wait).
    pub delay: Duration,
}

impl Reply {
    /// `status` with a JSON body.
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: serde_json::to_vec(body).unwrap(),
            delay: Duration::ZERO,
        }
    }

    /// `status` with `body` as it is and no headers.
    pub fn raw(status: u16, body: Vec<u8>) -> Self {
        Reply {
            status,
            headers: vec![],
            body,
            delay: Duration::ZERO,
        }
    }

    /// A presented file: its bytes, its virtual path (percent-encoded) in `herd-file-path`.
    pub fn file(path: &str, bytes: &[u8]) -> Self {
        Self::raw(200, bytes.to_vec())
            .with_header("content-type", "application/octet-stream")
            .with_header("herd-file-path", path)
    }

    /// The same answer, held back for `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// `status` with the run API's error body.
    pub fn error(status: u16, reason: &str, message: &str) -> Self {
        Self::json(
            status,
            &serde_json::json!({"reason": reason, "message": message}),
        )
    }

    /// With one more header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// Answers a request; the count is how many requests to the same path came before it.
pub type Responder = Arc<dyn Fn(&Recorded, usize) -> Reply + Send + Sync>;

#[derive(Clone)]
struct Shared {
    responder: Responder,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

/// A running test server; stops when dropped.
pub struct TestRunApi {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The PEM bundle that verifies it (what `HERD_CA_FILE` holds).
    pub ca_pem: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestRunApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A CA of the operator's kind, valid for a day.
pub fn test_ca() -> CertificatePem {
    new_ca(validity()).unwrap()
}

fn validity() -> Validity {
    Validity::starting(jiff::Timestamp::now(), Duration::from_secs(86_400)).unwrap()
}

impl TestRunApi {
    /// Serves `responder` with a certificate for `127.0.0.1` from a new CA.
    pub async fn start(responder: Responder) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = test_ca();
        let leaf = new_leaf(&ca.key, &["127.0.0.1".to_owned()], validity()).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = tcp.local_addr().unwrap().port();
        let listener = TlsListener {
            tcp,
            acceptor: acceptor(&leaf),
        };
        let requests = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            responder,
            requests: requests.clone(),
        };
        let app = axum::Router::new().fallback(handle).with_state(shared);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TestRunApi {
            url: format!("https://127.0.0.1:{port}"),
            ca_pem: ca.cert,
            requests,
            task,
        }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The requests to paths ending in `suffix`.
    pub fn requests_to(&self, suffix: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.path.ends_with(suffix))
            .collect()
    }
}

/// Answers by route: `GET config` with `config`, progress 202, result 200; anything else 404.
pub fn serving(config: serde_json::Value) -> Responder {
    canned(Canned {
        config,
        ..Canned::default()
    })
}

/// What a Run's run API answers on every route, canned.
#[derive(Clone, Debug, Default)]
pub struct Canned {
    /// `GET config`.
    pub config: serde_json::Value,
    /// `GET children/{id}?wait=`: what successive polls of one child get (the last repeats).
    pub child_polls: Vec<Reply>,
    /// `GET children/{id}/files/{n}`, by `n` (past the end: 404).
    pub child_files: Vec<Reply>,
    /// `GET answers/{id}?wait=`: what successive polls of one question get (the last repeats).
    pub answer_polls: Vec<Reply>,
    /// `GET memory`.
    pub memory: serde_json::Value,
}

/// Answers as `canned` says, and as the operator's run API does where it says nothing:
/// progress 202; result, children, clarification, approval and memory writes 200; a
/// checkpoint 204; unknown routes 404.
pub fn canned(canned: Canned) -> Responder {
    Arc::new(move |request, earlier| {
        let route: Vec<&str> = request.path.split('/').skip(5).collect();
        let method = request.method.as_str();
        let nth = |replies: &[Reply]| -> Reply {
            match replies.get(earlier.min(replies.len().saturating_sub(1))) {
                Some(reply) => reply.clone(),
                None => Reply::error(404, "NotFound", "nothing canned here"),
            }
        };
        match (method, route.as_slice()) {
            ("GET", ["config"]) => Reply::json(200, &canned.config),
            ("POST", ["progress"]) => Reply::json(202, &serde_json::json!({})),
            ("POST", ["result"]) => {
                let stop = request.json()["stopReason"].clone();
                Reply::json(200, &serde_json::json!({"stopReason": stop}))
            }
            ("POST", ["children"]) => Reply::json(200, &serde_json::json!({})),
            ("GET", ["children", _]) => nth(&canned.child_polls),
            ("GET", ["children", _, "files", n]) => n
                .parse::<usize>()
                .ok()
                .and_then(|n| canned.child_files.get(n).cloned())
                .unwrap_or_else(|| Reply::error(404, "NotFound", "no such file")),
            ("POST", ["clarification"]) => Reply::json(200, &serde_json::json!({})),
            ("POST", ["approval"]) => Reply::json(200, &serde_json::json!({})),
            ("POST", ["checkpoint"]) => Reply::raw(204, Vec::new()),
            ("GET", ["answers", _]) => nth(&canned.answer_polls),
            ("GET", ["memory"]) => Reply::json(200, &canned.memory),
            ("POST", ["memory"]) => Reply::json(200, &serde_json::json!({})),
            _ => Reply::error(404, "NotFound", "no such route"),
        }
    })
}

fn acceptor(leaf: &CertificatePem) -> TlsAcceptor {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(leaf.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(leaf.key.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    TlsAcceptor::from(Arc::new(config))
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let request = Recorded {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        traceparent: headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: body.to_vec(),
    };
    let earlier = {
        let mut requests = shared.requests.lock().unwrap();
        let earlier = requests.iter().filter(|r| r.path == request.path).count();
        requests.push(request.clone());
        earlier
    };
    let reply = (shared.responder)(&request, earlier);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut response = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (name, value) in &reply.headers {
        response = response.header(name, value);
    }
    response.body(Body::from(reply.body)).unwrap()
}

/// Accepts TCP connections and completes their TLS handshakes; failed handshakes (a client
/// that does not trust the certificate) are dropped.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                continue;
            };
            let handshake = self.acceptor.accept(stream);
            if let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(5), handshake).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
