//! The loopback server of one `stateval run`: model endpoints, MCP and plain-HTTP
//! tools, every case run addressed by its token (`/r/TOKEN/…`).
//!
//! Every request under `/r/TOKEN/` passes one [`guard`] first: it is admitted to its
//! own case run or refused (`access`), and its body must arrive within
//! [`BODY_READ_MS`]; every connection must send its headers within [`HEADER_READ_MS`].
//! Handlers do no work of their own: each request becomes a [`Msg`] to the case run's
//! session (the one writer of its log), and the session's [`Reply`] goes back on the
//! wire. The server runs on its own small tokio runtime in a thread of its own, bound
//! to an ephemeral port on 127.0.0.1, and stops when the [`Server`] is dropped.

use std::net::SocketAddr;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Extension, FromRequest, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any_service, get, post};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::access::{Cases, Credentials};
use super::process::Output;
use super::wire::{Dialect, Reply};

/// What a handler (or the agent's process) tells a session.
pub enum Msg {
    Model {
        dialect: Dialect,
        body: Value,
        reply: oneshot::Sender<Reply>,
    },
    ListTools {
        reply: oneshot::Sender<Vec<Value>>,
    },
    CallTool {
        name: String,
        args: Value,
        reply: oneshot::Sender<ToolAnswer>,
    },
    /// A request to a path stateval does not serve.
    Unserved {
        method: String,
        path: String,
    },
    /// A request with this case run's API key tried another case run's endpoints
    /// (`request`: method and path, token elided) and was refused.
    CrossCase {
        request: String,
        addressed: &'static str,
    },
    /// A request's body did not arrive within `limit_ms`; the connection was dropped.
    SlowBody {
        request: String,
        limit_ms: u64,
    },
    /// A request the server refused itself before the session saw it (`request`:
    /// method and path, token elided), with the status and message it answered.
    Refused {
        request: String,
        status: u16,
        message: String,
    },
    /// The agent's protocol-fd and stdout lines, and their end.
    Agent(Output),
}

/// A tool call's answer, for MCP and plain HTTP alike.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    pub result: Value,
    pub is_error: bool,
    /// The fixture answered with a protocol error: MCP sends it as a JSON-RPC error.
    pub protocol_error: Option<crate::pipeline::manifest::ProtocolError>,
}

/// Request bodies up to this size are read: a long conversation re-sends its whole
/// history on every call.
const BODY_LIMIT: usize = 64 << 20;

/// How long a client has to send a request's headers, and on a kept-alive connection
/// to start its next request. An HTTP client writes its headers in one go, and over
/// loopback they arrive in microseconds; a client that trickles them (or connects and
/// says nothing) would hold a connection and a task for as long as it liked. Ten
/// seconds is far beyond any honest client on a loaded machine. A kept-alive connection
/// idle this long is closed too, which costs an SDK nothing: its pool expires idle
/// connections sooner (httpx after 5 s, Node's undici after 4 s) or opens a new one.
pub const HEADER_READ_MS: u64 = 10_000;

/// How long a request's body has to arrive once its headers have. Bodies are written
/// right after the headers (up to [`BODY_LIMIT`] over loopback, well under a second);
/// an agent still sending after this fails its case, naming the request.
pub const BODY_READ_MS: u64 = 10_000;

/// After a failed `accept` (out of file descriptors, say), wait this long before the
/// next, rather than spin.
const ACCEPT_BACKOFF_MS: u64 = 50;

/// How long the server waits for a slow client; [`Server::start`] uses the constants
/// above, tests shorter ones.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_read: Duration,
    pub body_read: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { header_read: Duration::from_millis(HEADER_READ_MS), body_read: Duration::from_millis(BODY_READ_MS) }
    }
}

/// What every handler shares: the case runs, and how long a body may take.
#[derive(Clone)]
pub(crate) struct Shared {
    cases: Arc<Mutex<Cases>>,
    body_read: Duration,
}

/// The case run a request was admitted to (by [`guard`]), in the request's extensions
/// for the handlers and the MCP service.
#[derive(Clone)]
pub(crate) struct Admitted(pub Sender<Msg>);

pub struct Server {
    addr: SocketAddr,
    cases: Arc<Mutex<Cases>>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A session's registration; its URL stops resolving when it is dropped.
pub struct Registration {
    cases: Arc<Mutex<Cases>>,
    token: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.cases.lock().unwrap_or_else(PoisonError::into_inner).end(&self.token);
    }
}

impl Server {
    /// Bind 127.0.0.1 on an ephemeral port and serve until dropped.
    pub fn start() -> std::io::Result<Server> {
        Server::start_with(Limits::default())
    }

