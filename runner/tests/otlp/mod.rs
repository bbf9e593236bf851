//! A real OTLP/HTTP trace receiver for tests: it decodes every `POST /v1/traces` body as the
//! official protobuf `ExportTraceServiceRequest` and appends each span, flattened, to a JSON
//! lines file that the test reads back. Shared by the runner's tests and the e2e suite.

// A test's receiver: a failure to bind or decode must fail the test loudly.
#![allow(clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message as _;
use serde::{Deserialize, Serialize};

/// One received span: ids in hex, attributes as JSON values, events by name.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ReceivedSpan {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    pub attributes: BTreeMap<String, serde_json::Value>,
    pub events: Vec<String>,
}

impl ReceivedSpan {
    /// The attribute `key`, as a string when it is one.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).and_then(serde_json::Value::as_str)
    }

    /// The attribute `key`, as an integer when it is one.
    pub fn int(&self, key: &str) -> Option<i64> {
        self.attributes.get(key).and_then(serde_json::Value::as_i64)
    }
}

/// The receiver, listening until the test ends.
pub struct Receiver {
    pub address: SocketAddr,
    file: PathBuf,
}

impl Receiver {
    /// Starts a receiver on `bind` (port 0: any) writing to `file`.
    pub async fn start(bind: SocketAddr, file: &Path) -> Receiver {
        let listener = tokio::net::TcpListener::bind(bind)
            .await
            .expect("the receiver binds");
        let address = listener.local_addr().expect("a bound address");
        let app = Router::new()
            .route("/v1/traces", post(export))
            .with_state(file.to_path_buf());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver {
            address,
            file: file.to_path_buf(),
        }
    }

    /// `http://<address>`, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every span received so far, read back from the file.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        std::fs::read_to_string(&self.file)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a span line"))
            .collect()
    }
}

async fn export(State(file): State<PathBuf>, body: Bytes) -> (StatusCode, Vec<u8>) {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    let mut lines = String::new();
    for resource in request.resource_spans {
        for scope in resource.scope_spans {
            for span in scope.spans {
                let received = ReceivedSpan {
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    name: span.name,
                    attributes: span
                        .attributes
                        .into_iter()
                        .map(|kv| (kv.key, json_of(kv.value)))
                        .collect(),
                    events: span.events.into_iter().map(|event| event.name).collect(),
                };
                lines.push_str(&serde_json::to_string(&received).expect("a span serializes"));
                lines.push('\n');
            }
        }
    }
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .and_then(|mut out| out.write_all(lines.as_bytes()));
    if written.is_err() {
        return (StatusCode::INTERNAL_SERVER_ERROR, Vec::new());
    }
    let response = ExportTraceServiceResponse::default().encode_to_vec();
    (StatusCode::OK, response)
}

fn json_of(value: Option<AnyValue>) -> serde_json::Value {
    match value.and_then(|value| value.value) {
        Some(any_value::Value::StringValue(text)) => text.into(),
        Some(any_value::Value::IntValue(number)) => number.into(),
        Some(any_value::Value::DoubleValue(number)) => number.into(),
        Some(any_value::Value::BoolValue(flag)) => flag.into(),
        Some(any_value::Value::ArrayValue(array)) => array
            .values
            .into_iter()
            .map(|value| json_of(Some(value)))
            .collect(),
        Some(other) => format!("{other:?}").into(),
        None => serde_json::Value::Null,
    }
}
