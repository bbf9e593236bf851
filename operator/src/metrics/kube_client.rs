//! The Kubernetes client's requests, counted and timed by a tower layer: kube's `Client` is a
//! tower service stack, and [`instrument`] puts [`KubeRequestLayer`] in front of the client the
//! operator was started with (the binary's, or a test's), so every call of every controller,
//! watcher and the run API is measured without touching them.
//!
//! Labels come from the request line only: the verb and the resource of the path, never an
//! object's name or namespace, so the series stay as few as the kinds the operator uses.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::http::{Method, Request, Response, Uri};
use kube::Client;
use kube::client::Body;
use prometheus_client::encoding::EncodeLabelSet;
use tower::{Layer, Service, ServiceBuilder};

use super::Metrics;

/// The label set of `herd_kube_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KubeRequestLabels {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection` or
    /// `other`.
    pub verb: &'static str,
    /// `<plural>[.<group>][/<subresource>]`, e.g. `pods`, `runs.herd.dev/status`; `other` for
    /// discovery and the like.
    pub resource: String,
    /// The HTTP status code, or `error` when no answer came (connection, TLS, timeout).
    pub code: String,
}

/// The label set of `herd_kube_request_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KubeTimingLabels {
    /// As in [`KubeRequestLabels`].
    pub verb: &'static str,
    /// As in [`KubeRequestLabels`].
    pub resource: String,
}

/// The verb and resource a request to the API server is about.
pub fn classify(method: &Method, uri: &Uri) -> (&'static str, String) {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return (verb(method, uri, false), "other".to_owned()),
    };
    // What follows the version: [namespaces/<ns>/]<resource>[/<name>[/<subresource>]], where
    // `namespaces/<name>[/status|/finalize]` is a Namespace itself.
    let rest = match rest {
        ["namespaces", _, tail @ ..]
            if !tail.is_empty() && !matches!(tail, ["status" | "finalize"]) =>
        {
            tail
        }
        other => other,
    };
    let Some((resource, after)) = rest.split_first() else {
        return (verb(method, uri, false), "other".to_owned());
    };
    let mut label = if group.is_empty() {
        (*resource).to_owned()
    } else {
        format!("{resource}.{group}")
    };
    if let [_name, subresource, ..] = after {
        label.push('/');
        label.push_str(subresource);
    }
    (verb(method, uri, !after.is_empty()), label)
}

fn verb(method: &Method, uri: &Uri, named: bool) -> &'static str {
    let watching = uri.query().is_some_and(|q| {
        q.split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    });
    match *method {
        Method::GET if watching => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    }
}

/// Measures every request of the service it wraps into [`Metrics`].
#[derive(Clone, Debug)]
pub struct KubeRequestLayer {
    metrics: Arc<Metrics>,
}

impl KubeRequestLayer {
    /// Records into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        KubeRequestLayer { metrics }
    }
}

impl<S> Layer<S> for KubeRequestLayer {
    type Service = KubeRequestMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        KubeRequestMetrics {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service [`KubeRequestLayer`] makes.
#[derive(Clone, Debug)]
pub struct KubeRequestMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, R> Service<Request<B>> for KubeRequestMetrics<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    S::Error: 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Boxed<Response<R>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (verb, resource) = classify(request.method(), request.uri());
        let metrics = self.metrics.clone();
        let start = Instant::now();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let result = answer.await;
            let code = match &result {
                Ok(response) => response.status().as_str().to_owned(),
                Err(_) => "error".to_owned(),
            };
            metrics.kube_request(verb, resource, code, start.elapsed());
            result
        })
    }
}

/// `client` as a tower service, so that layers can go in front of it.
#[derive(Clone)]
struct Sender(Client);

impl Service<Request<Body>> for Sender {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = Boxed<Response<Body>, kube::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let client = self.0.clone();
        Box::pin(async move { client.send(request).await })
    }
}

