//! Recordings: recorded model responses, one per model call, in call order.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canon::{self, Context, Digest};
use crate::diag::{InputError, locate, parse_json_strict};
use crate::schemas::RECORDING_SCHEMA;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub id: Option<String>,
    pub name: String,
    #[serde(default = "empty_object")]
    pub args: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelResponse {
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// The agent's own confidence in this answer (predictability metrics).
    pub confidence: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedResponse {
    pub turn: Option<u32>,
    pub step: Option<u32>,
    pub request_hash: Option<Digest>,
    /// The request this response was recorded for: an external agent's dialect-neutral
    /// request (when the agent's request differs, the divergence names the JSON
    /// Pointers), or the built-in runtime's compiled document (`stateval record`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
    pub response: ModelResponse,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub latency_ms: u64,
}

/// One recorded run.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub responses: Vec<RecordedResponse>,
    /// Content digest over the canonical responses.
    pub digest: Digest,
    /// Where it came from: a path, or `inline`.
    pub source: String,
}

impl Recording {
    /// Read a JSONL recording file; every line is parsed strictly and schema-checked.
    pub fn load(path: &Path, display: &str) -> Result<Recording, InputError> {
        Self::load_file(path, display).map(|(recording, _)| recording)
    }

    /// [`Recording::load`], with the digest of the file's bytes, which
    /// [`Recording::reload`] checks.
    pub fn load_file(path: &Path, display: &str) -> Result<(Recording, Digest), InputError> {
        let bytes = std::fs::read(path)
            .map_err(|e| InputError::file(Path::new(display), format!("cannot read recording: {e}")))?;
        let digest = Self::bytes_digest(&bytes);
        Ok((Self::validate(bytes, display)?, digest))
    }

    /// The digest of a recording file's bytes, as [`Recording::load_file`] gives it and
    /// [`Recording::reload`] checks it.
    pub fn bytes_digest(bytes: &[u8]) -> Digest {
        canon::digest(Context::Content, bytes)
    }

    /// Parse, schema-check and digest the bytes of a recording file read from `display`.
    pub fn validate(bytes: Vec<u8>, display: &str) -> Result<Recording, InputError> {
        let text = String::from_utf8(bytes).map_err(|_| {
            InputError::file(Path::new(display), "cannot read recording: stream did not contain valid UTF-8")
        })?;
        let display_path = Path::new(display);
        let mut values = Vec::new();
        for (i, line) in crate::diag::strip_bom(&text).lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value =
                parse_json_strict(line).map_err(|(_, col, msg)| InputError::new(display_path, i + 1, col, msg))?;
            values.push(check_line(value, line).map_err(|(col, msg)| InputError::new(display_path, i + 1, col, msg))?);
        }
        Ok(Self::from_values(values, display.to_string()))
    }

    /// An inline recording (`{"responses": [...]}` in a dataset line). Errors give a
    /// column in `line_text`, the dataset line; `pointer` is where the object sits.
    pub fn inline(responses: &[Value], line_text: &str, pointer: &str) -> Result<Recording, (usize, String)> {
        let mut out = Vec::new();
        for (i, value) in responses.iter().enumerate() {
            let here = format!("{pointer}/responses/{i}");
            let parsed: RecordedResponse = serde_json::from_value(value.clone())
                .map_err(|e| (locate(line_text, &here), format!("recording response {i}: {e}")))?;
            out.push(parsed);
        }
        Ok(Self::from_values(out, "inline".into()))
    }

    /// Re-read a file that [`Recording::load_file`] already validated (the runner loads
    /// each recording only while its case runs, so memory does not grow with the suite).
    /// The file's bytes must still have the digest `bytes`; its content digest is then
    /// the validated one, `digest`, without canonicalising it again.
    pub fn reload(path: &Path, display: &str, digest: Digest, bytes: Digest) -> Result<Recording, String> {
        let text = std::fs::read(path).map_err(|e| format!("{display}: cannot read recording: {e}"))?;
        if Self::bytes_digest(&text) != bytes {
            return Err(format!("{display}: recording changed on disk after the run was validated"));
        }
        let text = String::from_utf8(text).map_err(|e| format!("{display}: changed since validation: {e}"))?;
        let mut responses = Vec::new();
        for (i, line) in crate::diag::strip_bom(&text).lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let parsed: RecordedResponse = serde_json::from_str(line)
                .map_err(|e| format!("{display}:{}: changed since validation: {e}", i + 1))?;
            responses.push(parsed);
        }
        Ok(Recording { responses, digest, source: display.to_string() })
    }

    fn from_values(responses: Vec<RecordedResponse>, source: String) -> Recording {
        let digest = match canonical_responses(&responses) {
            Some(bytes) => canon::digest(Context::Content, &bytes),
            None => canon::digest(Context::Content, source.as_bytes()),
        };
        Recording { responses, digest, source }
    }
}

