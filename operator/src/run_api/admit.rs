//! Admitting one request, in order: its declared length, its token (TokenReview, cached), the
//! runner's namespace, its Pod and the Run in the path (from the caches, else read live before
//! a refusal), the attempt, then the Run's request rate.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use herd_crds::run::Run;
use herd_crds::wire::{
    ApprovalAsk, CheckpointReport, ChildRequest, ClarificationRequest, MAX_BODY, MAX_LARGE_BODY,
    MemoryUpdate, ProgressBody, ResultReport,
};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde::de::DeserializeOwned;

use super::RunApi;
use super::authenticate::authenticate;
use super::authorize::{RunPath, authorize, same_namespace};
use super::body::{check_declared_length, parse, read_limited};
use super::failure::Failure;
use super::rate_limit::retry_after_seconds;
use crate::controller::run_context::RunCaches;
use crate::controller::run_objects::controller_uid;

/// A request let through: the Run it acts on and the attempt its Pod serves.
pub struct Admitted {
    /// The Run in the path.
    pub path: RunPath,
    /// That Run (from the cache: without its task or result).
    pub run: Arc<Run>,
    /// The Run's UID.
    pub uid: String,
    /// The attempt the calling Pod serves.
    pub attempt: u32,
    /// The caches of the Run's namespace.
    pub caches: RunCaches,
}

impl RunApi {
    /// Admits a request on `path` whose body may be `limit` bytes.
    pub async fn admit(
        &self,
        path: RunPath,
        headers: &HeaderMap,
        limit: usize,
    ) -> Result<Admitted, Failure> {
        check_declared_length(headers, limit)?;
        let runner = authenticate(&self.client, &self.reviews, headers).await?;
        same_namespace(&runner, &path)?;
        let caches = self.caches_of(&path.namespace).ok_or_else(|| {
            Failure::not_found(format!(
                "namespace {} is not watched by this operator",
                path.namespace
            ))
        })?;
        let pod = self
            .pod(&caches, &path.namespace, &runner.pod_name, &runner.pod_uid)
            .await?;
        let owner = pod.as_ref().and_then(|p| controller_uid(p.as_ref()));
        let run = self.run(&caches, &path, owner).await?;
        let uid = run.uid().unwrap_or_default();
        let attempt = authorize(
            &path,
            &runner,
            pod.as_deref(),
            &run,
            self.attempts.highest(&uid),
        )?;
        self.attempts.saw(&uid, attempt);
        self.limiter
            .take(&uid)
            .map_err(|wait| Failure::rate_limited(retry_after_seconds(wait)))?;
        Ok(Admitted {
            path,
            run,
            uid,
            attempt,
            caches,
        })
    }

    fn caches_of(&self, namespace: &str) -> Option<RunCaches> {
        self.scopes
            .iter()
            .find(|(scope, _)| scope.contains(namespace))
            .map(|(_, caches)| caches.clone())
    }

