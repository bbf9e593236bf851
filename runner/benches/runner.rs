//! Runner benchmarks with the scripted model (no network): `cargo bench -p herd-runner`.
//!
//! Reports, against the targets of the runner issue:
//! - cold start to the first model request of the `herd-runner` binary (target ≤ 15 ms),
//! - peak RSS of a 50-model-call run (target ≤ 20 MiB),
//! - framework time per model call at 10, 50 and 200 calls, full chain on (target ≤ 0.5 ms).
//!
//! Not part of CI: timings need a quiet machine and a release build.

// A benchmark that cannot set itself up should stop loudly.
#![allow(clippy::expect_used)]

#[path = "../tests/scripted/mod.rs"]
mod scripted;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herd_runner::agent::NoObserver;
use herd_runner::runtime::local::{LocalRequest, run_local};
use herd_runner::runtime::local_plan::Overrides;
use scripted::{indented, scripted_agent};

const REPEATS: usize = 7;

/// An Agent whose scripted model makes `calls` model calls: `calls - 1` turns of one cheap
/// tool call each (rotating over four tools with distinct arguments, as a working agent
/// would, so loop detection stays quiet), then an answer. Plan mode, memory and
/// summarization are on, so the whole chain runs. Rules follow the previous tool result, so
/// they still match after summarization compacts the thread.
fn agent_manifest(calls: usize, summarization: &str) -> String {
    let spec = format!(
        "  subagents: {{enabled: true}}
  runDefaults: {{planMode: true, maxModelCalls: {max}}}
  memory: {{enabled: true}}
  summarization: {summarization}",
        max = calls + 5,
    );
    scripted_agent("bench", "bench", &spec, &script(calls))
}

/// The script of [`agent_manifest`]: the side calls' rules, then one per model call.
fn script(calls: usize) -> String {
    let mut rules = String::from(
        "- match: {purpose: memory}\n  respond: {content: '{\"operations\": []}'}\n\
         - match: {purpose: title}\n  respond: {content: Bench}\n\
         - match: {purpose: summary}\n  respond: {content: 'Steps so far: listing.'}\n",
    );
    for step in 1..calls {
        let matcher = if step == 1 {
            "{role: lead, lastMessage: {role: user}}".to_owned()
        } else {
            format!(
                "{{role: lead, lastMessage: {{role: tool, contains: \"s{}x\"}}}}",
                step - 1
            )
        };
        let path = format!("/mnt/user-data/workspace/s{step}x");
        let call = match step % 4 {
            0 => format!("{{name: ls, arguments: {{description: look, path: {path}}}}}"),
            1 => format!("{{name: read_file, arguments: {{description: read, path: {path}}}}}"),
            2 => format!(
                "{{name: glob, arguments: {{description: find, pattern: '*.md', path: {path}}}}}"
            ),
            _ => format!(
                "{{name: grep, arguments: {{description: search, pattern: todo, path: {path}}}}}"
            ),
        };
        rules.push_str(&format!(
            "- match: {matcher}\n  respond: {{content: 'Step {step}.', toolCalls: [{call}]}}\n"
        ));
    }
    rules.push_str(&format!(
        "- match: {{role: lead, lastMessage: {{role: tool, contains: \"s{}x\"}}}}\n  respond: {{content: Done.}}\n",
        calls - 1
    ));
    format!("rules:\n{}", indented(&rules, "  "))
}

/// Summarization as the Agent's defaults have it (the tokenizer stays unloaded).
const DEFAULT_SUMMARIZATION: &str = "{enabled: true}";
/// Summarization that triggers early, so the exact tokenizer is loaded: the conversation
/// (prompt excluded) grows by ~35 tokens a call, so from about call 23 it sits in the band
/// (80–100% of the trigger) where the exact cl100k count is taken.
const EARLY_SUMMARIZATION: &str = "{enabled: true, triggerTokens: 1000, keepMessages: 10}";

fn write_agent(dir: &Path, calls: usize, summarization: &str) -> PathBuf {
    let path = dir.join(format!("bench-{calls}-{}.yaml", summarization.len()));
    std::fs::write(&path, agent_manifest(calls, summarization)).expect("write the bench agent");
    path
}

