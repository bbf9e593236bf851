//! Streaming one large event through the OpenAI-compatible client, from a local HTTP server:
//! `cargo bench -p herd-runner --bench sse`.
//!
//! Events of 2 and 8 MB are read whole; one of 16 MB is over the 8 MiB cap and is refused, so
//! its time is the time to reach the cap. Reading is linear in the event's size: 8 MB should
//! take about four times as long as 2 MB.
//!
//! Not part of CI: timings need a quiet machine and a release build.

// A benchmark that cannot set itself up should stop loudly.
#![allow(clippy::expect_used)]

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use herd_runner::model::openai::OpenAiModel;
use herd_runner::model::{
    ChatModel, HttpModelConfig, MAX_EVENT_BYTES, ModelErrorKind, ModelRequest, StreamDelta,
};
use herd_runner::thread::Message;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const MB: usize = 1_000_000;

/// A Chat Completions stream whose answer text arrives as one event of about `size` bytes.
fn stream(size: usize) -> String {
    let text = "x".repeat(size);
    format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n\
         data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n\
         data: [DONE]\n\n"
    )
}

fn large_events(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let mut group = c.benchmark_group("sse_one_event");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for size in [2 * MB, 8 * MB, 16 * MB] {
        let server = runtime.block_on(async {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .respond_with(
                    ResponseTemplate::new(200).set_body_raw(stream(size), "text/event-stream"),
                )
                .mount(&server)
                .await;
            server
        });
        let model = OpenAiModel::new(HttpModelConfig {
            model: "bench".into(),
            base_url: format!("{}/v1", server.uri()),
            api_key: None,
            request_timeout: Duration::from_secs(600),
            stream_chunk_timeout: Duration::from_secs(60),
        })
        .expect("an HTTP client");
        let request = ModelRequest {
            messages: vec![Message::user("u", "Say x many times.")],
            ..ModelRequest::default()
        };
        let call = || async {
            model
                .complete(&request, &|_: StreamDelta| {})
                .await
                .map(|answer| answer.content.len())
        };
        match runtime.block_on(call()) {
            Ok(length) => assert_eq!(length, size, "the whole answer is read"),
            Err(error) => {
                assert!(size > MAX_EVENT_BYTES, "{size} bytes refused: {error}");
                assert_eq!(error.kind, ModelErrorKind::InvalidResponse);
                assert!(error.message.contains("stream event larger than 8 MiB"));
            }
        }
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{}MB", size / MB)),
            &size,
            |b, _| b.iter(|| runtime.block_on(call())),
        );
    }
    group.finish();
}

criterion_group!(benches, large_events);
criterion_main!(benches);
