//! The run-API client and control plane against a real HTTPS server (`test_server`).

mod approvals;
mod children;
mod memory;
mod questions;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herd_crds::report::{StopReason, Usage};
use herd_crds::wire::{Answer, ProgressReport, ResultReport};
use herd_sandbox::testing::FakeExecutor;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::retry::Backoff;
use super::test_server::{Recorded, Reply, Responder, TestRunApi, serving, test_ca};
use super::*;

/// Short waits, so that retry tests take milliseconds.
const QUICK: Backoff = Backoff {
    first: Duration::from_millis(5),
    cap: Duration::from_millis(20),
};

pub(super) struct Setup {
    pub(super) server: TestRunApi,
    // Holds the token file.
    _dir: tempfile::TempDir,
    token: PathBuf,
}

impl Setup {
    pub(super) async fn new(responder: Responder) -> Self {
        let server = TestRunApi::start(responder).await;
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "token-one\n").unwrap();
        Setup {
            server,
            _dir: dir,
            token,
        }
    }

    fn target(&self) -> RunApiTarget {
        RunApiTarget {
            api_url: self.server.url.clone(),
            namespace: "team-a".into(),
            name: "market-map".into(),
        }
    }

    fn client_trusting(&self, ca_pem: &str) -> Result<RunApiClient, ControlError> {
        RunApiClient::new(&self.target(), ca_pem.as_bytes(), self.token.clone())
            .map(|client| client.with_backoff(QUICK))
    }

    fn client(&self) -> RunApiClient {
        self.client_trusting(&self.server.ca_pem).unwrap()
    }

    /// The control plane of attempt 1 with 30 s left.
    pub(super) fn control(&self, answers: Vec<Answer>) -> RunApiControlPlane {
        self.control_until(Deadline::at(soon()), answers)
    }

    pub(super) fn control_until(
        &self,
        deadline: Deadline,
        answers: Vec<Answer>,
    ) -> RunApiControlPlane {
        RunApiControlPlane::new(Arc::new(self.client()), 1, deadline, answers)
    }
}

pub(super) fn soon() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

pub(super) fn progress(seq: u64) -> ProgressReport {
    ProgressReport {
        attempt: 1,
        seq,
        title: Some(format!("step {seq}")),
        ..ProgressReport::default()
    }
}

fn result() -> ResultReport {
    ResultReport {
        attempt: 1,
        seq: 0,
        stop_reason: StopReason::Completed,
        text: "done".into(),
        title: None,
        todos: vec![],
        usage: Usage::default(),
        files: vec![],
        error: None,
    }
}

/// Answers `replies` in turn to every request, then 200.
fn in_turn(replies: Vec<Reply>) -> Responder {
    Arc::new(move |_, earlier| {
        replies
            .get(earlier)
            .cloned()
            .unwrap_or_else(|| Reply::json(200, &json!({"ok": true})))
    })
}

#[tokio::test]
async fn config_comes_over_verified_tls_with_the_token_on_the_runs_path() {
    let setup = Setup::new(serving(json!({"attempt": 3}))).await;
    let config: Value = setup.client().get("config", soon()).await.unwrap();
    assert_eq!(config, json!({"attempt": 3}));
    let requests = setup.server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].path, "/v1/runs/team-a/market-map/config");
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some("Bearer token-one")
    );
}

#[tokio::test]
async fn a_server_the_ca_bundle_does_not_vouch_for_is_refused_at_once() {
    let setup = Setup::new(serving(json!({}))).await;
    let other_ca = test_ca().cert;
    let error = setup
        .client_trusting(&other_ca)
        .unwrap()
        .get::<Value>("config", soon())
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, ControlError::Unavailable(_)), "{text}");
    assert!(text.contains("is not trusted by HERD_CA_FILE"), "{text}");
    assert!(text.contains("invalid peer certificate"), "{text}");
    assert!(
        setup.server.requests().is_empty(),
        "no request, so no token, reached a server that is not trusted"
    );
    // The right bundle works with the same server.
    assert!(setup.client().get::<Value>("config", soon()).await.is_ok());
}

#[tokio::test]
async fn requests_carry_the_current_trace_and_none_outside_one() {
    use opentelemetry::context::FutureExt as _;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let setup = Setup::new(serving(json!({}))).await;
    let client = setup.client();
    client.post("progress", &progress(1), soon()).await.unwrap();
    let traced = crate::telemetry::propagation::context_from(Some(PARENT), None);
    client
        .post("progress", &progress(2), soon())
        .with_context(traced)
        .await
        .unwrap();
    let seen: Vec<Option<String>> = setup
        .server
        .requests()
        .into_iter()
        .map(|r| r.traceparent)
        .collect();
    assert_eq!(seen, [None, Some(PARENT.to_owned())]);
}