/// `client`, with every request measured into `metrics`. The operator is handed a client
/// already built (by `herd-operator` from its kubeconfig or ServiceAccount, by tests with their
/// own credentials), so the layer goes in front of it rather than into its builder; errors pass
/// through unchanged (kube recovers its own error type from the boxed one).
pub fn instrument(client: Client, metrics: Arc<Metrics>) -> Client {
    let namespace = client.default_namespace().to_owned();
    let valid_until = *client.valid_until();
    let service = ServiceBuilder::new()
        .layer(KubeRequestLayer::new(metrics))
        .service(Sender(client));
    Client::new(service, namespace).with_valid_until(valid_until)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(method: Method, uri: &str) -> (&'static str, String) {
        classify(&method, &uri.parse().unwrap())
    }

    #[test]
    fn verbs_and_resources_of_the_operators_requests() {
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/a/pods?labelSelector=x",
                ("list", "pods"),
            ),
            (
                Method::GET,
                "/api/v1/pods?watch=true&resourceVersion=1",
                ("watch", "pods"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/configmaps/b",
                ("get", "configmaps"),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/a/pods",
                ("create", "pods"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/a/pods/p-1",
                ("delete", "pods"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/a/pods",
                ("deletecollection", "pods"),
            ),
            (
                Method::PATCH,
                "/apis/herd.dev/v1alpha1/namespaces/a/runs/r/status?fieldManager=herd",
                ("patch", "runs.herd.dev/status"),
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/a/leases/herd",
                ("update", "leases.coordination.k8s.io"),
            ),
            (
                Method::POST,
                "/apis/authentication.k8s.io/v1/tokenreviews",
                ("create", "tokenreviews.authentication.k8s.io"),
            ),
            (Method::GET, "/api/v1/namespaces/a", ("get", "namespaces")),
            (Method::GET, "/api/v1/namespaces", ("list", "namespaces")),
            (
                Method::PUT,
                "/api/v1/namespaces/a/finalize",
                ("update", "namespaces/finalize"),
            ),
            (Method::GET, "/version", ("list", "other")),
            (Method::GET, "/apis/herd.dev/v1alpha1", ("list", "other")),
        ];
        for (method, uri, (verb, resource)) in cases {
            assert_eq!(
                of(method.clone(), uri),
                (verb, resource.to_owned()),
                "{method} {uri}"
            );
        }
    }

    #[test]
    fn object_names_never_become_labels() {
        let (_, resource) = of(Method::GET, "/api/v1/namespaces/team/pods/secret-run-1/log");
        assert_eq!(resource, "pods/log");
    }

    #[tokio::test]
    async fn requests_through_an_instrumented_client_are_counted_and_timed() {
        let metrics = Arc::new(Metrics::default());
        let service = tower::service_fn(|request: Request<Body>| async move {
            let status = if request.uri().path().ends_with("/missing") {
                404
            } else {
                200
            };
            let response = Response::builder()
                .status(status)
                .body(Body::from(b"{}".to_vec()))
                .unwrap();
            Ok::<_, std::convert::Infallible>(response)
        });
        let client = instrument(Client::new(service, "default"), metrics.clone());
        for path in [
            "/api/v1/namespaces/a/pods/p",
            "/api/v1/namespaces/a/pods/missing",
        ] {
            let request = Request::get(path).body(Body::empty()).unwrap();
            client.send(request).await.unwrap();
        }
        let text = metrics.encode().unwrap();
        for line in [
            "herd_kube_requests_total{verb=\"get\",resource=\"pods\",code=\"200\"} 1",
            "herd_kube_requests_total{verb=\"get\",resource=\"pods\",code=\"404\"} 1",
            "herd_kube_request_duration_seconds_count{verb=\"get\",resource=\"pods\"} 2",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[tokio::test]
    async fn a_request_without_an_answer_is_an_error_and_stays_kubes_error() {
        let metrics = Arc::new(Metrics::default());
        let service = tower::service_fn(|_: Request<Body>| async move {
            Err::<Response<Body>, _>(kube::Error::LinesCodecMaxLineLengthExceeded)
        });
        let client = instrument(Client::new(service, "default"), metrics.clone());
        let request = Request::post("/api/v1/namespaces/a/pods")
            .body(Body::empty())
            .unwrap();
        let error = client.send(request).await.unwrap_err();
        assert!(
            matches!(error, kube::Error::LinesCodecMaxLineLengthExceeded),
            "{error:?}"
        );
        let text = metrics.encode().unwrap();
        let line = "herd_kube_requests_total{verb=\"create\",resource=\"pods\",code=\"error\"} 1";
        assert!(text.contains(line), "{line} in {text}");
    }
}
