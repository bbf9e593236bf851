//! The dashboard's routes: pages, their live regions (server-sent events re-rendered from the
//! shared watches), the answer and cancel forms, presented files, and the logs' tail.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures::AsyncBufReadExt;
use futures::stream::{self, Stream, StreamExt};
use herd_crds::agent::Agent;
use herd_crds::approval::ApprovalDecision;
use herd_crds::budget::Budget;
use herd_crds::run::Run;
use herd_crds::schedule::Schedule;
use herd_crds::skill::Skill;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, LogParams};
use minijinja::value::Serde;
use minijinja::{Environment, Value, context};
use serde::Deserialize;
use tokio::sync::{OnceCell, watch};

use crate::connect::Cluster;
use crate::dashboard::catalog_page::{
    CatalogPage, agents_page, budgets_page, schedules_page, skills_page,
};
use crate::dashboard::guard::{Admission, Guard, Knock};
use crate::dashboard::markdown;
use crate::dashboard::run_page::{Extras, FileRow, ResultView, event_rows, run_page};
use crate::dashboard::runs_page::{RunsQuery, runs_page};
use crate::dashboard::said;
use crate::dashboard::templates::{CSS, Frame, JS, environment, render};
use crate::dashboard::watches::SharedWatch;
use crate::error::CliError;
use crate::logs::log_pod;
use crate::result::{answered, presented_files, read_answer};

/// A live page re-renders at most this often, however fast its objects change.
const THROTTLE: Duration = Duration::from_millis(400);
/// Lines of a container's log shown before following it.
const LOG_TAIL: i64 = 500;

/// A started dashboard.
#[derive(Debug)]
pub struct Started {
    /// The URL to open, with the token.
    pub url: String,
    /// The port it serves on (127.0.0.1).
    pub port: u16,
    server: tokio::task::JoinHandle<()>,
}

impl Started {
    /// Stops serving.
    pub fn stop(self) {
        self.server.abort();
    }
}

/// What every request shares.
struct App {
    cluster: Cluster,
    all_namespaces: bool,
    guard: Guard,
    templates: Environment<'static>,
    runs: SharedWatch<Run>,
    agents: OnceCell<SharedWatch<Agent>>,
    skills: OnceCell<SharedWatch<Skill>>,
    schedules: OnceCell<SharedWatch<Schedule>>,
    budgets: OnceCell<SharedWatch<Budget>>,
}

type AppState = State<Arc<App>>;

/// Binds 127.0.0.1:`port` (0: any free port), starts the Runs' watch and serves in a task.
pub async fn start(cluster: Cluster, all_namespaces: bool, port: u16) -> Result<Started, CliError> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| {
            CliError::new(format!(
                "cannot listen on 127.0.0.1:{port}: {e} (choose another --port, or 0 for any)"
            ))
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| CliError::new(format!("cannot read the dashboard's port: {e}")))?
        .port();
    let templates = environment()
        .map_err(|e| CliError::new(format!("the dashboard's templates are broken: {e}")))?;
    let guard = Guard::new(port);
    let url = guard.first_url();
    let runs = SharedWatch::start(scoped(&cluster, all_namespaces));
    let app = Arc::new(App {
        cluster,
        all_namespaces,
        guard,
        templates,
        runs,
        agents: OnceCell::new(),
        skills: OnceCell::new(),
        schedules: OnceCell::new(),
        budgets: OnceCell::new(),
    });
    let router = router(app);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(Started { url, port, server })
}

