//! The trace envelope of docs/metrics.md §1.
//!
//! ```json
//! {"tool_calls": [{"name": "search", "server": "docs", "args": {"q": "a"}}],
//!  "conversation": {"tokens": {"total": 3000},
//!                   "turns": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]}}
//! ```
//!
//! Read as docs/metrics.md §1 reads it — calls under `tool_calls` or `trace.tool_calls`,
//! `arguments` (a JSON string or object) as an alias of `args`, a bare string as a call
//! with that name, turn `content` as a string or `{"type": "text", "text"}` blocks —
//! plus four optional call fields an exporter can add to make the envelope replayable:
//! `id`, `turn` (the 0-based user turn the call belongs to), `result` and `is_error`.
//!
//! `conversation.turns` gives the user turns (role `user`), the model's answers
//! (`assistant`) and instructions (`system`); any other role is an error. The envelope
//! does not group calls into model responses: each call is one response (its text
//! absent) placed before its turn's answer. A call without `turn` goes to the last turn,
//! with a warning; a call without `result` / `is_error` has them absent.

use serde_json::{Value, json};

use super::Format;
use super::builder::Builder;
use super::source::Source;
use super::trace::{Args, Call, CallResult, Content, ErrorKind, Ptr, Step, Trace, provenance, str_field};
use crate::diag::{InputError, did_you_mean};

const READS: &str =
    "stateval trace envelope (docs/metrics.md §1), with optional call fields id, turn, result, is_error";
const ROLES: [&str; 3] = ["user", "assistant", "system"];

/// One user turn of the envelope: its input and the model's answers.
struct Segment {
    input: Option<(String, Ptr)>,
    answers: Vec<(String, Ptr)>,
    calls: Vec<Call>,
}

pub fn parse(src: &Source) -> Result<Trace, InputError> {
    let mut b = Builder::new(src, Format::Envelope, READS);
    let [doc] = src.docs.as_slice() else {
        return Err(src.error(1, "", "a trace envelope is one JSON object; this file has several documents"));
    };
    let root = &doc.value;
    if !root.is_object() {
        return Err(src.error(0, "", "a trace envelope is a JSON object"));
    }
    let (base, envelope) = match root.get("trace") {
        Some(t) if root.get("tool_calls").is_none() && root.get("conversation").is_none() => ("/trace", t),
        _ => ("", root),
    };
    let mut segments = conversation(&mut b, base, envelope)?;
    if let Some(total) = envelope.pointer("/conversation/tokens/total") {
        b.meta("total_tokens", total.clone());
    }
    let mut unplaced = 0;
    match envelope.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (i, entry) in calls.iter().enumerate() {
                let at = Ptr::new(0, format!("{base}/tool_calls/{i}"));
                let (call, turn) = read_call(&b, &at, entry)?;
                let last = segments.len() - 1;
                let index = match turn {
                    Some(t) if t <= last => t,
                    Some(t) => {
                        return Err(b.error(
                            &at.join("/turn"),
                            format!("call is in turn {t} but the conversation has {} user turn(s)", last + 1),
                        ));
                    }
                    None => {
                        unplaced += 1;
                        last
                    }
                };
                segments[index].calls.push(call);
            }
        }
        Some(_) => return Err(b.error(&Ptr::new(0, format!("{base}/tool_calls")), "\"tool_calls\" must be an array")),
    }
    if unplaced > 0 {
        let w = b.warning(
            "call_turn_unknown",
            &Ptr::new(0, format!("{base}/tool_calls")),
            format!(
                "the envelope does not say which turn {unplaced} tool call(s) belong to: they are placed in the last \
                 turn ({}), before its answer",
                segments.len() - 1
            ),
        );
        b.warn_trace(w);
    }
    for segment in segments {
        if let Some((text, at)) = &segment.input {
            b.user(Content::Text(text.clone()), provenance([("turn", Some(json!(at.pointer)))]), None, at);
        }
        for call in segment.calls {
            let mut step = Step::new(Content::Absent, call.at.clone());
            step.calls.push(call);
            b.step(step)?;
        }
        for (text, at) in segment.answers {
            b.step(Step::new(Content::Text(text), at))?;
        }
    }
    b.finish()
}