#[tokio::test]
async fn the_token_is_read_again_for_every_request() {
    let setup = Setup::new(serving(json!({}))).await;
    let client = setup.client();
    client.post("progress", &progress(1), soon()).await.unwrap();
    std::fs::write(&setup.token, "token-two").unwrap();
    client.post("progress", &progress(2), soon()).await.unwrap();
    let seen: Vec<Option<String>> = setup
        .server
        .requests()
        .into_iter()
        .map(|r| r.authorization)
        .collect();
    assert_eq!(
        seen,
        [
            Some("Bearer token-one".to_owned()),
            Some("Bearer token-two".to_owned())
        ]
    );

    std::fs::remove_file(&setup.token).unwrap();
    let error = client
        .post("progress", &progress(3), soon())
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("cannot read the run API token"),
        "{error}"
    );
    assert_eq!(setup.server.requests().len(), 2, "nothing sent without one");
}

#[tokio::test]
async fn rate_limits_and_gateway_errors_are_retried_until_an_answer() {
    let setup = Setup::new(in_turn(vec![
        Reply::error(429, "RateLimited", "20 requests/s").with_header("retry-after", "0"),
        Reply::error(502, "Unavailable", "bad gateway"),
        Reply::error(503, "Unavailable", "starting"),
        Reply::error(504, "Unavailable", "gateway timeout"),
    ]))
    .await;
    setup
        .client()
        .post("result", &result(), soon())
        .await
        .unwrap();
    let requests = setup.server.requests_to("/result");
    assert_eq!(requests.len(), 5);
    assert!(
        requests.iter().all(|r| r.json()["text"] == "done"),
        "the same body every time"
    );
}

#[tokio::test]
async fn other_refusals_are_not_retried_and_say_what_the_server_said() {
    let cases = [
        (
            Reply::error(400, "BadRequest", "missing field `attempt`"),
            "POST /v1/runs/team-a/market-map/result: 400 Bad Request: BadRequest: missing field `attempt`",
        ),
        (
            Reply::error(403, "Forbidden", "another Run's resources"),
            "403 Forbidden: Forbidden: another Run's resources",
        ),
        (
            Reply::error(404, "NotFound", "run team-a/market-map is gone"),
            "404 Not Found: NotFound: run team-a/market-map is gone",
        ),
        (
            Reply::error(413, "TooLarge", "over 2 MiB"),
            "413 Payload Too Large: TooLarge: over 2 MiB",
        ),
        (
            Reply::raw(
                500,
                format!("<html>{}</html>", "x".repeat(1000)).into_bytes(),
            ),
            "500 Internal Server Error: <html>xxx",
        ),
        (Reply::raw(401, vec![]), "401 Unauthorized: no message"),
    ];
    for (reply, expected) in cases {
        let setup = Setup::new(in_turn(vec![reply.clone()])).await;
        let error = setup
            .client()
            .post("result", &result(), soon())
            .await
            .unwrap_err();
        let text = error.to_string();
        assert!(text.contains(expected), "{text}");
        assert!(text.chars().count() < 600, "quoted, not copied: {text}");
        assert_eq!(
            setup.server.requests().len(),
            1,
            "{} is not retried",
            reply.status
        );
        let refused = if reply.status == 500 {
            matches!(error, ControlError::Unavailable(_))
        } else {
            matches!(error, ControlError::Refused(_))
        };
        assert!(refused, "{error:?}");
    }
}

#[tokio::test]
async fn retries_end_at_the_deadline() {
    let setup = Setup::new(Arc::new(|_: &Recorded, _| {
        Reply::error(503, "Unavailable", "no leader")
    }))
    .await;
    let until = Instant::now() + Duration::from_millis(300);
    let error = setup
        .client()
        .post("result", &result(), until)
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, ControlError::Unavailable(_)), "{text}");
    assert!(
        text.contains("gave up at the run's deadline after"),
        "{text}"
    );
    assert!(
        text.contains("503 Service Unavailable: Unavailable: no leader"),
        "{text}"
    );
    assert!(setup.server.requests().len() > 2);
}

#[tokio::test]
async fn a_run_api_that_is_down_is_retried_and_a_bad_setup_is_refused() {
    let setup = Setup::new(serving(json!({}))).await;
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let down = RunApiTarget {
        api_url: format!("https://127.0.0.1:{port}"),
        ..setup.target()
    };
    let client = RunApiClient::new(&down, setup.server.ca_pem.as_bytes(), setup.token.clone())
        .unwrap()
        .with_backoff(QUICK);
    let until = Instant::now() + Duration::from_millis(200);
    let error = client.get::<Value>("config", until).await.unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("gave up at the run's deadline after"),
        "{text}"
    );
    assert!(text.contains("cannot reach the run API"), "{text}");

    let plain = RunApiTarget {
        api_url: "http://herd-operator.herd-system.svc:8443".into(),
        ..setup.target()
    };
    let refused = RunApiClient::new(&plain, setup.server.ca_pem.as_bytes(), setup.token.clone());
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("is not https: the token is never sent in the clear")
    );
    let not_pem = setup.client_trusting("not a certificate").unwrap_err();
    assert!(
        not_pem.to_string().contains("holds no certificate"),
        "{not_pem}"
    );
}

