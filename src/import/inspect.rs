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
    /// Calls known only by their function (below), with the message (its pointer in
    /// the sample) where each was given an id: said as warnings.
    pub by_function: Vec<(String, String)>,
}

/// A call of the sample as the messages went: its id in the source (none, or one an
/// earlier call already had), its function, the id it is imported under, answered yet.
struct Pending {
    source_id: Option<String>,
    function: String,
    id: String,
    answered: bool,
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
///
/// **A call known only by its function.** A call without an id, or with the id of an
/// earlier call (Inspect's browser tools under a provider that names a call by its
/// function, `web_browser_go` each time), is imported as `FUNCTION#N`; a tool message
/// whose `tool_call_id` is missing, or names such a call, is the result of the first
/// call of its `function` (else of that id) that has none yet, in order. Each is said in
/// [`Sample::by_function`]: attributed by order, not by id.
pub fn convert(s: &Value, key: String, at: Ptr, model: Value) -> Sample {
    let mut errors = BTreeMap::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut by_function = Vec::new();
    let messages: Vec<Value> = s
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, m)| {
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
                        let function = str_field(c, "function").unwrap_or("unnamed").to_string();
                        let source_id = str_field(c, "id").map(str::to_string);
                        let id = match &source_id {
                            Some(id) if !pending.iter().any(|p| &p.id == id || p.source_id.as_ref() == Some(id)) => {
                                id.clone()
                            }
                            _ => {
                                let n = (0..)
                                    .find(|n| !pending.iter().any(|p| p.id == format!("{function}#{n}")))
                                    .unwrap_or(0);
                                let id = format!("{function}#{n}");
                                let why = match &source_id {
                                    Some(s) => format!("the id \"{s}\" of an earlier call"),
                                    None => "no id".to_string(),
                                };
                                by_function.push((
                                    format!("/messages/{i}"),
                                    format!(
                                        "a call of {function} with {why}: imported as {id}, its result the next tool \
                                         message of {function} (attributed by order, not by id)"
                                    ),
                                ));
                                id
                            }
                        };
                        pending.push(Pending {
                            source_id,
                            function: function.clone(),
                            id: id.clone(),
                            answered: false,
                        });
                        json!({"id": id, "type": "function",
                               "function": {"name": function, "arguments": arguments}})
                    })
                    .collect();
                m["tool_calls"] = Value::Array(calls);
            }
            if str_field(&m, "role") == Some("tool") {
                let given = str_field(&m, "tool_call_id").map(str::to_string);
                let function = str_field(&m, "function").map(str::to_string);
                // the first unanswered call this message can be the result of: by its id
                // when that id is one call's own, else by its function, in order
                let exact = given.as_ref().filter(|g| pending.iter().any(|p| &p.id == *g && !p.answered));
                let target = match exact {
                    Some(g) => pending.iter_mut().find(|p| &p.id == g && !p.answered),
                    None => pending.iter_mut().find(|p| {
                        !p.answered
                            && match (&given, &function) {
                                (Some(g), _) if p.source_id.as_ref() == Some(g) => true,
                                (None, Some(f)) => &p.function == f,
                                _ => false,
                            }
                    }),
                };
                if let Some(p) = target {
                    p.answered = true;
                    if given.is_none() {
                        by_function.push((
                            format!("/messages/{i}"),
                            format!(
                                "a tool message of {} without tool_call_id: the result of {}, the first call of {} \
                                 still without a result (attributed by order, not by id)",
                                p.function, p.id, p.function
                            ),
                        ));
                    }
                    if given.as_deref() != Some(p.id.as_str()) {
                        m["tool_call_id"] = Value::String(p.id.clone());
                    }
                }
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
    Sample { key, at, body: json!({"model": model, "messages": messages}), errors, by_function }
}

/// The sample keys of a log, for `-o DIR/`.
pub fn sample_keys(src: &Source) -> Vec<String> {
    keys(src.docs[0].value.get("samples").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]))
}

/// The kind an Inspect tool error is imported as.
pub const ERROR_KIND: ErrorKind = ErrorKind::Tool;
