//! Span exports other than OTLP/JSON, read into the same [`Span`]s.
//!
//! Tracing backends export what they stored in their own JSON:
//!
//! - **Jaeger** (the UI's "Download JSON", the query API): `{"data": [{"traceID",
//!   "spans": [{"traceID", "spanID", "operationName", "startTime" µs, "duration" µs,
//!   "tags": [{"key", "type", "value"}], "logs": [{"timestamp", "fields"}]}]}]}`; the
//!   `otel.status_code` / `error` tags give the status;
//! - **Zipkin v2** (`/api/v2/trace/{id}`, or a list of traces): `[{"traceId", "id",
//!   "name", "timestamp" µs, "duration" µs, "tags": {"k": "v"}, "annotations"}]`.
//!
//! Their attribute values are plain (Zipkin's are all strings); the GenAI readers see
//! the same keys as in OTLP, so every dialect of the parent module is read from them.

use serde_json::{Map, Value};

use super::otlp::{Otlp, Record, Span};
use crate::import::source::Source;
use crate::import::trace::{Ptr, as_u64_lenient, str_field};

/// Is `v` a Jaeger export?
pub fn is_jaeger(v: &Value) -> bool {
    v.get("data")
        .and_then(Value::as_array)
        .is_some_and(|d| d.iter().any(|t| t.get("spans").is_some_and(Value::is_array) && t.get("traceID").is_some()))
}

/// Is `v` a Zipkin v2 span list (or a list of traces, each a span list)?
pub fn is_zipkin(v: &Value) -> bool {
    let span = |s: &Value| s.get("traceId").is_some() && s.get("id").is_some() && s.get("resourceSpans").is_none();
    match v.as_array().and_then(|a| a.first()) {
        Some(Value::Array(trace)) => trace.first().is_some_and(span),
        Some(first) => span(first),
        None => false,
    }
}

/// Spans of a Jaeger or Zipkin document `doc` of `src`, added to `out`.
pub fn collect(src: &Source, doc: usize, out: &mut Otlp) -> bool {
    let v = &src.docs[doc].value;
    if is_jaeger(v) {
        for (t, trace) in v["data"].as_array().into_iter().flatten().enumerate() {
            for (i, s) in trace.get("spans").and_then(Value::as_array).into_iter().flatten().enumerate() {
                out.spans.push(jaeger_span(doc, &format!("/data/{t}/spans/{i}"), s));
            }
        }
        return true;
    }
    if is_zipkin(v) {
        for (i, item) in v.as_array().into_iter().flatten().enumerate() {
            match item {
                Value::Array(trace) => {
                    for (j, s) in trace.iter().enumerate() {
                        out.spans.push(zipkin_span(doc, &format!("/{i}/{j}"), s));
                    }
                }
                s => out.spans.push(zipkin_span(doc, &format!("/{i}"), s)),
            }
        }
        return true;
    }
    false
}

/// A tag's value as JSON: strings that hold JSON stay strings (the readers parse them).
fn tag_value(tag: &Value) -> Value {
    tag.get("value").cloned().unwrap_or(Value::Null)
}

fn status(attrs: &Map<String, Value>) -> (bool, Option<String>) {
    let code = attrs.get("otel.status_code").and_then(Value::as_str);
    let error = code == Some("ERROR") || attrs.get("error").is_some_and(|e| e == &Value::Bool(true) || e == "true");
    let message = attrs.get("otel.status_description").and_then(Value::as_str).map(str::to_string);
    (error, message)
}

fn jaeger_span(doc: usize, pointer: &str, s: &Value) -> Span {
    let mut attrs = Map::new();
    let mut attr_at = Map::new();
    for (i, tag) in s.get("tags").and_then(Value::as_array).into_iter().flatten().enumerate() {
        if let Some(key) = str_field(tag, "key") {
            attrs.insert(key.to_string(), tag_value(tag));
            attr_at.insert(key.to_string(), Value::String(format!("{pointer}/tags/{i}/value")));
        }
    }
    let start = s.get("startTime").and_then(as_u64_lenient).unwrap_or(0) * 1_000;
    let duration = s.get("duration").and_then(as_u64_lenient).unwrap_or(0) * 1_000;
    let events = s
        .get("logs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, log)| {
            let fields: Map<String, Value> = log
                .get("fields")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|f| Some((str_field(f, "key")?.to_string(), tag_value(f))))
                .collect();
            let name = fields.get("event").and_then(Value::as_str).unwrap_or_default().to_string();
            Record {
                at: Ptr::new(doc, format!("{pointer}/logs/{i}")),
                name,
                time: log.get("timestamp").and_then(as_u64_lenient).unwrap_or(0) * 1_000,
                fields,
                span_id: None,
                trace_id: None,
            }
        })
        .collect();
    let (error, status_message) = status(&attrs);
    Span {
        at: Ptr::new(doc, pointer),
        trace_id: str_field(s, "traceID").unwrap_or_default().to_string(),
        span_id: str_field(s, "spanID").unwrap_or_default().to_string(),
        name: str_field(s, "operationName").unwrap_or_default().to_string(),
        start,
        end: start + duration,
        attrs,
        attr_at,
        events,
        error,
        status_message,
    }
}

fn zipkin_span(doc: usize, pointer: &str, s: &Value) -> Span {
    let mut attrs = Map::new();
    let mut attr_at = Map::new();
    for (key, value) in s.get("tags").and_then(Value::as_object).into_iter().flatten() {
        attrs.insert(key.clone(), value.clone());
        let escaped = key.replace('~', "~0").replace('/', "~1");
        attr_at.insert(key.clone(), Value::String(format!("{pointer}/tags/{escaped}")));
    }
    let start = s.get("timestamp").and_then(as_u64_lenient).unwrap_or(0) * 1_000;
    let duration = s.get("duration").and_then(as_u64_lenient).unwrap_or(0) * 1_000;
    let events = s
        .get("annotations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, a)| Record {
            at: Ptr::new(doc, format!("{pointer}/annotations/{i}")),
            name: str_field(a, "value").unwrap_or_default().to_string(),
            time: a.get("timestamp").and_then(as_u64_lenient).unwrap_or(0) * 1_000,
            fields: Map::new(),
            span_id: None,
            trace_id: None,
        })
        .collect();
    let (error, status_message) = status(&attrs);
    Span {
        at: Ptr::new(doc, pointer),
        trace_id: str_field(s, "traceId").unwrap_or_default().to_string(),
        span_id: str_field(s, "id").unwrap_or_default().to_string(),
        name: str_field(s, "name").unwrap_or_default().to_string(),
        start,
        end: start + duration,
        attrs,
        attr_at,
        events,
        error,
        status_message,
    }
}
