//! Fixture tools over MCP, with the official Rust SDK (`rmcp`).
//!
//! Streamable HTTP at `STATEVAL_MCP_URL` (`/r/TOKEN/mcp`): `tools/list` serves the
//! manifest's offered tools and `tools/call` goes to the case run's session, through the
//! same tool boundary as the built-in runtime. A fixture's tool error is a result with
//! `isError: true`; a fixture response with a `protocol_error` is a JSON-RPC error
//! response with its code, message and data, as a server that never reached the tool
//! answers.
//!
//! `stateval mcp-stdio` is the same server on stdin/stdout for agents that only spawn
//! MCP servers: it runs inside the agent's process tree, reads `STATEVAL_TOOLS_URL` from
//! the environment it inherits, and forwards each call there, so its calls land in the
//! same session and the same log.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::mpsc::Sender;

use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use super::server::{Admitted, Msg, ToolAnswer};

fn info() -> ServerConfig {
    ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        .with_server_info(Implementation::new("stateval-fixtures", env!("CARGO_PKG_VERSION")))
}

/// `{"name", "description", "input_schema"}` → an MCP tool.
fn tool(value: &Value) -> Tool {
    let schema = match value.get("input_schema") {
        Some(Value::Object(o)) => o.clone(),
        _ => json!({"type": "object"}).as_object().cloned().unwrap_or_default(),
    };
    Tool::new(
        value.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
        value.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
        Arc::new(schema),
    )
}