/// The canonical bytes of `serde_json::to_value(responses)`, written from the typed
/// responses instead of through a `Value` tree (building and dropping that tree was most
/// of a recording's validation). `None` where that value has no canonical form (an
/// integer beyond ±(2^53−1)), as `canonical_digest` would fail. Keys are written in JCS
/// order, and every field the derived `Serialize` writes is written, so the bytes are
/// the same (`the_typed_canonical_bytes_are_those_of_the_serialised_value` checks it).
fn canonical_responses(responses: &[RecordedResponse]) -> Option<Vec<u8>> {
    fn number(out: &mut Vec<u8>, n: serde_json::Number) -> Option<()> {
        canon::write_canonical_number(out, &n).then_some(())
    }
    fn optional_u32(out: &mut Vec<u8>, n: Option<u32>) {
        match n {
            Some(n) => out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
            None => out.extend_from_slice(b"null"),
        }
    }
    let mut out = Vec::with_capacity(256 * responses.len() + 2);
    out.push(b'[');
    for (i, r) in responses.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // latency_ms < request < request_hash < response < step < turn < usage
        out.extend_from_slice(b"{\"latency_ms\":");
        number(&mut out, r.latency_ms.into())?;
        if let Some(request) = &r.request {
            out.extend_from_slice(b",\"request\":");
            canon::write_canonical(&mut out, request).ok()?;
        }
        out.extend_from_slice(b",\"request_hash\":");
        match &r.request_hash {
            Some(d) => canon::write_canonical_str(&mut out, &d.to_string()),
            None => out.extend_from_slice(b"null"),
        }
        // confidence < content < tool_calls
        out.extend_from_slice(b",\"response\":{\"confidence\":");
        match r.response.confidence.and_then(serde_json::Number::from_f64) {
            Some(n) => number(&mut out, n)?,
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"content\":");
        canon::write_canonical_str(&mut out, &r.response.content);
        out.extend_from_slice(b",\"tool_calls\":[");
        for (j, call) in r.response.tool_calls.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            // args < id < name
            out.extend_from_slice(b"{\"args\":");
            canon::write_canonical(&mut out, &call.args).ok()?;
            out.extend_from_slice(b",\"id\":");
            match &call.id {
                Some(id) => canon::write_canonical_str(&mut out, id),
                None => out.extend_from_slice(b"null"),
            }
            out.extend_from_slice(b",\"name\":");
            canon::write_canonical_str(&mut out, &call.name);
            out.push(b'}');
        }
        out.extend_from_slice(b"]},\"step\":");
        optional_u32(&mut out, r.step);
        out.extend_from_slice(b",\"turn\":");
        optional_u32(&mut out, r.turn);
        out.extend_from_slice(b",\"usage\":{\"input_tokens\":");
        number(&mut out, r.usage.input_tokens.into())?;
        out.extend_from_slice(b",\"output_tokens\":");
        number(&mut out, r.usage.output_tokens.into())?;
        out.extend_from_slice(b"}}");
    }
    out.push(b']');
    Some(out)
}

