//! The loopback server of one `stateval run`: model endpoints, MCP and plain-HTTP
//! tools, every case run addressed by its token (`/r/TOKEN/…`).
//!
//! Handlers do no work of their own: each request becomes a [`Msg`] to the case run's
//! session (the one writer of its log), and the session's [`Reply`] goes back on the
//! wire. The server runs on its own small tokio runtime in a thread of its own, bound
//! to an ephemeral port on 127.0.0.1, and stops when the [`Server`] is dropped.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::oneshot;

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
    /// The agent's stdout, line by line.
    Agent(Output),
}

/// A tool call's answer, for MCP and plain HTTP alike.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    pub result: Value,
    pub is_error: bool,
    /// The fixture answered with a protocol error: MCP sends it as a JSON-RPC error.
    pub protocol_error: Option<crate::sandbox::ProtocolError>,
}

pub(crate) type Sessions = Arc<Mutex<HashMap<String, Sender<Msg>>>>;

/// Request bodies up to this size are read: a long conversation re-sends its whole
/// history on every call.
const BODY_LIMIT: usize = 64 << 20;

pub struct Server {
    addr: SocketAddr,
    sessions: Sessions,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A session's registration; the token stops resolving when it is dropped.
pub struct Registration {
    sessions: Sessions,
    token: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut s) = self.sessions.lock() {
            s.remove(&self.token);
        }
    }
}

impl Server {
    /// Bind 127.0.0.1 on an ephemeral port and serve until dropped.
    pub fn start() -> std::io::Result<Server> {
        let sessions: Sessions = Arc::default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        let app = router(sessions.clone());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("stateval-endpoints")
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new().name("stateval-endpoints".into()).spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = rx.await;
                    })
                    .await;
            });
            runtime.shutdown_background();
        })?;
        Ok(Server { addr, sessions, shutdown: Some(tx), thread: Some(thread) })
    }

    /// Route `/r/TOKEN/…` to `sender` until the registration is dropped.
    pub fn register(&self, token: &str, sender: Sender<Msg>) -> Registration {
        if let Ok(mut s) = self.sessions.lock() {
            s.insert(token.to_string(), sender);
        }
        Registration { sessions: self.sessions.clone(), token: token.to_string() }
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

fn router(sessions: Sessions) -> Router {
    let mcp = super::mcp::service(sessions.clone());
    Router::new()
        .route("/r/{token}/v1/chat/completions", post(chat))
        .route("/r/{token}/v1/responses", post(responses))
        .route("/r/{token}/v1/messages", post(messages))
        .route("/r/{token}/v1/models", get(models))
        .route("/r/{token}/tools", get(list_tools))
        .route("/r/{token}/tools/{name}", post(call_tool))
        .route_service("/r/{token}/mcp", mcp)
        .layer(axum::middleware::from_fn(session_close_ok))
        .fallback(unserved)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(sessions)
}

/// rmcp answers an MCP session's `DELETE` with 202; the official Python client counts
/// only 200, 204 and 405 as success and logs every other status into the agent's
/// stderr. The session is closed either way, so say 200.
async fn session_close_ok(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let delete = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

pub(crate) fn session(sessions: &Sessions, token: &str) -> Option<Sender<Msg>> {
    sessions.lock().ok()?.get(token).cloned()
}

fn reply(r: Reply) -> Response {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, r.content_type)], r.body).into_response()
}

fn gone(token: &str) -> Response {
    let body = json!({"error": {"message": format!("stateval: no case run with token {token:?} is in progress"),
                                "type": "invalid_request_error", "code": "stateval_unknown_run"}});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

async fn model(sessions: &Sessions, token: &str, dialect: Dialect, bytes: &[u8]) -> Response {
    let Some(tx) = session(sessions, token) else { return gone(token) };
    let body: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return reply(dialect.error(400, "invalid_request_error", &format!("the body is not JSON: {e}"))),
    };
    let (reply_tx, reply_rx) = oneshot::channel();
    if tx.send(Msg::Model { dialect, body, reply: reply_tx }).is_err() {
        return gone(token);
    }
    match reply_rx.await {
        Ok(r) => reply(r),
        Err(_) => gone(token),
    }
}

async fn chat(State(s): State<Sessions>, Path(token): Path<String>, body: Bytes) -> Response {
    model(&s, &token, Dialect::Chat, &body).await
}

async fn responses(State(s): State<Sessions>, Path(token): Path<String>, body: Bytes) -> Response {
    model(&s, &token, Dialect::Responses, &body).await
}

async fn messages(State(s): State<Sessions>, Path(token): Path<String>, body: Bytes) -> Response {
    model(&s, &token, Dialect::Messages, &body).await
}

/// The one model replay serves, in the shape of the API that asked (Anthropic's
/// clients send `anthropic-version`).
async fn models(State(s): State<Sessions>, Path(token): Path<String>, headers: HeaderMap) -> Response {
    if session(&s, &token).is_none() {
        return gone(&token);
    }
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
async fn list_tools(State(s): State<Sessions>, Path(token): Path<String>) -> Response {
    match list(&s, &token).await {
        Some(tools) => axum::Json(json!({"tools": tools})).into_response(),
        None => gone(&token),
    }
}

pub(crate) async fn list(sessions: &Sessions, token: &str) -> Option<Vec<Value>> {
    let tx = session(sessions, token)?;
    let (reply_tx, reply_rx) = oneshot::channel();
    tx.send(Msg::ListTools { reply: reply_tx }).ok()?;
    reply_rx.await.ok()
}

pub(crate) async fn call(sessions: &Sessions, token: &str, name: String, args: Value) -> Option<ToolAnswer> {
    let tx = session(sessions, token)?;
    let (reply_tx, reply_rx) = oneshot::channel();
    tx.send(Msg::CallTool { name, args, reply: reply_tx }).ok()?;
    reply_rx.await.ok()
}

/// `POST STATEVAL_TOOLS_URL/{name}` with the arguments as the body.
async fn call_tool(State(s): State<Sessions>, Path((token, name)): Path<(String, String)>, body: Bytes) -> Response {
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
    match call(&s, &token, name, args).await {
        Some(answer) => {
            let mut body = json!({"result": answer.result, "is_error": answer.is_error});
            if let Some(protocol) = &answer.protocol_error {
                body["protocol_error"] = protocol.to_value();
            }
            axum::Json(body).into_response()
        }
        None => gone(&token),
    }
}

/// Anything else: the session is told (an agent calling an endpoint stateval does not
/// serve fails its case, never silently), and the agent gets a 404.
async fn unserved(State(s): State<Sessions>, method: Method, uri: Uri) -> Response {
    let path = uri.path().to_string();
    let mut parts = path.trim_start_matches('/').splitn(3, '/');
    if let (Some("r"), Some(token), rest) = (parts.next(), parts.next(), parts.next())
        && let Some(tx) = session(&s, token)
    {
        let _ = tx.send(Msg::Unserved { method: method.to_string(), path: format!("/{}", rest.unwrap_or_default()) });
    }
    let body = json!({"error": {"message": format!("stateval does not serve {method} {path}"),
                                "type": "invalid_request_error", "code": "stateval_unserved_endpoint"}});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}
