//! The server against raw TCP clients: slow ones, and malformed MCP requests.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use super::*;

/// Limits short enough for a test, long enough for a loaded machine to send a request.
const SHORT: Limits = Limits { header_read: Duration::from_millis(400), body_read: Duration::from_millis(400) };

fn server_with_case() -> (Server, Credentials, Receiver<Msg>) {
    let server = Server::start_with(SHORT).unwrap();
    let credentials = Credentials::generate().unwrap();
    let (tx, rx) = channel();
    std::mem::forget(server.register(&credentials, tx));
    (server, credentials, rx)
}

fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    stream
}

/// Whether the server has closed (or answered on) the connection.
fn closed_or_answered(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 512];
    match stream.peek(&mut buf) {
        Ok(n) => n == 0 || buf.starts_with(b"HTTP/"),
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

/// Whether the server closes the connection within 5 s while the client keeps
/// sending a byte every 50 ms (whatever it answers first is read and passed over).
fn closes_while_trickling(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 512];
    (0..100).any(|_| {
        let _ = stream.write_all(b" ");
        std::thread::sleep(Duration::from_millis(50));
        match stream.read(&mut buf) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        }
    })
}

/// Send `request` whole; the status and the JSON body of the answer.
fn exchange(server: &Server, request: &str) -> (u16, Value) {
    let mut stream = connect(server);
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no answer: {text:?}"));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn mcp_post(server: &Server, token: &str, content_type: &str, body: &str) -> String {
    format!(
        "POST /r/{token}/mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        server.addr,
        body.len()
    )
}

#[test]
fn a_client_that_trickles_its_headers_is_dropped_at_the_header_timeout() {
    let (server, credentials, _rx) = server_with_case();
    let mut stream = connect(&server);
    stream.write_all(format!("GET /r/{}/tools HTTP/1.1\r\n", credentials.token).as_bytes()).unwrap();
    let started = Instant::now();
    // a header line every 50 ms, for at most 5 s: far longer than the 400 ms limit
    let dropped = (0..100).any(|i| {
        let _ = stream.write_all(format!("X-Slow-{i}: x\r\n").as_bytes());
        std::thread::sleep(Duration::from_millis(50));
        closed_or_answered(&stream)
    });
    assert!(dropped, "the server still waits for headers after {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(3), "dropped only after {:?}", started.elapsed());
}

#[test]
fn a_body_that_does_not_arrive_in_time_is_refused_and_fails_its_case() {
    let (server, credentials, rx) = server_with_case();
    let mut stream = connect(&server);
    let head = format!(
        "POST /r/{}/v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{",
        credentials.token, server.addr
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut answer = [0u8; 64];
    let n = stream.read(&mut answer).unwrap_or(0);
    assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 408"), "{:?}", &answer[..n]);
    match rx.recv_timeout(Duration::from_secs(1)) {
        Ok(Msg::SlowBody { request, limit_ms }) => {
            assert_eq!((request.as_str(), limit_ms), ("POST /r/…/v1/chat/completions", 400));
        }
        _ => panic!("the case run was not told"),
    }
    // and the connection is dropped, not drained at the client's pace
    stream.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    assert!(closes_while_trickling(&mut stream), "the connection stays open after the 408");
}

#[test]
fn malformed_mcp_requests_get_400_with_a_json_rpc_error() {
    let (server, credentials, _rx) = server_with_case();
    let token = &credentials.token;
    for (content_type, body, code) in [
        ("application/json", "not json", -32700),
        ("text/plain", r#"{"jsonrpc": "2.0", "id": 1, "method": "ping"}"#, -32600),
        ("application/json", r#"{"hello": "world"}"#, -32600),
        ("application/json", "[]", -32600),
    ] {
        let (status, answer) = exchange(&server, &mcp_post(&server, token, content_type, body));
        assert_eq!(status, 400, "{content_type} {body}: {answer}");
        assert_eq!((answer["jsonrpc"].as_str(), answer["id"].clone()), (Some("2.0"), Value::Null), "{answer}");
        assert_eq!(answer["error"]["code"], code, "{content_type} {body}: {answer}");
    }
    // a well-formed one still reaches rmcp
    let initialize = r#"{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}"#;
    let (status, _) = exchange(&server, &mcp_post(&server, token, "application/json", initialize));
    assert_eq!(status, 200);
}