/// A result as MCP content: a string as it is, anything else as JSON text (and as
/// structured content when it is an object).
fn result(answer: ToolAnswer) -> CallToolResult {
    let text = match &answer.result {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut r = if answer.is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    if answer.result.is_object() {
        r.structured_content = Some(answer.result);
    }
    r
}

/// A fixture's protocol error as the JSON-RPC error MCP answers with.
fn protocol(error: &crate::pipeline::manifest::ProtocolError) -> ErrorData {
    let code = i32::try_from(error.code).unwrap_or(rmcp::model::ErrorCode::INTERNAL_ERROR.0);
    ErrorData::new(rmcp::model::ErrorCode(code), error.message.clone(), error.data.clone())
}

/// The answer of `tools/call`: a result, or the fixture's protocol error.
fn respond(answer: ToolAnswer) -> Result<CallToolResponse, ErrorData> {
    match &answer.protocol_error {
        Some(error) => Err(protocol(error)),
        None => Ok(result(answer).into()),
    }
}

fn gone() -> ErrorData {
    ErrorData::invalid_request("stateval: no case run is in progress for this URL", None)
}

/// The handler behind `/r/TOKEN/mcp`.
#[derive(Clone)]
pub struct FixtureTools;

/// The case run the server's guard admitted this request to.
fn admitted(context: &RequestContext<RoleServer>) -> Option<Sender<Msg>> {
    let parts = context.extensions.get::<axum::http::request::Parts>()?;
    parts.extensions.get::<Admitted>().map(|a| a.0.clone())
}

impl ServerHandler for FixtureTools {
    fn get_info(&self) -> ServerConfig {
        info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tx = admitted(&context).ok_or_else(gone)?;
        let tools = super::server::list(&tx).await.ok_or_else(gone)?;
        Ok(ListToolsResult::with_all_items(tools.iter().map(tool).collect()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tx = admitted(&context).ok_or_else(gone)?;
        let args = request.arguments.map(Value::Object).unwrap_or_else(|| json!({}));
        let answer = super::server::call(&tx, request.name.to_string(), args).await.ok_or_else(gone)?;
        respond(answer)
    }
}

/// The streamable HTTP service mounted at `/r/{token}/mcp`.
pub fn service() -> StreamableHttpService<FixtureTools, LocalSessionManager> {
    StreamableHttpService::new(|| Ok(FixtureTools), Default::default(), StreamableHttpServerConfig::default())
}

/// A `POST` that is not a JSON-RPC message gets HTTP 400 with a JSON-RPC error before
/// rmcp sees it: rmcp answers a wrong content type with 415 and plain text, which an
/// MCP client cannot read as JSON-RPC. The error's `id` is null, as JSON-RPC 2.0 (§5)
/// asks when the request's id cannot be read. Codes: -32700 when the body is not JSON,
/// -32600 when it is not declared JSON or is not a JSON-RPC 2.0 message.
pub async fn reject_malformed(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let declared_json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or_default().trim().eq_ignore_ascii_case("application/json"));
    let (parts, body) = request.into_parts();
    // the server's guard has read the body into memory already: this is a copy
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => return malformed(-32700, &format!("the body could not be read: {e}")),
    };
    if !declared_json {
        return malformed(-32600, "Content-Type must be application/json");
    }
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return malformed(-32700, &format!("Parse error: {e}")),
    };
    if !is_json_rpc(&message) {
        return malformed(-32600, "Invalid Request: not a JSON-RPC 2.0 message");
    }
    next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

/// An object with `"jsonrpc": "2.0"`, or a non-empty batch of them; which method, and
/// whether it is well formed for it, is rmcp's to judge.
fn is_json_rpc(message: &Value) -> bool {
    let one = |m: &Value| m.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
    match message {
        Value::Array(batch) => !batch.is_empty() && batch.iter().all(one),
        other => one(other),
    }
}

fn malformed(code: i32, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// `stateval mcp-stdio`: forwards to the plain-HTTP tools of the case run whose
/// environment it inherited.
#[derive(Clone)]
struct StdioBridge {
    tools_url: String,
}

impl ServerHandler for StdioBridge {
    fn get_info(&self) -> ServerConfig {
        info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let url = self.tools_url.clone();
        let body = tokio::task::spawn_blocking(move || http(&url, None))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            .map_err(|e| ErrorData::internal_error(e, None))?;
        let tools = body.get("tools").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(ListToolsResult::with_all_items(tools.iter().map(tool).collect()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let url = format!("{}/{}", self.tools_url, request.name);
        let args = request.arguments.map(Value::Object).unwrap_or_else(|| json!({}));
        let body = tokio::task::spawn_blocking(move || http(&url, Some(&args)))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            .map_err(|e| ErrorData::internal_error(e, None))?;
        let answer = ToolAnswer {
            result: body.get("result").cloned().unwrap_or(Value::Null),
            is_error: body.get("is_error").and_then(Value::as_bool).unwrap_or(true),
            protocol_error: body.get("protocol_error").and_then(|p| serde_json::from_value(p.clone()).ok()),
        };
        respond(answer)
    }
}

/// Serve MCP on stdin/stdout until the client closes it.
pub fn serve_stdio() -> Result<(), String> {
    let tools_url = std::env::var("STATEVAL_TOOLS_URL").map_err(|_| {
        "STATEVAL_TOOLS_URL is not set: `stateval mcp-stdio` runs inside an agent that `stateval run` started"
            .to_string()
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let service =
            StdioBridge { tools_url }.serve(rmcp::transport::stdio()).await.map_err(|e| format!("mcp-stdio: {e}"))?;
        service.waiting().await.map_err(|e| format!("mcp-stdio: {e}"))?;
        Ok(())
    })
}

/// A minimal HTTP/1.1 exchange with stateval's own loopback server: GET, or POST a
/// JSON body; the JSON answer. (The server is ours and on 127.0.0.1, so no TLS,
/// redirects or proxies are ever involved.)
fn http(url: &str, body: Option<&Value>) -> Result<Value, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url}: expected an http:// URL"))?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(authority).map_err(|e| format!("{url}: {e}"))?;
    let payload = body.map(Value::to_string).unwrap_or_default();
    let method = if body.is_some() { "POST" } else { "GET" };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    );
    stream.write_all(request.as_bytes()).map_err(|e| format!("{url}: {e}"))?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(|e| format!("{url}: {e}"))?;
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| format!("{url}: no HTTP header"))?;
    let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
    let mut content = response[split + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        content = dechunk(&content).ok_or_else(|| format!("{url}: bad chunked body"))?;
    }
    let status = head.split_whitespace().nth(1).unwrap_or_default().to_string();
    if !status.starts_with('2') {
        return Err(format!("{url}: HTTP {status}: {}", String::from_utf8_lossy(&content)));
    }
    serde_json::from_slice(&content).map_err(|e| format!("{url}: the answer is not JSON: {e}"))
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_is_joined() {
        assert_eq!(dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap(), b"abcde");
        assert!(dechunk(b"5\r\nab").is_none());
    }

    #[test]
    fn a_result_is_text_content_and_objects_are_structured_too() {
        let r = result(ToolAnswer { result: json!({"a": 1}), is_error: false, protocol_error: None });
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"][0]["text"], "{\"a\":1}");
        assert_eq!(v["structuredContent"], json!({"a": 1}));
        let r = serde_json::to_value(result(ToolAnswer {
            result: json!("no such file"),
            is_error: true,
            protocol_error: None,
        }))
        .unwrap();
        assert_eq!((r["content"][0]["text"].as_str(), r["isError"].as_bool()), (Some("no such file"), Some(true)));
    }

    #[test]
    fn a_fixture_protocol_error_is_a_json_rpc_error_not_a_result() {
        let error = crate::pipeline::manifest::ProtocolError {
            code: -32602,
            message: "Unknown tool: rollback".into(),
            data: Some(json!({"tool": "rollback"})),
        };
        let answer = ToolAnswer { result: error.to_value(), is_error: true, protocol_error: Some(error) };
        let e = respond(answer).expect_err("a JSON-RPC error");
        assert_eq!((e.code.0, e.message.as_ref()), (-32602, "Unknown tool: rollback"));
        assert_eq!(e.data, Some(json!({"tool": "rollback"})));
        let ok = respond(ToolAnswer { result: json!("fine"), is_error: false, protocol_error: None });
        assert!(ok.is_ok());
    }
}