    /// [`Server::start`], with its own limits for slow clients.
    pub fn start_with(limits: Limits) -> std::io::Result<Server> {
        let cases: Arc<Mutex<Cases>> = Arc::default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        let app = router(Shared { cases: cases.clone(), body_read: limits.body_read });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("stateval-endpoints")
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new().name("stateval-endpoints".into()).spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                serve(listener, app, limits.header_read, rx).await;
            });
            runtime.shutdown_background();
        })?;
        Ok(Server { addr, cases, shutdown: Some(tx), thread: Some(thread) })
    }

    /// Route requests with `credentials` to `sender` until the registration is dropped.
    pub fn register(&self, credentials: &Credentials, sender: Sender<Msg>) -> Registration {
        self.cases.lock().unwrap_or_else(PoisonError::into_inner).begin(credentials, sender);
        Registration { cases: self.cases.clone(), token: credentials.token.clone() }
    }

    /// `http://127.0.0.1:PORT/r/TOKEN`.
    pub fn base_url(&self, token: &str) -> String {
        format!("http://{}/r/{token}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accept connections until `shutdown`. axum's own `serve` has no header timeout, so
/// connections are served by hyper's HTTP/1 connection with one ([`HEADER_READ_MS`]):
/// a client that has not sent complete headers in time is disconnected. (HTTP/1 only:
/// every agent SDK speaks it, and the version sniffing of `auto` would read the first
/// bytes with no timeout.) Connections still open at shutdown are dropped with the
/// runtime; every case run has ended by then.
async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    header_read: Duration,
    mut shutdown: oneshot::Receiver<()>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read);
    let builder = Arc::new(builder);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(ACCEPT_BACKOFF_MS)).await;
                    continue;
                }
            },
            _ = &mut shutdown => return,
        };
        let (builder, service) = (builder.clone(), TowerToHyperService::new(app.clone()));
        tokio::spawn(async move {
            // a dropped or timed-out client ends its connection; nothing to report
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

fn router(shared: Shared) -> Router {
    let mcp = any_service(super::mcp::service()).layer(axum::middleware::from_fn(super::mcp::reject_malformed));
    Router::new()
        .route("/r/{token}/v1/chat/completions", post(chat))
        .route("/r/{token}/v1/responses", post(responses))
        .route("/r/{token}/v1/messages", post(messages))
        // `@ai-sdk/anthropic` expects `/v1` inside ANTHROPIC_BASE_URL, Anthropic's own
        // SDKs outside it: the one base URL serves both
        .route("/r/{token}/messages", post(messages))
        .route("/r/{token}/v1/models", get(models))
        .route("/r/{token}/tools", get(list_tools))
        .route("/r/{token}/tools/{name}", post(call_tool))
        .route("/r/{token}/mcp", mcp)
        .layer(axum::middleware::from_fn(session_close_ok))
        .fallback(unserved)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(shared)
}

/// rmcp answers an MCP session's `DELETE` with 202; the official Python client counts
/// only 200, 204 and 405 as success and logs every other status into the agent's
/// stderr. The session is closed either way, so say 200.
async fn session_close_ok(request: Request, next: Next) -> Response {
    let delete = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// `/r/TOKEN/rest` → (`TOKEN`, `rest`).
fn addressed(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/r/")?;
    Some(rest.split_once('/').unwrap_or((rest, "")))
}

/// Every request under `/r/TOKEN/` passes here first: it is admitted to a case run
/// ([`Cases::admit`]: its own, or refused and flagged), then its body is read within
/// the body timeout. Handlers see only admitted requests with their bodies in memory.
async fn guard(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let Some((token, rest)) = addressed(&path) else { return next.run(request).await };
    // the token is elided: logs are read by others, and the URL was someone's secret
    let described = format!("{} /r/…/{rest}", request.method());
    let admitted = shared.cases.lock().unwrap_or_else(PoisonError::into_inner).admit(token, request.headers());
    let tx = match admitted {
        Ok(tx) => tx,
        Err(refusal) => {
            let body = refusal.body();
            if let Some(flag) = refusal.flag {
                let _ = flag.sender.send(Msg::CrossCase { request: described, addressed: flag.addressed });
            }
            return (refusal.status, axum::Json(body)).into_response();
        }
    };
    let (mut parts, body) = request.into_parts();
    // read through the `Bytes` extractor so that `DefaultBodyLimit` still applies
    let reading = Bytes::from_request(Request::from_parts(parts.clone(), body), &());
    let bytes = match tokio::time::timeout(shared.body_read, reading).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(rejection)) => return rejection.into_response(),
        Err(_) => {
            let limit_ms = u64::try_from(shared.body_read.as_millis()).unwrap_or(u64::MAX);
            let message = format!("stateval: the request body did not arrive within {limit_ms} ms");
            let _ = tx.send(Msg::SlowBody { request: described, limit_ms });
            let body = json!({"error": {"message": message, "type": "invalid_request_error",
                                        "code": "stateval_slow_request"}});
            // hyper closes the connection: the rest of the body was never read
            return (StatusCode::REQUEST_TIMEOUT, axum::Json(body)).into_response();
        }
    };
    parts.extensions.insert(Admitted(tx));
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

fn reply(r: Reply) -> Response {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, r.content_type)], r.body).into_response()
}