/// `conversation.turns` → user turns with their answers (one segment with no input
/// when the conversation starts with, or only has, the model's side).
fn conversation(b: &mut Builder, base: &str, envelope: &Value) -> Result<Vec<Segment>, InputError> {
    let mut segments = vec![Segment { input: None, answers: Vec::new(), calls: Vec::new() }];
    let turns = match envelope.pointer("/conversation/turns") {
        None | Some(Value::Null) => return Ok(segments),
        Some(Value::Array(turns)) => turns,
        Some(_) => {
            return Err(b.error(&Ptr::new(0, format!("{base}/conversation/turns")), "\"turns\" must be an array"));
        }
    };
    for (i, turn) in turns.iter().enumerate() {
        let at = Ptr::new(0, format!("{base}/conversation/turns/{i}"));
        let role = str_field(turn, "role").ok_or_else(|| b.error(&at, "turn has no \"role\""))?;
        let text = content_text(b, &at, turn.get("content"))?;
        match role {
            "user" => {
                let fresh = segments.len() == 1 && segments[0].input.is_none() && segments[0].answers.is_empty();
                if !fresh {
                    segments.push(Segment { input: None, answers: Vec::new(), calls: Vec::new() });
                }
                if let Some(last) = segments.last_mut() {
                    last.input = Some((text, at));
                }
            }
            "assistant" => {
                if let Some(last) = segments.last_mut() {
                    last.answers.push((text, at));
                }
            }
            "system" => b.system(text),
            other => {
                let hint = did_you_mean(other, ROLES).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
                return Err(b.error(
                    &at.join("/role"),
                    format!("unknown role \"{other}\"{hint}; envelope turn roles are {}", ROLES.join(", ")),
                ));
            }
        }
    }
    Ok(segments)
}

/// A string, or the concatenated text of `{"type": "text", "text"}` blocks.
fn content_text(b: &mut Builder, at: &Ptr, content: Option<&Value>) -> Result<String, InputError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(blocks)) => {
            let mut text = String::new();
            for (i, block) in blocks.iter().enumerate() {
                match (str_field(block, "type"), str_field(block, "text")) {
                    (Some("text"), Some(t)) => text.push_str(t),
                    (kind, _) => {
                        let w = b.warning(
                            "unsupported_part",
                            &at.join(format!("/content/{i}")),
                            format!("a \"{}\" content block is not imported", kind.unwrap_or("untyped")),
                        );
                        b.warn_trace(w);
                    }
                }
            }
            Ok(text)
        }
        Some(_) => Err(b.error(&at.join("/content"), "\"content\" must be a string or an array of text blocks")),
    }
}

fn read_call(b: &Builder, at: &Ptr, entry: &Value) -> Result<(Call, Option<usize>), InputError> {
    if let Value::String(name) = entry {
        return Ok((Call::new(None, name.clone(), Args::Absent, at.clone()), None));
    }
    if !entry.is_object() {
        return Err(b.error(at, "a tool call is an object or a tool name"));
    }
    let name = str_field(entry, "name").ok_or_else(|| b.error(at, "tool call has no \"name\""))?;
    let args = entry.get("args").or_else(|| entry.get("arguments")).map_or(Args::Absent, Args::from_value);
    let id = match entry.get("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(b.error(&at.join("/id"), "\"id\" must be a string")),
    };
    let turn = match entry.get("turn") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|t| usize::try_from(t).ok())
                .ok_or_else(|| b.error(&at.join("/turn"), "\"turn\" must be a non-negative integer"))?,
        ),
    };
    let mut call = Call::new(id, name, args, at.clone());
    call.source = provenance([("server", entry.get("server").cloned())]);
    let result = entry.get("result").cloned();
    let is_error = entry.get("is_error").and_then(Value::as_bool);
    if result.is_some() || is_error.is_some() {
        call.outcome = Some(CallResult {
            result: result.filter(|r| !r.is_null()),
            is_error,
            error_kind: (is_error == Some(true)).then_some(ErrorKind::Tool),
            ..CallResult::default()
        });
    }
    Ok((call, turn))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse_text(text: &str) -> Result<Trace, InputError> {
        let src = Source::parse(Path::new("env.json"), text)?;
        parse(&src)
    }

    #[test]
    fn calls_go_to_their_turn_before_its_answer() {
        let trace = parse_text(
            r#"{"tool_calls":[{"name":"search","args":{"q":"a"},"turn":0,"result":{"hits":1}},
                              {"name":"fetch","arguments":"{\"url\":\"u\"}","turn":1,"is_error":true}],
                "conversation":{"turns":[{"role":"user","content":"find a"},{"role":"assistant","content":"found"},
                                         {"role":"user","content":"open it"},{"role":"assistant","content":"failed"}]}}"#,
        )
        .unwrap();
        assert_eq!(trace.turns.len(), 2);
        assert_eq!(trace.turns[1].steps[0].calls[0].name, "fetch");
        assert_eq!(trace.turns[1].steps[1].content, Content::Text("failed".into()));
        assert!(trace.warnings.is_empty(), "{:?}", trace.warnings);
    }

    #[test]
    fn an_unknown_role_is_an_error() {
        let err = parse_text(r#"{"conversation":{"turns":[{"role":"robot","content":"x"}]}}"#).unwrap_err();
        assert!(err.message.contains("unknown role \"robot\""), "{err}");
    }
}
