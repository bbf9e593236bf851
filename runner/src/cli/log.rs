//! Where the runner's log goes. A Run's pod and the sandbox log as a container does: tracing's
//! lines on stderr, filtered by `HERD_LOG` (default `warn`). `herd-runner run` shows a person
//! progress instead: its warnings become the display's own warning lines, each once, and raw
//! tracing is printed only when asked for (`HERD_LOG` set, or `--log-format json`).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::agent::{AgentEvent, Observer};

/// How raw tracing is printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Lines for a person; shown only with `HERD_LOG` set.
    #[default]
    Text,
    /// JSON lines on stderr, filtered by `HERD_LOG` (default `warn`).
    Json,
}

/// Where the warnings of `herd-runner run` go once its display exists.
pub type WarningSink = Arc<OnceLock<Arc<dyn Observer>>>;

/// Logging as a container logs: text lines on stderr, filtered by `HERD_LOG`.
pub fn init_container_logging(colour: bool) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Logging for `herd-runner run`: raw tracing in `format` when `HERD_LOG` is set or the format
/// is JSON; else warnings and errors go, once each, to the display `sink` will hold.
pub fn init_run_logging(format: LogFormat, colour: bool) -> WarningSink {
    let sink = WarningSink::default();
    let raw = format == LogFormat::Json || std::env::var_os("HERD_LOG").is_some();
    let registry = tracing_subscriber::registry();
    let _ = match (raw, format) {
        (true, LogFormat::Json) => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr)
                    .with_filter(filter()),
            )
            .try_init(),
        (true, LogFormat::Text) => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(colour)
                    .with_writer(std::io::stderr)
                    .with_filter(filter()),
            )
            .try_init(),
        (false, _) => registry
            .with(WarningsToDisplay::new(sink.clone()))
            .try_init(),
    };
    sink
}

fn filter() -> EnvFilter {
    EnvFilter::try_from_env("HERD_LOG").unwrap_or_else(|_| EnvFilter::new("warn"))
}

/// Turns the runner's tracing warnings and errors into the display's warnings, each text
/// once.
struct WarningsToDisplay {
    sink: WarningSink,
    shown: Mutex<HashSet<String>>,
}

impl WarningsToDisplay {
    fn new(sink: WarningSink) -> Self {
        WarningsToDisplay {
            sink,
            shown: Mutex::new(HashSet::new()),
        }
    }
}

impl<S: Subscriber> Layer<S> for WarningsToDisplay {
    fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
        // Levels order by verbosity: WARN and ERROR are the ones at or below WARN. Only the
        // runner's own (and its audit's): a library's internals are for HERD_LOG.
        let metadata = event.metadata();
        let ours = ["herd_runner", "herd"]
            .iter()
            .any(|root| metadata.target().split("::").next() == Some(root));
        if *metadata.level() > Level::WARN || !ours {
            return;
        }
        let Some(display) = self.sink.get() else {
            return;
        };
        let mut text = EventText::default();
        event.record(&mut text);
        let message = text.finish();
        let first = self
            .shown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(message.clone());
        if first {
            display.on_event(AgentEvent::Warning {
                agent: "herd".into(),
                message,
            });
        }
    }
}

/// An event's message, then its fields as `(name: value, ...)`.
#[derive(Default)]
struct EventText {
    message: String,
    fields: String,
}

impl EventText {
    fn finish(self) -> String {
        if self.fields.is_empty() {
            self.message
        } else {
            format!("{} ({})", self.message, self.fields)
        }
    }
}

impl Visit for EventText {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.add(field, format_args!("{value}"));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.add(field, format_args!("{value:?}"));
        }
    }
}

impl EventText {
    fn add(&mut self, field: &Field, value: std::fmt::Arguments<'_>) {
        if !self.fields.is_empty() {
            self.fields.push_str(", ");
        }
        let _ = write!(self.fields, "{}: {value}", field.name());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<AgentEvent>>);

    impl Observer for Seen {
        fn on_event(&self, event: AgentEvent) {
            self.0.lock().unwrap().push(event);
        }
    }

    #[test]
    fn warnings_reach_the_display_once_each_and_nothing_quieter_does() {
        let sink = WarningSink::default();
        let seen = Arc::new(Seen::default());
        let _ = sink.set(seen.clone());
        let subscriber = tracing_subscriber::registry().with(WarningsToDisplay::new(sink));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("not shown");
            for _ in 0..3 {
                tracing::warn!("the final answer was cut at the model's output limit");
            }
            tracing::warn!(
                tool = "bash",
                chars = 12,
                "could not save a long tool result"
            );
            tracing::error!(error = %"boom", "failed");
            tracing::warn!(target: "rmcp::transport", "worker quit");
            tracing::warn!(target: "herd::audit", "risky command");
        });
        let messages: Vec<String> = seen
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|event| match event {
                AgentEvent::Warning { agent, message } => format!("[{agent}] {message}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            messages,
            [
                "[herd] the final answer was cut at the model's output limit",
                "[herd] could not save a long tool result (tool: bash, chars: 12)",
                "[herd] failed (error: boom)",
                "[herd] risky command",
            ]
        );
    }
}
