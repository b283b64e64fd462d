//! The turn protocol between stateval and an external agent: JSON Lines, stateval's on
//! the agent's stdin, the agent's on its protocol fd or on stdout.
//!
//! stateval sends `start`, one `turn` per user turn, and `end`; the agent answers each
//! turn with a `turn_result` carrying the same turn number, and exits 0 after `end`.
//! Every line on the protocol fd is protocol, so a malformed one is an error. Stdout is
//! the fallback channel of simple agents, shared with whatever libraries print: there a
//! line is protocol only when it is a `turn_result` object ([`on_stdout`]), and only
//! until the fd has carried a line (the session decides that); anything else is the
//! agent's output, kept beside its stderr.

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

/// A protocol line from the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromAgent {
    TurnResult { turn: u32, output: String },
}

/// Where a protocol line was read, as its error messages name it.
pub const FD_LINE: &str = "line on the protocol fd";
pub const STDOUT_LINE: &str = "stdout line";

/// Whether a stdout line is meant as protocol: a JSON object whose `type` is a message
/// the agent may send. Anything else there (a library's banner, its JSON logs) is
/// output.
pub fn on_stdout(line: &str) -> bool {
    // cheap refusal first: most output is not a JSON object at all
    line.trim_start().starts_with('{')
        && serde_json::from_str::<Value>(line)
            .is_ok_and(|v| v.get("type").and_then(Value::as_str) == Some("turn_result"))
}

/// Read one protocol line (`source` is [`FD_LINE`] or [`STDOUT_LINE`]); the error says
/// what was wrong with it, for the case's reason.
pub fn parse(line: &str, source: &str) -> Result<FromAgent, String> {
    let shown = shorten(line);
    let value: Value = serde_json::from_str(line).map_err(|e| format!("{source} is not JSON ({e}): {shown}"))?;
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return Err(format!("{source} has no \"type\": {shown}"));
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
        other => Err(format!("{source} has unknown message type {other:?} (expected \"turn_result\"): {shown}")),
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
            parse(r#"{"type":"turn_result","turn":0,"output":"ok"}"#, FD_LINE),
            Ok(FromAgent::TurnResult { turn: 0, output: "ok".into() })
        );
        assert!(parse("hello", FD_LINE).unwrap_err().starts_with("line on the protocol fd is not JSON"));
        assert!(parse(r#"{"turn":0}"#, FD_LINE).unwrap_err().contains("no \"type\""));
        let bad_turn = parse(r#"{"type":"turn_result","turn":"0","output":"x"}"#, STDOUT_LINE).unwrap_err();
        assert!(bad_turn.contains("integer \"turn\""), "{bad_turn}");
        assert!(parse(r#"{"type":"log","msg":"x"}"#, FD_LINE).unwrap_err().contains("unknown message type \"log\""));
    }

    #[test]
    fn on_stdout_only_a_turn_result_object_is_protocol() {
        assert!(on_stdout(r#"{"type":"turn_result","turn":0,"output":"ok"}"#));
        // malformed, but meant as protocol: parsed, so its error is reported
        assert!(on_stdout(r#" {"type":"turn_result","turn":"zero"}"#));
        for output in
            ["Warning: something", r#"{"type":"log","msg":"x"}"#, r#"{"level":"info"}"#, "[1, 2]", "{not json"]
        {
            assert!(!on_stdout(output), "{output}");
        }
    }
}