/// The loop alone (no middleware), with the sandbox tools in-process: the runner issue's
/// framework time, before the chain is added.
fn loop_only_time(
    runtime: &tokio::runtime::Runtime,
    dir: &Path,
    calls: usize,
    telemetry: &herd_runner::telemetry::Telemetry,
) -> Duration {
    use herd_runner::agent::{Agent, Limits, RunEnv, ToolRegistry};
    use herd_runner::control::local::{LocalControlPlane, Questions};
    use herd_runner::model::scripted::ScriptedModel;
    use herd_runner::runtime::workdir::Workdir;
    use herd_runner::thread::ThreadState;
    use herd_runner::tools::sandbox_tools::sandbox_tools;
    use herd_sandbox::{InProcessExecutor, SandboxHost};

    let workdir = Workdir::prepare(&dir.join(format!("loop-{calls}"))).expect("work folder");
    let sandbox = SandboxHost::new(&workdir.roots).expect("sandbox");
    let model = ScriptedModel::from_yaml(&script(calls)).expect("script");
    let agent = Agent {
        name: "lead".into(),
        system_prompt: "You are a benchmark.".into(),
        model: Arc::new(model),
        tools: ToolRegistry::new(sandbox_tools(), None, &[]),
        chain: Vec::new(),
        options: Default::default(),
        context: Default::default(),
        limits: Limits {
            max_model_calls: u32::try_from(calls + 5).unwrap_or(u32::MAX),
            ..Limits::default()
        },
        observer: Arc::new(NoObserver),
        telemetry: telemetry.clone(),
    };
    let env = RunEnv {
        executor: Arc::new(InProcessExecutor(Arc::new(sandbox))),
        control: Arc::new(LocalControlPlane::new(None, None, Questions::Refuse, None)),
    };
    let samples = (0..REPEATS)
        .map(|_| {
            let mut state = ThreadState::new("benchmark");
            let start = Instant::now();
            let outcome = runtime
                .block_on(agent.run(&mut state, &env))
                .expect("loop run");
            let elapsed = start.elapsed();
            assert_eq!(state.usage.model_calls as usize, calls, "{outcome:?}");
            elapsed
        })
        .collect();
    median(samples)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// In-process: the same code path as `herd-runner run`, timed around the whole run.
fn framework_time(runtime: &tokio::runtime::Runtime, dir: &Path, calls: usize) -> Duration {
    let agent = write_agent(dir, calls, DEFAULT_SUMMARIZATION);
    let samples = (0..REPEATS)
        .map(|repeat| {
            let request = LocalRequest {
                files: vec![agent.clone()],
                overrides: Overrides {
                    task: Some("benchmark".into()),
                    ..Overrides::default()
                },
                workdir: dir.join(format!("work-{calls}-{repeat}")),
                memory_dir: dir.join("memory"),
                ..LocalRequest::default()
            };
            let start = Instant::now();
            let result = runtime
                .block_on(run_local(request, Arc::new(NoObserver)))
                .expect("bench run");
            let elapsed = start.elapsed();
            assert_eq!(
                (
                    result.outcome.stop_reason,
                    result.usage.model_calls as usize
                ),
                (herd_crds::report::StopReason::Completed, calls),
                "the scripted run went off course: {:?}",
                result.outcome.error
            );
            elapsed
        })
        .collect();
    median(samples)
}

/// Spawn to the first `model_call` event on stdout.
fn cold_start(binary: &Path, agent: &Path, dir: &Path) -> Duration {
    let samples = (0..REPEATS * 3)
        .map(|repeat| {
            let start = Instant::now();
            let mut child = Command::new(binary)
                .args(["run", "--json", "-f"])
                .arg(agent)
                .arg("--workdir")
                .arg(dir.join(format!("cold-{repeat}")))
                .arg("--memory-dir")
                .arg(dir.join("memory"))
                .arg("benchmark")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn herd-runner");
            let stdout = child.stdout.take().expect("stdout");
            let mut elapsed = None;
            for line in BufReader::new(stdout).lines() {
                let line = line.expect("read stdout");
                if line.contains(r#""event":"model_call""#) {
                    elapsed = Some(start.elapsed());
                    break;
                }
            }
            let _ = child.kill();
            let _ = child.wait();
            elapsed.expect("the run made a model call")
        })
        .collect();
    median(samples)
}

/// Peak RSS of a whole run, from the kernel's accounting of waited-for children.
fn peak_rss_kib(binary: &Path, agent: &Path, dir: &Path) -> i64 {
    let status = Command::new(binary)
        .args(["run", "-f"])
        .arg(agent)
        .arg("--workdir")
        .arg(dir.join("rss"))
        .arg("--memory-dir")
        .arg(dir.join("memory"))
        .arg("benchmark")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run herd-runner");
    assert!(status.success(), "the 50-call run failed");
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage")
        .max_rss()
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("temp dir");
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_herd-runner"));
    let fifty = write_agent(dir.path(), 50, DEFAULT_SUMMARIZATION);
    let fifty_tokenizer = write_agent(dir.path(), 50, EARLY_SUMMARIZATION);

    let cold = cold_start(&binary, &fifty, dir.path());
    println!(
        "cold start to first model request: {:.2} ms (target ≤ 15 ms)",
        ms(cold)
    );

    let rss = peak_rss_kib(&binary, &fifty, dir.path());
    println!(
        "peak RSS of a 50-call run: {:.1} MiB (target ≤ 20 MiB)",
        rss as f64 / 1024.0
    );
    let rss = peak_rss_kib(&binary, &fifty_tokenizer, dir.path());
    println!(
        "peak RSS of a 50-call run with the tokenizer loaded (early summarization): {:.1} MiB \
         (target ≤ 48 MiB)",
        rss as f64 / 1024.0
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let untraced = herd_runner::telemetry::Telemetry::default();
    let mut loop_totals = Vec::new();
    for calls in [10usize, 50, 200] {
        let total = loop_only_time(&runtime, dir.path(), calls, &untraced);
        println!(
            "loop only, {calls:>3} calls: {:.3} ms per call ({:.1} ms per run)",
            ms(total) / calls as f64,
            ms(total)
        );
        loop_totals.push(total);
    }
    // The same loop with every span exported (batched, in the exporter's thread) to a local
    // OTLP/HTTP endpoint that accepts everything: the ratio is the exporter's cost.
    let endpoint = runtime.block_on(accepting_otlp_endpoint());
    let export = herd_runner::telemetry::export::exporting_to(&endpoint).expect("an exporter");
    let traced = export.telemetry(false);
    let traced_total = loop_only_time(&runtime, dir.path(), 200, &traced);
    let untraced_total = loop_only_time(&runtime, dir.path(), 200, &untraced);
    println!(
        "loop only, 200 calls, OTLP exporter configured: {:.3} ms per call, {:.3} without: \
         ratio {:.3} (target ≤ 1.05)",
        ms(traced_total) / 200.0,
        ms(untraced_total) / 200.0,
        traced_total.as_secs_f64() / untraced_total.as_secs_f64()
    );
    export.shutdown();
    let mut totals = Vec::new();
    for calls in [10usize, 50, 200] {
        let total = framework_time(&runtime, dir.path(), calls);
        println!(
            "{calls:>3} calls: {:.2} ms per call all in ({:.1} ms per run)",
            ms(total) / calls as f64,
            ms(total)
        );
        totals.push((calls, total));
    }
    // The slope between 10 and 200 calls removes per-run setup (work folder, skills, prompt).
    println!(
        "loop only, per extra model call (10 -> 200): {:.3} ms",
        (ms(loop_totals[2]) - ms(loop_totals[0])) / 190.0
    );
    let (few, few_time) = totals[0];
    let (many, many_time) = totals[2];
    let marginal = (ms(many_time) - ms(few_time)) / (many - few) as f64;
    println!("framework time per extra model call (10 -> 200): {marginal:.3} ms (target ≤ 0.5 ms)");
}

/// An OTLP/HTTP endpoint on loopback that answers every export with 200.
async fn accepting_otlp_endpoint() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the OTLP endpoint");
    let address = listener.local_addr().expect("its address");
    let app = axum::Router::new().route("/v1/traces", axum::routing::post(|| async { "" }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
