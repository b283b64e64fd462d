//! Inspect AI eval logs in their JSON form (`inspect log convert --to json`); the
//! `.eval` archive Inspect writes by default is opened by [`super::inspect_eval`] and
//! its samples read here.
//!
//! A log holds samples, each its own conversation: `samples[].messages`, Inspect's
//! chat messages — `system`, `user`, `assistant` (`content` a string or parts,
//! `tool_calls [{id, function, arguments}]` with `function` the tool's name and
//! `arguments` an object) and `tool` (`tool_call_id`, `content`, and `error {type,
//! message}` when the call failed). One sample is one trace: a log with several is
//! refused with their ids unless `--trace-id` names one (`ID`, or `ID:EPOCH` when a
//! sample ran several epochs). The messages are read as Chat Completions messages
//! once their tool calls are put in that shape, and a tool message's `error` marks
//! its call failed (a tool error), with the error's type kept as provenance.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::source::Source;
use super::trace::{ErrorKind, Ptr, str_field};
use crate::diag::InputError;

/// Is `src` an Inspect log with samples?
pub fn detect(src: &Source) -> bool {
    let [doc] = src.docs.as_slice() else { return false };
    doc.value.get("eval").is_some() && doc.value.get("samples").is_some_and(Value::is_array)
}

/// The sample's messages as a Chat Completions request body, where it is, and the
/// errors of its tool messages by call id.
pub struct Sample {
    pub key: String,
    pub at: Ptr,
    pub body: Value,
    pub errors: BTreeMap<String, Value>,
}

/// A sample's key: its id, with the epoch when the id alone is not unique.
pub fn keys(samples: &[Value]) -> Vec<String> {
    let id = |s: &Value| match s.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "?".into(),
    };
    let ids: Vec<String> = samples.iter().map(id).collect();
    samples
        .iter()
        .zip(&ids)
        .map(|(s, i)| {
            if ids.iter().filter(|j| *j == i).count() > 1 {
                format!("{i}:{}", s.get("epoch").and_then(Value::as_u64).unwrap_or(1))
            } else {
                i.clone()
            }
        })
        .collect()
}

/// The one sample to import: the only one, or the one `wanted` names.
pub fn sample(src: &Source, wanted: Option<&str>) -> Result<Sample, InputError> {
    let samples = src.docs[0].value.get("samples").and_then(Value::as_array).cloned().unwrap_or_default();
    let keys = keys(&samples);
    let i = pick(&keys, wanted).map_err(|message| src.error(0, "/samples", message))?;
    let model = src.docs[0].value.pointer("/eval/model").cloned().unwrap_or(Value::Null);
    Ok(convert(&samples[i], keys[i].clone(), Ptr::new(0, format!("/samples/{i}")), model))
}

/// Which of the samples with `keys` to import: the only one, or the one `wanted` names;
/// else why not.
pub fn pick(keys: &[String], wanted: Option<&str>) -> Result<usize, String> {
    let index = match (wanted, keys.len()) {
        (_, 0) => return Err("this Inspect AI log has no samples: nothing to import".into()),
        (Some(w), _) => keys.iter().position(|k| k == w || k.split(':').next() == Some(w) && !k.contains(':')),
        (None, 1) => Some(0),
        (None, n) => {
            return Err(format!(
                "this Inspect AI log holds {n} samples ({}): each is its own conversation; pass --trace-id SAMPLE \
                 to import one, or -o DIR/ to write one log per sample",
                keys.join(", ")
            ));
        }
    };
    index.ok_or_else(|| {
        format!("no sample \"{}\" in this Inspect AI log; its samples: {}", wanted.unwrap_or(""), keys.join(", "))
    })
}

/// One sample (`s`, at `at`) as Chat messages; `model` is the log's `eval.model`.
pub fn convert(s: &Value, key: String, at: Ptr, model: Value) -> Sample {
    let mut errors = BTreeMap::new();
    let messages: Vec<Value> = s
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| {
            let mut m = m.clone();
            if let Some(Value::Array(calls)) = m.get("tool_calls").cloned() {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|c| {
                        let arguments = match c.get("arguments") {
                            Some(Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                            None => String::new(),
                        };
                        json!({"id": c.get("id"), "type": "function",
                               "function": {"name": c.get("function"), "arguments": arguments}})
                    })
                    .collect();
                m["tool_calls"] = Value::Array(calls);
            }
            if str_field(&m, "role") == Some("tool") {
                if let (Some(id), Some(error)) =
                    (str_field(&m, "tool_call_id"), m.get("error").filter(|e| !e.is_null()))
                {
                    errors.insert(id.to_string(), error.clone());
                }
                if let Some(obj) = m.as_object_mut() {
                    obj.remove("error");
                    obj.remove("function");
                }
            }
            // Inspect's own fields the Chat shape does not have
            if let Some(obj) = m.as_object_mut() {
                for key in ["source", "id", "metadata", "internal", "model", "stop_reason"] {
                    obj.remove(key);
                }
            }
            m
        })
        .collect();
    Sample { key, at, body: json!({"model": model, "messages": messages}), errors }
}

/// The sample keys of a log, for `-o DIR/`.
pub fn sample_keys(src: &Source) -> Vec<String> {
    keys(src.docs[0].value.get("samples").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]))
}

/// The kind an Inspect tool error is imported as.
pub const ERROR_KIND: ErrorKind = ErrorKind::Tool;