fn scoped<K>(cluster: &Cluster, all_namespaces: bool) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
{
    if all_namespaces {
        Api::all(cluster.client.clone())
    } else {
        Api::namespaced(cluster.client.clone(), &cluster.namespace)
    }
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/runs") }))
        .route("/runs", get(runs))
        .route("/live/runs", get(live_runs))
        .route("/runs/{namespace}/{name}", get(run))
        .route("/live/runs/{namespace}/{name}", get(live_run))
        .route("/runs/{namespace}/{name}/answer", post(answer))
        .route("/runs/{namespace}/{name}/cancel", post(cancel))
        .route("/runs/{namespace}/{name}/decide", post(decide))
        .route("/runs/{namespace}/{name}/files/{index}", get(file))
        .route("/runs/{namespace}/{name}/logs", get(logs))
        .route("/live/logs/{namespace}/{name}", get(live_logs))
        .route("/agents", get(|s: AppState| catalog(s, Kind::Agents)))
        .route("/skills", get(|s: AppState| catalog(s, Kind::Skills)))
        .route("/schedules", get(|s: AppState| catalog(s, Kind::Schedules)))
        .route("/budgets", get(|s: AppState| catalog(s, Kind::Budgets)))
        .route(
            "/live/agents",
            get(|s: AppState| live_catalog(s, Kind::Agents)),
        )
        .route(
            "/live/skills",
            get(|s: AppState| live_catalog(s, Kind::Skills)),
        )
        .route(
            "/live/schedules",
            get(|s: AppState| live_catalog(s, Kind::Schedules)),
        )
        .route(
            "/live/budgets",
            get(|s: AppState| live_catalog(s, Kind::Budgets)),
        )
        .route("/assets/dashboard.css", get(|| asset("text/css", CSS)))
        .route("/assets/dashboard.js", get(|| asset("text/javascript", JS)))
        .layer(middleware::from_fn_with_state(Arc::clone(&app), admit))
        .with_state(app)
}

/// Every request passes [`Guard::admit`]; every answer carries headers that keep the page to
/// itself (no framing, no foreign script, image or form target, no referrer to other sites — a
/// same-origin one keeps forms' `Origin` — no caching).
async fn admit(State(app): AppState, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let text = |name: HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let cookies: Vec<&str> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let cookies = cookies.join("; ");
    let knock = Knock {
        reads: matches!(*request.method(), Method::GET | Method::HEAD),
        host: text(header::HOST),
        origin: text(header::ORIGIN),
        path: request.uri().path(),
        query: request.uri().query(),
        cookies: Some(&cookies),
    };
    let mut response = match app.guard.admit(&knock) {
        Admission::Allow => next.run(request).await,
        Admission::Enter { location } => {
            let mut response = Redirect::to(&location).into_response();
            if let Ok(cookie) = HeaderValue::from_str(&app.guard.set_cookie()) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            response
        }
        Admission::Refuse { status, why } => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN),
            format!("refused: {why}\n"),
        )
            .into_response(),
    };
    keep_to_itself(response.headers_mut());
    response
}