#[tokio::test]
async fn a_409_is_a_stale_attempt_and_stops_the_run() {
    let setup = Setup::new(in_turn(vec![Reply::error(
        409,
        "StaleAttempt",
        "attempt 1 is older than attempt 2",
    )]))
    .await;
    let control = setup.control(vec![]);
    let error = control.post_result(result()).await.unwrap_err();
    assert!(matches!(error, ControlError::StaleAttempt(_)), "{error:?}");
    let said = tokio::time::timeout(Duration::from_secs(5), control.superseded())
        .await
        .unwrap();
    assert!(said.contains("attempt 1 is older than attempt 2"), "{said}");
    assert_eq!(setup.server.requests().len(), 1, "not retried");
}

#[tokio::test]
async fn a_409_to_a_progress_report_stops_the_run_too() {
    let setup = Setup::new(Arc::new(|_: &Recorded, _| {
        Reply::error(409, "StaleAttempt", "attempt 2 is current")
    }))
    .await;
    let control = setup.control(vec![]);
    control.report_progress(progress(5)).await.unwrap();
    let said = tokio::time::timeout(Duration::from_secs(5), control.superseded())
        .await
        .unwrap();
    assert!(said.contains("attempt 2 is current"), "{said}");
}

#[tokio::test]
async fn progress_goes_out_without_waiting_and_the_result_comes_after_it() {
    let setup = Setup::new(serving(json!({}))).await;
    let control = setup.control(vec![]);
    let seq = 1_700_000_000_000;
    control.report_progress(progress(seq)).await.unwrap();
    let sent = async {
        while setup.server.requests_to("/progress").is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), sent)
        .await
        .unwrap();
    control.post_result(result()).await.unwrap();
    let progress = setup.server.requests_to("/progress");
    assert_eq!(progress[0].json()["title"], format!("step {seq}"));
    let results = setup.server.requests_to("/result");
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0].json()["seq"],
        seq + 1,
        "after every progress seq"
    );
    assert_eq!(results[0].json()["stopReason"], "completed");
}

#[tokio::test]
async fn a_stopping_pod_sends_the_progress_the_api_lacks_once_and_nothing_after() {
    // The first progress report is refused with a 500 (not retried): the API lacks it.
    let setup = Setup::new(Arc::new(|request: &Recorded, earlier| {
        if request.path.ends_with("/progress") && earlier == 0 {
            Reply::error(500, "Internal", "try later")
        } else {
            Reply::json(202, &json!({}))
        }
    }))
    .await;
    let control = setup.control(vec![]);
    control.report_progress(progress(7)).await.unwrap();
    let refused = async {
        while setup.server.requests_to("/progress").is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), refused)
        .await
        .unwrap();
    control.flush_progress(Duration::from_secs(5)).await;
    let sent = setup.server.requests_to("/progress");
    assert_eq!(sent.len(), 2, "sent again by the flush");
    assert_eq!(sent[1].json()["seq"], 7);

    control.flush_progress(Duration::from_secs(5)).await;
    control.report_progress(progress(8)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        setup.server.requests_to("/progress").len(),
        2,
        "what the API has is not sent again, and nothing goes out after the flush"
    );

    let quiet = Setup::new(serving(json!({}))).await;
    let idle = quiet.control(vec![]);
    idle.flush_progress(Duration::from_secs(5)).await;
    assert!(
        quiet.server.requests().is_empty(),
        "no progress, nothing to send"
    );
}

#[tokio::test]
async fn progress_carries_the_sandboxs_layers_once_it_is_reached() {
    let setup = Setup::new(serving(json!({}))).await;
    let control = setup.control(vec![]);
    // A sandbox that tells its layers and runs nothing.
    let layered =
        FakeExecutor::down("not here").with_layers(vec![herd_crds::report::SandboxLayer::new(
            "landlock", true, "ABI 6",
        )]);
    control.use_sandbox(Arc::new(layered));
    control.report_progress(progress(3)).await.unwrap();
    control.flush_progress(Duration::from_secs(5)).await;
    let sent = setup.server.requests_to("/progress");
    let body = sent.last().map(Recorded::json).unwrap_or_default();
    assert_eq!(body["seq"], 3);
    assert_eq!(
        body["sandbox"],
        json!({"layers": [{"name": "landlock", "active": true, "detail": "ABI 6"}]})
    );
}
