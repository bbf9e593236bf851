//! What the run API refuses, each with its `ApiError`: no token or one of another audience
//! (401), another Run's path (403), a Pod of an older attempt (409), bodies over their limit
//! (413, declared or not), a body that does not parse or is of another attempt (400), more than
//! 20 requests a second (429 with `Retry-After`), an unknown route (404); and the API server
//! itself refuses a runner's token, whose audience is not its own.

use std::time::Instant;

use anyhow::{Context, ensure};
use futures::future::join_all;
use herd_crds::wire::{MAX_BODY, MAX_LARGE_BODY, ProgressReport, RunConfig};
use herd_e2e::TestEnv;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::support::{AUDIENCE, Fixture, send, send_within, stalled};
use crate::operator::run_fixtures::{create_run, run_until};

pub async fn requests_are_refused_as_they_should_be(env: TestEnv) -> anyhow::Result<()> {
    let mut fixture = Fixture::start(env.clone(), json!({"retries": 1})).await?;
    let one = fixture.run_pod("one").await?;
    create_run(&fixture.admin, &fixture.namespace, "two").await?;
    let two = fixture.pod("two-1").await?;
    let token = fixture.token(&one, Some(AUDIENCE)).await?;
    let https = fixture.https().clone();
    let config = fixture.url("one", "config");

    // 401: no token; a token of the API server's own audience.
    let message = send(https.get(&config))
        .await?
        .refused(401, "Unauthorized")?;
    ensure!(message == "no Authorization header", "{message}");
    let default_audience = fixture.token(&one, None).await?;
    let message = send(https.get(&config).bearer_auth(&default_audience))
        .await?
        .refused(401, "Unauthorized")?;
    ensure!(
        message.starts_with("the token was not accepted"),
        "{message}"
    );
    ensure!(!message.contains(&default_audience), "never the token");
    let message = send(https.get(&config).bearer_auth("not-a-token"))
        .await?
        .refused(401, "Unauthorized")?;
    ensure!(
        message.starts_with("the token was not accepted"),
        "{message}"
    );
    let message = send(https.get(&config).basic_auth("herd-runner", Some("secret")))
        .await?
        .refused(401, "Unauthorized")?;
    ensure!(
        message == "the Authorization header is not a bearer token",
        "{message}"
    );

    // The API server refuses the runner's token: it is for herd.dev, not for it.
    let runner_as_client = env.cluster().client_with_token(&token).await?;
    let pods: Api<Pod> = Api::namespaced(runner_as_client, &fixture.namespace);
    match pods.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) if status.code == 401 => {}
        other => anyhow::bail!("kube-apiserver accepted a herd.dev token: {other:?}"),
    }

    // 403: one's Pod on two's path.
    let message = send(https.get(fixture.url("two", "config")).bearer_auth(&token))
        .await?
        .refused(403, "Forbidden")?;
    ensure!(message.contains("is not Run"), "{message}");

    // 413: a declared length over the route's limit, answered from the headers alone (the
    // body never comes) and before the token is looked at; a chunked body once it passes the
    // limit (the rest never comes either). Bodies that stop short of their end keep the client
    // from writing into a connection the server has closed.
    for (route, limit) in [("progress", MAX_BODY), ("result", MAX_LARGE_BODY)] {
        let message = send_within(
            https
                .post(fixture.url("one", route))
                .header("content-type", "application/json")
                .header("content-length", (limit + 1).to_string())
                .body(stalled(Vec::new())),
        )
        .await?
        .refused(413, "TooLarge")?;
        ensure!(
            message == format!("the body is over this route's limit of {limit} bytes"),
            "{message}"
        );
    }
    send_within(
        https
            .post(fixture.url("one", "progress"))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(stalled(vec![b' '; MAX_BODY + 1])),
    )
    .await?
    .refused(413, "TooLarge")?;
    for (route, body, type_name) in [
        ("progress", &br#"{"attempt": "one"}"#[..], "ProgressBody"),
        (
            "progress",
            &br#"{"attempt": 1, "seq": "#[..],
            "ProgressBody",
        ),
        ("progress", &b"\xff\xfe not JSON"[..], "ProgressBody"),
        ("result", &b""[..], "ResultReport"),
        (
            "result",
            &br#"{"attempt": 1, "seq": 1, "stopReason": "nope"}"#[..],
            "ResultReport",
        ),
        ("result", &br#"[1, 2, 3]"#[..], "ResultReport"),
    ] {
        let message = send(
            https
                .post(fixture.url("one", route))
                .bearer_auth(&token)
                .header("content-type", "application/json")
                .body(body.to_vec()),
        )
        .await?
        .refused(400, "BadRequest")?;
        ensure!(
            message.starts_with(&format!("the body is not a valid {type_name}: ")),
            "{message}"
        );
    }
    // A file that is not base64 or not a deliverable is refused by name, before any write.
    let bad_file = json!({"attempt": 1, "seq": 1, "stopReason": "completed", "text": "",
        "files": [{"path": "/mnt/user-data/outputs/a.md", "dataBase64": "not base64!"}]});
    let message = fixture
        .post("one", "result", &token, &bad_file)
        .await?
        .refused(400, "BadRequest")?;
    ensure!(
        message.starts_with("/mnt/user-data/outputs/a.md: dataBase64 is not base64"),
        "{message}"
    );
    let wrong_attempt = ProgressReport {
        attempt: 2,
        seq: 1,
        ..ProgressReport::default()
    };
    let message = fixture
        .post("one", "progress", &token, &wrong_attempt)
        .await?
        .refused(400, "BadRequest")?;
    ensure!(
        message == "the body is of attempt 2, but this Pod serves attempt 1",
        "{message}"
    );
    send(
        https
            .get(fixture.url("one", "children"))
            .bearer_auth(&token),
    )
    .await?
    .refused(404, "NotFound")?;

    // 429: two's runner sends 60 reports at once; its bucket holds 20 and refills 20 a
    // second. One request first, so the burst meets a reviewed token.
    let two_token = fixture.token(&two, Some(AUDIENCE)).await?;
    let started = Instant::now();
    send(
        https
            .get(fixture.url("two", "config"))
            .bearer_auth(&two_token),
    )
    .await?
    .expect::<RunConfig>(200)?;
    let burst = (1..=60).map(|seq| {
        let report = ProgressReport {
            attempt: 1,
            seq,
            ..ProgressReport::default()
        };
        send(
            https
                .post(fixture.url("two", "progress"))
                .bearer_auth(&two_token)
                .json(&report),
        )
    });
    let answers = join_all(burst).await;
    let mut limited: u32 = 0;
    for answer in answers {
        let answer = answer?;
        match answer.status {
            202 => {}
            429 => {
                answer.refused(429, "RateLimited")?;
                let wait: u64 = answer
                    .retry_after
                    .as_deref()
                    .context("Retry-After")?
                    .parse()?;
                ensure!(wait >= 1, "Retry-After {wait}");
                limited += 1;
            }
            other => anyhow::bail!("unexpected {other}: {}", answer.body),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let served = 61 - limited;
    // What the bucket allows in the time taken: its 20, plus 20 a second, plus one refilled
    // while the last request was on its way.
    let allowed = 21.0 + 20.0 * elapsed;
    ensure!(
        limited > 0 && served >= 20 && f64::from(served) <= allowed,
        "{served} of 61 served in {elapsed:.2} s"
    );
    // One's bucket is its own.
    send(https.get(&config).bearer_auth(&token))
        .await?
        .expect::<RunConfig>(200)?;

    // 409: one's first Pod is evicted and the Run retries; its token is of an older attempt.
    let pods: Api<Pod> = Api::namespaced(fixture.admin.clone(), &fixture.namespace);
    let evict = json!({"status": {"phase": "Failed", "reason": "Evicted",
        "message": "The node was low on resource: memory."}});
    pods.patch_status("one-1", &PatchParams::default(), &Patch::Merge(&evict))
        .await?;
    run_until(&fixture.runs(), "one", "attempt 2", |r| {
        r.status.as_ref().and_then(|s| s.attempt) == Some(2)
    })
    .await?;
    let message = send(https.get(&config).bearer_auth(&token))
        .await?
        .refused(409, "StaleAttempt")?;
    ensure!(
        message == "this Pod serves attempt 1, but the Run is at attempt 2",
        "{message}"
    );
    let second = fixture.pod("one-2").await?;
    let second_token = fixture.token(&second, Some(AUDIENCE)).await?;
    let config: RunConfig = send(
        https
            .get(fixture.url("one", "config"))
            .bearer_auth(&second_token),
    )
    .await?
    .expect(200)?;
    ensure!(config.attempt == 2, "{config:?}");
    fixture.running.shutdown().await?;
    Ok(())
}