fn keep_to_itself(headers: &mut HeaderMap) {
    let fixed = [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

async fn asset(content_type: &'static str, text: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], text).into_response()
}

impl App {
    /// The cluster in `namespace`, with the caller's client.
    fn in_namespace(&self, namespace: &str) -> Cluster {
        Cluster {
            client: self.cluster.client.clone(),
            namespace: namespace.to_owned(),
        }
    }

    fn scope(&self) -> String {
        if self.all_namespaces {
            "all namespaces".to_owned()
        } else {
            format!("namespace {}", self.cluster.namespace)
        }
    }

    /// `template` with `page` and what every page has; a broken template is an error page.
    fn render(&self, template: &str, nav: &str, live: &str, page: Value) -> String {
        let scope = self.scope();
        let frame = Frame {
            nav,
            live,
            scope: &scope,
            all_namespaces: self.all_namespaces,
        };
        render(&self.templates, template, frame, page).unwrap_or_else(|e| {
            format!(
                "<p role=\"alert\">the dashboard cannot show this: {}</p>",
                html_escape(&e.to_string())
            )
        })
    }

    async fn agents(&self) -> &SharedWatch<Agent> {
        self.agents
            .get_or_init(|| async {
                SharedWatch::start(scoped(&self.cluster, self.all_namespaces))
            })
            .await
    }

    async fn skills(&self) -> &SharedWatch<Skill> {
        self.skills
            .get_or_init(|| async {
                SharedWatch::start(scoped(&self.cluster, self.all_namespaces))
            })
            .await
    }

    async fn budgets(&self) -> &SharedWatch<Budget> {
        self.budgets
            .get_or_init(|| async {
                SharedWatch::start(scoped(&self.cluster, self.all_namespaces))
            })
            .await
    }

    async fn schedules(&self) -> &SharedWatch<Schedule> {
        self.schedules
            .get_or_init(|| async {
                SharedWatch::start(scoped(&self.cluster, self.all_namespaces))
            })
            .await
    }

    /// The Runs page's data, or what stops it.
    async fn runs_value(&self, query: &RunsQuery) -> Value {
        let page = self
            .runs
            .objects()
            .await
            .and_then(|runs| runs_page(&runs, query, self.all_namespaces, Timestamp::now()));
        ok_or_problem(page)
    }

    /// The Run's page data from the watch, `None` when the watch does not hold it.
    async fn run_value(&self, namespace: &str, name: &str) -> Result<Option<Value>, String> {
        let runs = self.runs.objects().await?;
        let found = runs
            .iter()
            .find(|r| r.name_any() == name && r.namespace().as_deref() == Some(namespace));
        Ok(found.map(|run| Value::from(Serde(run_page(run, &runs, Timestamp::now())))))
    }
}

fn ok_or_problem<T: serde::Serialize>(result: Result<T, String>) -> Value {
    match result {
        Ok(page) => Value::from(Serde(page)),
        Err(problem) => context! { problem => problem },
    }
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// The page's own address for its live regions: `/live` and its path and query.
fn live_url(path: &str, query: &str) -> String {
    if query.is_empty() {
        format!("/live{path}")
    } else {
        format!("/live{path}?{query}")
    }
}

async fn runs(State(app): AppState, Query(query): Query<RunsQuery>) -> Response {
    let page = app.runs_value(&query).await;
    let live = live_url("/runs", &crate::dashboard::runs_page::query_string(&query));
    html(app.render("runs.html", "runs", &live, page))
}

async fn live_runs(
    State(app): AppState,
    Query(query): Query<RunsQuery>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let changes = app.runs.changes();
    live(changes, move || {
        let app = Arc::clone(&app);
        let query = query.clone();
        async move {
            let page = app.runs_value(&query).await;
            vec![("runs", app.render("runs_table.html", "runs", "", page))]
        }
    })
}

/// The regions of a live page and their templates.
const RUN_REGIONS: [(&str, &str); 5] = [
    ("summary", "run_summary.html"),
    ("question", "run_question.html"),
    ("tree", "run_tree.html"),
    ("progress", "run_progress.html"),
    ("conditions", "run_conditions.html"),
];

#[derive(Deserialize, Default)]
struct Done {
    #[serde(default)]
    done: String,
}

/// What a `?done=` after a form says.
fn done_notice(done: &str) -> Option<&'static str> {
    match done {
        "answered" => Some("Answered: the Run resumes with your answer."),
        "approved" => Some("Approved: the Run runs the tool call."),
        "denied" => Some("Denied: the model reads your reason and goes on without the call."),
        "cancelled" => {
            Some("Cancel requested: the operator deletes the Run's Pod and cancels its children.")
        }
        _ => None,
    }
}

async fn run(
    State(app): AppState,
    Path((namespace, name)): Path<(String, String)>,
    Query(done): Query<Done>,
) -> Response {
    run_response(&app, &namespace, &name, done_notice(&done.done).map(Ok)).await
}

/// The Run page, with a notice (`Err` for a refusal) above it.
async fn run_response(
    app: &App,
    namespace: &str,
    name: &str,
    notice: Option<Result<&str, &str>>,
) -> Response {
    let cluster = app.in_namespace(namespace);
    let page = match app.run_value(namespace, name).await {
        Ok(Some(page)) => page,
        // Not (yet) in the watch: ask the API server, which says why.
        Ok(None) => match crate::runs::get_run(&cluster, name).await {
            Ok(run) => {
                let family = [Arc::new(run.clone())];
                Value::from(Serde(run_page(&run, &family, Timestamp::now())))
            }
            Err(error) => context! { problem => error.message },
        },
        Err(problem) => context! { problem => problem },
    };
    let extras = extras(&cluster, name, app.runs.objects().await.ok()).await;
    let notice = notice.map(|n| match n {
        Ok(text) => context! { text => text, error => false },
        Err(text) => context! { text => text, error => true },
    });
    let page = context! {
        extras => Value::from(Serde(extras)),
        notice => notice,
        ..page
    };
    let path = format!(
        "/runs/{}/{}",
        crate::dashboard::runs_page::percent(namespace),
        crate::dashboard::runs_page::percent(name)
    );
    html(app.render("run.html", "runs", &live_url(&path, ""), page))
}

/// The result, files and Events of the Run `name`.
async fn extras(cluster: &Cluster, name: &str, runs: Option<Vec<Arc<Run>>>) -> Extras {
    let Some(run) = runs.into_iter().flatten().find(|r| {
        r.name_any() == name && r.namespace().as_deref() == Some(cluster.namespace.as_str())
    }) else {
        return Extras::default();
    };
    let result = if answered(&run).is_ok() {
        Some(match read_answer(cluster, &run).await {
            Ok(answer) => Ok(ResultView {
                html: markdown::render(&answer.text),
                cut: answer.cut,
                files: match &answer.config_map {
                    Some(config_map) => presented_files(config_map).map(|files| {
                        files
                            .iter()
                            .enumerate()
                            .map(|(index, f)| FileRow {
                                index,
                                path: f.relative.display().to_string(),
                                size: f.bytes.len(),
                            })
                            .collect()
                    }),
                    None => Ok(Vec::new()),
                },
            }),
            Err(error) => Err(error.message),
        })
    } else {
        None
    };
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let pod = run.status.as_ref().and_then(|s| s.pod_name.clone());
    let mut found = Vec::new();
    let mut refused = None;
    for object in std::iter::once(name).chain(pod.as_deref()) {
        let params = ListParams::default().fields(&format!("involvedObject.name={object}"));
        match events.list(&params).await {
            Ok(list) => found.extend(list.items),
            Err(error) => refused = Some(said(&error)),
        }
    }
    Extras {
        result,
        events: Some(refused.map_or_else(|| Ok(event_rows(found)), Err)),
    }
}

async fn live_run(
    State(app): AppState,
    Path((namespace, name)): Path<(String, String)>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let changes = app.runs.changes();
    live(changes, move || {
        let app = Arc::clone(&app);
        let (namespace, name) = (namespace.clone(), name.clone());
        async move {
            match app.run_value(&namespace, &name).await {
                Ok(Some(page)) => RUN_REGIONS
                    .iter()
                    .map(|(region, template)| {
                        (*region, app.render(template, "runs", "", page.clone()))
                    })
                    .collect(),
                Ok(None) => vec![(
                    "summary",
                    app.render("gone.html", "runs", "", context! { name => name }),
                )],
                Err(problem) => vec![(
                    "summary",
                    app.render("problem.html", "runs", "", context! { problem => problem }),
                )],
            }
        }
    })
}

/// A stream of the regions `regions` renders: all at once, then after each change of
/// `changes` (at most every [`THROTTLE`]) those that differ from what was sent.
fn live<F, Fut>(
    changes: watch::Receiver<u64>,
    regions: F,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Vec<(&'static str, String)>> + Send,
{
    let sent: HashMap<&'static str, String> = HashMap::new();
    let stream = stream::unfold(
        (changes, regions, sent, true),
        |(mut changes, mut regions, mut sent, first)| async move {
            if !first {
                changes.changed().await.ok()?;
                tokio::time::sleep(THROTTLE).await;
                changes.borrow_and_update();
            }
            let mut events = Vec::new();
            for (region, html) in regions().await {
                if sent.get(region) != Some(&html) {
                    events.push(Ok(SseEvent::default().event(region).data(&html)));
                    sent.insert(region, html);
                }
            }
            Some((stream::iter(events), (changes, regions, sent, false)))
        },
    )
    .flatten();
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// The answer form: an option's button (`choice`) or the typed text.
#[derive(Deserialize)]
struct AnswerForm {
    #[serde(default)]
    choice: Option<String>,
    #[serde(default)]
    text: String,
}

impl AnswerForm {
    fn answer(&self) -> &str {
        self.choice.as_deref().unwrap_or(&self.text)
    }
}

async fn answer(
    State(app): AppState,
    Path((namespace, name)): Path<(String, String)>,
    Form(form): Form<AnswerForm>,
) -> Response {
    let cluster = app.in_namespace(&namespace);
    match crate::answer::answer(&cluster, &name, form.answer()).await {
        Ok(_) => after_form(&namespace, &name, "answered"),
        Err(error) => run_response(&app, &namespace, &name, Some(Err(&error.message))).await,
    }
}

/// The approval form: the held call, approve or deny, and why.
#[derive(Deserialize)]
struct DecideForm {
    id: String,
    decision: String,
    #[serde(default)]
    reason: String,
}

async fn decide(
    State(app): AppState,
    Path((namespace, name)): Path<(String, String)>,
    Form(form): Form<DecideForm>,
) -> Response {
    let (decision, done) = match form.decision.as_str() {
        "approve" => (ApprovalDecision::Approve, "approved"),
        "deny" => (ApprovalDecision::Deny, "denied"),
        _ => {
            let why = "the form sent no decision: approve or deny";
            return run_response(&app, &namespace, &name, Some(Err(why))).await;
        }
    };
    let cluster = app.in_namespace(&namespace);
    let reason = Some(form.reason.as_str()).filter(|r| !r.trim().is_empty());
    match crate::approve::decide(&cluster, &name, Some(&form.id), decision, reason).await {
        Ok(_) => after_form(&namespace, &name, done),
        Err(error) => run_response(&app, &namespace, &name, Some(Err(&error.message))).await,
    }
}

async fn cancel(State(app): AppState, Path((namespace, name)): Path<(String, String)>) -> Response {
    let cluster = app.in_namespace(&namespace);
    match crate::cancel::cancel(&cluster, &name).await {
        Ok(_) => after_form(&namespace, &name, "cancelled"),
        Err(error) => run_response(&app, &namespace, &name, Some(Err(&error.message))).await,
    }
}

/// Back to the Run's page after a form did its work (a reload does not send it again).
fn after_form(namespace: &str, name: &str, done: &str) -> Response {
    Redirect::to(&format!(
        "/runs/{}/{}?done={done}",
        crate::dashboard::runs_page::percent(namespace),
        crate::dashboard::runs_page::percent(name)
    ))
    .into_response()
}

/// A presented file as a download (never shown inline: its bytes are the model's).
async fn file(
    State(app): AppState,
    Path((namespace, name, index)): Path<(String, String, usize)>,
) -> Response {
    let cluster = app.in_namespace(&namespace);
    let refused = |status: StatusCode, why: String| (status, format!("{why}\n")).into_response();
    let run = match crate::runs::get_run(&cluster, &name).await {
        Ok(run) => run,
        Err(error) => return refused(StatusCode::BAD_GATEWAY, error.message),
    };
    let answer = match read_answer(&cluster, &run).await {
        Ok(answer) => answer,
        Err(error) => return refused(StatusCode::BAD_GATEWAY, error.message),
    };
    let Some(config_map) = answer.config_map else {
        return refused(
            StatusCode::NOT_FOUND,
            format!("Run {name} has no result ConfigMap"),
        );
    };
    let files = match presented_files(&config_map) {
        Ok(files) => files,
        Err(why) => return refused(StatusCode::BAD_GATEWAY, why),
    };
    let Some(found) = files.get(index) else {
        return refused(
            StatusCode::NOT_FOUND,
            format!("Run {name} presented no file {index}"),
        );
    };
    let file_name: String = found
        .relative
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{file_name}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        found.bytes.to_vec(),
    )
        .into_response()
}

#[derive(Deserialize)]
struct LogsQuery {
    #[serde(default)]
    container: String,
}

/// The container a log request names: the agent's (default) or the sandbox's.
fn container(query: &LogsQuery) -> &'static str {
    if query.container == "sandbox" {
        "sandbox"
    } else {
        "agent"
    }
}

/// The Pod whose logs the Run `name` has, or why none.
async fn log_target(cluster: &Cluster, name: &str) -> Result<String, String> {
    let run = crate::runs::get_run(cluster, name)
        .await
        .map_err(|e| e.message)?;
    log_pod(&run)
}

/// The last lines of a container's log as text (the page without script links here).
async fn logs(
    State(app): AppState,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<LogsQuery>,
) -> Response {
    let cluster = app.in_namespace(&namespace);
    let text = match log_target(&cluster, &name).await {
        Ok(pod) => {
            let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &namespace);
            let params = LogParams {
                container: Some(container(&query).to_owned()),
                tail_lines: Some(LOG_TAIL),
                ..LogParams::default()
            };
            pods.logs(&pod, &params).await.unwrap_or_else(|e| said(&e))
        }
        Err(why) => why,
    };
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

/// A container's log, its last lines then each new one, as events `line`; `problem` says why
/// it cannot be read (the browser asks again), `end` that the container stopped.
async fn live_logs(
    State(app): AppState,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<LogsQuery>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let cluster = app.in_namespace(&namespace);
    let container = container(&query);
    let opened = async move {
        let pod = log_target(&cluster, &name).await?;
        let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &namespace);
        let params = LogParams {
            container: Some(container.to_owned()),
            tail_lines: Some(LOG_TAIL),
            follow: true,
            ..LogParams::default()
        };
        pods.log_stream(&pod, &params).await.map_err(|e| said(&e))
    };
    let events = stream::once(opened).flat_map(|opened| match opened {
        Ok(reader) => reader
            .lines()
            .map(|line| match line {
                Ok(line) => SseEvent::default().event("line").data(line),
                Err(e) => SseEvent::default().event("problem").data(e.to_string()),
            })
            .chain(stream::once(async {
                SseEvent::default().event("end").data("end")
            }))
            .map(Ok)
            .boxed(),
        Err(why) => stream::once(async move {
            Ok(SseEvent::default()
                .event("problem")
                .retry(Duration::from_secs(2))
                .data(why))
        })
        .boxed(),
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// The kinds of the catalog pages.
#[derive(Clone, Copy)]
enum Kind {
    Agents,
    Skills,
    Schedules,
    Budgets,
}

impl App {
    async fn catalog_page(
        &self,
        kind: Kind,
    ) -> (Result<CatalogPage, String>, watch::Receiver<u64>) {
        let now = Timestamp::now();
        let all = self.all_namespaces;
        match kind {
            Kind::Agents => {
                let shared = self.agents().await;
                let page = shared.objects().await.map(|o| agents_page(&o, all, now));
                (page, shared.changes())
            }
            Kind::Skills => {
                let shared = self.skills().await;
                let page = shared.objects().await.map(|o| skills_page(&o, all, now));
                (page, shared.changes())
            }
            Kind::Schedules => {
                let shared = self.schedules().await;
                let page = shared.objects().await.map(|o| schedules_page(&o, all, now));
                (page, shared.changes())
            }
            Kind::Budgets => {
                let shared = self.budgets().await;
                let page = shared.objects().await.map(|o| budgets_page(&o, all, now));
                (page, shared.changes())
            }
        }
    }
}

fn kind_path(kind: Kind) -> &'static str {
    match kind {
        Kind::Agents => "agents",
        Kind::Skills => "skills",
        Kind::Schedules => "schedules",
        Kind::Budgets => "budgets",
    }
}

async fn catalog(State(app): AppState, kind: Kind) -> Response {
    let (page, _) = app.catalog_page(kind).await;
    let nav = kind_path(kind);
    let live = format!("/live/{nav}");
    html(app.render("catalog.html", nav, &live, ok_or_problem(page)))
}

async fn live_catalog(
    State(app): AppState,
    kind: Kind,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let (_, changes) = app.catalog_page(kind).await;
    live(changes, move || {
        let app = Arc::clone(&app);
        async move {
            let (page, _) = app.catalog_page(kind).await;
            let nav = kind_path(kind);
            vec![(
                "catalog",
                app.render("catalog_table.html", nav, "", ok_or_problem(page)),
            )]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sandbox_or_the_agent_is_read() {
        let query = |c: &str| LogsQuery {
            container: c.into(),
        };
        assert_eq!(container(&query("sandbox")), "sandbox");
        assert_eq!(container(&query("")), "agent");
        assert_eq!(container(&query("../etc")), "agent");
    }

    #[test]
    fn forms_come_back_to_fixed_notices() {
        assert!(done_notice("answered").is_some());
        assert!(done_notice("<script>").is_none());
        assert_eq!(
            after_form("a b", "r", "answered")
                .headers()
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok()),
            Some("/runs/a%20b/r?done=answered")
        );
    }
}