    /// The token's Pod: cached with the token's UID, else read live.
    async fn pod(
        &self,
        caches: &RunCaches,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<Option<Arc<Pod>>, Failure> {
        let cached = caches.pods.get(&ObjectRef::new(name).within(namespace));
        if let Some(pod) = cached.filter(|p| p.uid().as_deref() == Some(uid)) {
            return Ok(Some(pod));
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let live = api
            .get_metadata_opt(name)
            .await
            .map_err(|e| Failure::kube("reading the token's Pod", &e))?;
        Ok(live.map(|meta| {
            Arc::new(Pod {
                metadata: meta.metadata,
                ..Pod::default()
            })
        }))
    }

    /// The Run in the path: cached when it is the Pod's owner, else read live.
    async fn run(
        &self,
        caches: &RunCaches,
        path: &RunPath,
        owner: Option<&str>,
    ) -> Result<Arc<Run>, Failure> {
        let cached = caches
            .runs
            .get(&ObjectRef::new(&path.name).within(&path.namespace));
        if let Some(run) = cached.filter(|r| owner.is_some() && r.uid().as_deref() == owner) {
            return Ok(run);
        }
        let api: Api<Run> = Api::namespaced(self.client.clone(), &path.namespace);
        api.get_opt(&path.name)
            .await
            .map_err(|e| Failure::kube("reading the Run", &e))?
            .map(Arc::new)
            .ok_or_else(|| Failure::not_found(format!("Run {path} is gone")))
    }
}

/// Refuses what the live Run shows: another Run of the same name, or a later attempt.
pub fn check_live(live: &Run, admitted: &Admitted) -> Result<(), Failure> {
    if live.uid().as_deref() != Some(admitted.uid.as_str()) {
        return Err(Failure::not_found(format!(
            "Run {} is gone (recreated under its name)",
            admitted.path
        )));
    }
    let current = live.status.as_ref().and_then(|s| s.attempt).unwrap_or(0);
    if current > admitted.attempt {
        return Err(Failure::stale_attempt(admitted.attempt, current));
    }
    Ok(())
}

/// A runner's body that names the attempt it is of.
pub trait OfAttempt {
    /// The most bytes a body of this kind may have.
    const MAX_BODY: usize;
    /// The attempt the body says it is of.
    fn attempt(&self) -> u32;
}

impl OfAttempt for ProgressBody {
    const MAX_BODY: usize = MAX_BODY;
    fn attempt(&self) -> u32 {
        self.report.attempt
    }
}

/// Implements [`OfAttempt`] for bodies that carry their attempt in an `attempt` field, each
/// with its size limit.
macro_rules! of_attempt {
    ($($body:ty: $limit:expr),+ $(,)?) => {$(
        impl OfAttempt for $body {
            const MAX_BODY: usize = $limit;
            fn attempt(&self) -> u32 {
                self.attempt
            }
        }
    )+};
}

of_attempt!(
    ResultReport: MAX_LARGE_BODY,
    ChildRequest: MAX_BODY,
    ClarificationRequest: MAX_LARGE_BODY,
    ApprovalAsk: MAX_LARGE_BODY,
    MemoryUpdate: MAX_BODY,
    CheckpointReport: MAX_LARGE_BODY,
);

/// A runner's POST to `/v1/runs/{namespace}/{name}/…`, admitted, with its body read (at most
/// `T::MAX_BODY` bytes) and of the attempt the Pod serves.
pub struct Posted<T>(
    /// The request let through.
    pub Admitted,
    /// Its body.
    pub T,
);

impl<T: DeserializeOwned + OfAttempt> FromRequest<Arc<RunApi>> for Posted<T> {
    type Rejection = Response;

    async fn from_request(request: Request, api: &Arc<RunApi>) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let Path(path) = Path::<(String, String)>::from_request_parts(&mut parts, api)
            .await
            .map_err(IntoResponse::into_response)?;
        let (admitted, body) = api
            .admit_with_body(path, &parts.headers, body, T::MAX_BODY)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self(admitted, body))
    }
}

impl RunApi {
    /// Admits a request with a body of at most `limit` bytes, then reads the body, which must
    /// be of the attempt the Pod serves.
    async fn admit_with_body<T: DeserializeOwned + OfAttempt>(
        &self,
        path: (String, String),
        headers: &HeaderMap,
        body: Body,
        limit: usize,
    ) -> Result<(Admitted, T), Failure> {
        let admitted = self.admit(RunPath::from(path), headers, limit).await?;
        let parsed: T = parse(&read_limited(body, limit).await?)?;
        let attempt = parsed.attempt();
        if attempt != admitted.attempt {
            return Err(Failure::bad_request(format!(
                "the body is of attempt {attempt}, but this Pod serves attempt {}",
                admitted.attempt
            )));
        }
        Ok((admitted, parsed))
    }
}