/// The case run ended between admitting a request and answering it.
fn gone() -> Response {
    let body = json!({"error": {"message": "stateval: the case run of this URL has ended",
                                "type": "invalid_request_error", "code": "stateval_run_ended"}});
    (StatusCode::GONE, axum::Json(body)).into_response()
}

async fn model(tx: &Sender<Msg>, dialect: Dialect, bytes: &[u8]) -> Response {
    let body: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            let message = format!("the body is not JSON: {e}");
            let request = format!("{} request", dialect.api());
            let _ = tx.send(Msg::Refused { request, status: 400, message: message.clone() });
            return reply(dialect.error(400, "invalid_request_error", &message));
        }
    };
    let (reply_tx, reply_rx) = oneshot::channel();
    if tx.send(Msg::Model { dialect, body, reply: reply_tx }).is_err() {
        return gone();
    }
    match reply_rx.await {
        Ok(r) => reply(r),
        Err(_) => gone(),
    }
}

async fn chat(Extension(Admitted(tx)): Extension<Admitted>, body: Bytes) -> Response {
    model(&tx, Dialect::Chat, &body).await
}

async fn responses(Extension(Admitted(tx)): Extension<Admitted>, body: Bytes) -> Response {
    model(&tx, Dialect::Responses, &body).await
}

async fn messages(Extension(Admitted(tx)): Extension<Admitted>, body: Bytes) -> Response {
    model(&tx, Dialect::Messages, &body).await
}

/// The one model replay serves, in the shape of the API that asked (Anthropic's
/// clients send `anthropic-version`). Admission ([`guard`]) is all it needs.
async fn models(headers: HeaderMap) -> Response {
    let body = if headers.contains_key("anthropic-version") {
        json!({"data": [{"type": "model", "id": MODEL, "display_name": "stateval replay",
                         "created_at": "2025-01-01T00:00:00Z"}],
               "has_more": false, "first_id": MODEL, "last_id": MODEL})
    } else {
        json!({"object": "list", "data": [{"id": MODEL, "object": "model", "created": super::wire::EPOCH,
                                            "owned_by": "stateval"}]})
    };
    axum::Json(body).into_response()
}

/// The model id `GET /v1/models` lists.
pub const MODEL: &str = "stateval-replay";

/// `GET STATEVAL_TOOLS_URL`: the served tools with their input schemas.
async fn list_tools(Extension(Admitted(tx)): Extension<Admitted>) -> Response {
    match list(&tx).await {
        Some(tools) => axum::Json(json!({"tools": tools})).into_response(),
        None => gone(),
    }
}

pub(crate) async fn list(tx: &Sender<Msg>) -> Option<Vec<Value>> {
    let (reply_tx, reply_rx) = oneshot::channel();
    tx.send(Msg::ListTools { reply: reply_tx }).ok()?;
    reply_rx.await.ok()
}

pub(crate) async fn call(tx: &Sender<Msg>, name: String, args: Value) -> Option<ToolAnswer> {
    let (reply_tx, reply_rx) = oneshot::channel();
    tx.send(Msg::CallTool { name, args, reply: reply_tx }).ok()?;
    reply_rx.await.ok()
}

/// `POST STATEVAL_TOOLS_URL/{name}` with the arguments as the body.
async fn call_tool(
    Extension(Admitted(tx)): Extension<Admitted>,
    axum::extract::Path((_token, name)): axum::extract::Path<(String, String)>,
    body: Bytes,
) -> Response {
    let args: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                let body = json!({"error": format!("the arguments are not JSON: {e}")});
                return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
            }
        }
    };
    match call(&tx, name, args).await {
        Some(answer) => {
            let mut body = json!({"result": answer.result, "is_error": answer.is_error});
            if let Some(protocol) = &answer.protocol_error {
                body["protocol_error"] = protocol.to_value();
            }
            axum::Json(body).into_response()
        }
        None => gone(),
    }
}

/// Anything else: an admitted case run is told (an agent calling an endpoint stateval
/// does not serve fails its case, never silently), and the agent gets a 404.
async fn unserved(admitted: Option<Extension<Admitted>>, method: Method, uri: Uri) -> Response {
    let path = uri.path();
    if let (Some(Extension(Admitted(tx))), Some((_, rest))) = (admitted, addressed(path)) {
        let _ = tx.send(Msg::Unserved { method: method.to_string(), path: format!("/{rest}") });
    }
    let body = json!({"error": {"message": format!("stateval does not serve {method} {path}"),
                                "type": "invalid_request_error", "code": "stateval_unserved_endpoint"}});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests;