/// Schema-check and type one recording line; errors carry a 1-based column.
fn check_line(value: Value, line: &str) -> Result<RecordedResponse, (usize, String)> {
    if let Some(v) = RECORDING_SCHEMA.check(&value) {
        let col = crate::diag::line_col(line, locate(line, &v.pointer)).1;
        return Err((col, v.message));
    }
    canon::check_ijson(&value).map_err(|e| (1, e.to_string()))?;
    serde_json::from_value(value).map_err(|e| (1, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_line_with_an_unknown_field_names_its_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(
            &path,
            "{\"response\":{\"content\":\"hi\"}}\n{\"response\":{\"content\":\"x\"},\"latncy_ms\":3}\n",
        )
        .unwrap();
        let err = Recording::load(&path, "r.jsonl").unwrap_err();
        assert_eq!((err.line, err.column), (2, 29), "{err}");
        assert!(err.message.contains("did you mean \"latency_ms\""), "{err}");
    }

    #[test]
    fn a_recording_starting_with_a_byte_order_mark_loads_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, "\u{feff}{\"response\":{\"content\":\"a\"}}\n").unwrap();
        let (rec, bytes) = Recording::load_file(&path, "r.jsonl").unwrap();
        assert_eq!(rec.responses.len(), 1);
        let again = Recording::reload(&path, "r.jsonl", rec.digest, bytes).unwrap();
        assert_eq!(again.responses, rec.responses);
    }

    #[test]
    fn the_typed_canonical_bytes_are_those_of_the_serialised_value() {
        let lines = [
            r#"{"response":{"content":"a"}}"#,
            r#"{"turn":0,"step":1,"latency_ms":12,"usage":{"input_tokens":3,"output_tokens":9007199254740991},
               "request_hash":"blake3:0000000000000000000000000000000000000000000000000000000000000000",
               "request":{"z":[1,2.5,-0.0,1e21,"\u0001é\u2028"],"a":{"y":null,"b":true}},
               "response":{"content":"q\"\\\n\t\u007f😀","confidence":0.1,
                 "tool_calls":[{"name":"t","id":"c-1","args":{"b":[{}],"a":1.5e-7}},{"name":"u"}]}}"#,
            r#"{"response":{"content":"","confidence":1.0,"tool_calls":[]},"request":null}"#,
            r#"{"response":{"confidence":-3e300}}"#,
        ];
        let responses: Vec<RecordedResponse> =
            lines.iter().map(|l| serde_json::from_str(&l.replace('\n', "")).unwrap()).collect();
        for n in 0..=responses.len() {
            let value = serde_json::to_value(&responses[..n]).unwrap();
            let typed = canonical_responses(&responses[..n]).unwrap();
            assert_eq!(String::from_utf8(typed).unwrap(), canon::to_canonical_string(&value).unwrap());
        }
        // no canonical form (an unsafe integer in the arguments or a count): none here either
        let mut unsafe_args = responses[0].clone();
        unsafe_args.response.tool_calls =
            vec![ToolCall { id: None, name: "t".into(), args: serde_json::json!({"n": 1u64 << 60}) }];
        assert!(canonical_responses(&[unsafe_args]).is_none());
        let mut unsafe_count = responses[0].clone();
        unsafe_count.latency_ms = 1 << 60;
        assert!(canonical_responses(&[unsafe_count.clone()]).is_none());
        assert!(canon::canonical_digest(Context::Content, &serde_json::to_value([unsafe_count]).unwrap()).is_err());
    }

    #[test]
    fn a_valid_recording_loads_in_order_with_a_stable_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(
            &path,
            "{\"response\":{\"content\":\"a\"}}\n\n{\"response\":{\"tool_calls\":[{\"name\":\"t\"}]}}\n",
        )
        .unwrap();
        let a = Recording::load(&path, "r.jsonl").unwrap();
        let b = Recording::load(&path, "r.jsonl").unwrap();
        assert_eq!(a.responses.len(), 2);
        assert_eq!(a.responses[1].response.tool_calls[0].args, serde_json::json!({}));
        assert_eq!(a.digest, b.digest);
    }
}
