//! The turn protocol between stateval and an external agent: JSON Lines on the agent's
//! stdin and stdout.
//!
//! stateval sends `start`, one `turn` per user turn, and `end`; the agent answers each
//! turn with a `turn_result` carrying the same turn number, and exits 0 after `end`.
//! Stdout belongs to the protocol: any other line on it is an error, so an agent logs
//! to stderr.

use serde_json::{Value, json};

/// The protocol version sent in `start`.
pub const VERSION: u32 = 1;

pub fn start(case: &str, run: usize) -> String {
    line(&json!({"type": "start", "protocol": VERSION, "case": case, "run": run}))
}

pub fn turn(turn: u32, input: &str) -> String {
    line(&json!({"type": "turn", "turn": turn, "input": input}))
}

pub fn end() -> String {
    line(&json!({"type": "end"}))
}

fn line(value: &Value) -> String {
    let mut text = value.to_string();
    text.push('\n');
    text
}

/// A line the agent wrote on stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromAgent {
    TurnResult { turn: u32, output: String },
}

/// Read one stdout line; the error says what was wrong with it, for the case's reason.
pub fn parse(line: &str) -> Result<FromAgent, String> {
    let shown = shorten(line);
    let value: Value = serde_json::from_str(line).map_err(|e| format!("stdout line is not JSON ({e}): {shown}"))?;
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return Err(format!("stdout line has no \"type\": {shown}"));
    };
    match kind {
        "turn_result" => {
            let turn = value
                .get("turn")
                .and_then(Value::as_u64)
                .and_then(|t| u32::try_from(t).ok())
                .ok_or_else(|| format!("turn_result needs an integer \"turn\": {shown}"))?;
            let output = value
                .get("output")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("turn_result needs a string \"output\": {shown}"))?;
            Ok(FromAgent::TurnResult { turn, output: output.to_string() })
        }
        other => Err(format!("unknown message type {other:?} on stdout (expected \"turn_result\"): {shown}")),
    }
}

/// At most 200 characters of an agent's line, for messages.
fn shorten(line: &str) -> String {
    const MAX: usize = 200;
    match line.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_to_the_agent_are_one_json_line_each() {
        assert_eq!(start("c-1", 2), "{\"case\":\"c-1\",\"protocol\":1,\"run\":2,\"type\":\"start\"}\n");
        assert_eq!(turn(3, "hi\nthere"), "{\"input\":\"hi\\nthere\",\"turn\":3,\"type\":\"turn\"}\n");
        assert_eq!(end(), "{\"type\":\"end\"}\n");
    }

    #[test]
    fn a_turn_result_is_read_and_anything_else_is_named() {
        assert_eq!(
            parse(r#"{"type":"turn_result","turn":0,"output":"ok"}"#),
            Ok(FromAgent::TurnResult { turn: 0, output: "ok".into() })
        );
        assert!(parse("hello").unwrap_err().contains("not JSON"));
        assert!(parse(r#"{"turn":0}"#).unwrap_err().contains("no \"type\""));
        assert!(parse(r#"{"type":"turn_result","turn":"0","output":"x"}"#).unwrap_err().contains("integer \"turn\""));
        assert!(parse(r#"{"type":"log","msg":"x"}"#).unwrap_err().contains("unknown message type \"log\""));
    }
}
