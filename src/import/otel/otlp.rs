//! OTLP/JSON decoding: spans, span events and log records with plain JSON attributes.
//!
//! Follows the OTLP/JSON encoding of the OpenTelemetry protocol specification:
//! `resourceSpans[].scopeSpans[].spans[]` and `resourceLogs[].scopeLogs[].logRecords[]`,
//! hex trace and span ids, 64-bit integers as decimal strings (numbers accepted too),
//! enums as integers (their names accepted too), and `AnyValue` attributes, which are
//! turned into plain JSON here (`{"stringValue": "a"}` → `"a"`, `kvlistValue` → an
//! object) so the GenAI reader never sees the wire shape.

use serde_json::{Map, Value};

use super::super::source::Source;
use super::super::trace::{Ptr, as_u64_lenient, str_field};
use crate::diag::InputError;

/// One span.
#[derive(Debug, Clone)]
pub struct Span {
    pub at: Ptr,
    pub trace_id: String,
    pub span_id: String,
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub attrs: Map<String, Value>,
    /// Pointer of each attribute's value, by key (for errors inside JSON-encoded values).
    pub attr_at: Map<String, Value>,
    pub events: Vec<Record>,
    pub error: bool,
    pub status_message: Option<String>,
}

impl Span {
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attrs.get(key)
    }

    pub fn attr_str(&self, key: &str) -> Option<&str> {
        self.attrs.get(key).and_then(Value::as_str)
    }

    /// Where attribute `key`'s value is (the span itself when it has no such attribute).
    pub fn attr_ptr(&self, key: &str) -> Ptr {
        match self.attr_at.get(key).and_then(Value::as_str) {
            Some(p) => Ptr::new(self.at.doc, p),
            None => self.at.clone(),
        }
    }
}

/// A span event or a log record: a name, a time and fields (attributes, and for log
/// records the body's fields on top).
#[derive(Debug, Clone)]
pub struct Record {
    pub at: Ptr,
    pub name: String,
    pub time: u64,
    pub fields: Map<String, Value>,
    /// For log records: the span they belong to.
    pub span_id: Option<String>,
    /// For log records: the trace they belong to.
    pub trace_id: Option<String>,
}

/// Everything OTLP in the file.
#[derive(Debug, Default)]
pub struct Otlp {
    pub spans: Vec<Span>,
    pub logs: Vec<Record>,
    pub schema_urls: Vec<String>,
}

impl Otlp {
    /// The trace ids of the file, in first-seen order, with how many spans each has.
    pub fn trace_ids(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        let ids = self
            .spans
            .iter()
            .map(|s| s.trace_id.as_str())
            .chain(self.logs.iter().filter_map(|l| l.trace_id.as_deref()));
        for (i, id) in ids.enumerate() {
            if id.is_empty() {
                continue;
            }
            let is_span = i < self.spans.len();
            match out.iter_mut().find(|(t, _)| t == id) {
                Some((_, n)) => *n += usize::from(is_span),
                None => out.push((id.to_string(), usize::from(is_span))),
            }
        }
        out
    }

    /// Keep only trace `id`'s spans and log records (records without a trace id stay:
    /// they are tied to spans by span id).
    pub fn keep_trace(&mut self, id: &str) {
        self.spans.retain(|s| s.trace_id == id);
        self.logs.retain(|l| l.trace_id.as_deref().is_none_or(|t| t == id));
    }
}

/// Collect spans and log records from every document of the file.
pub fn collect(src: &Source) -> Result<Otlp, InputError> {
    let mut out = Otlp::default();
    for (d, doc) in src.docs.iter().enumerate() {
        let v = &doc.value;
        if v.get("resourceSpans").is_none() && v.get("resourceLogs").is_none() {
            if super::exports::collect(src, d, &mut out) {
                continue;
            }
            return Err(src.error(
                d,
                "",
                "not OTLP/JSON (\"resourceSpans\" / \"resourceLogs\"), nor a Jaeger or Zipkin span export",
            ));
        }
        for (r, resource) in array(src, d, v, "", "resourceSpans")? {
            schema(&mut out, resource);
            for (s, scope) in array(src, d, resource, &r, "scopeSpans")? {
                schema(&mut out, scope);
                for (p, span) in array(src, d, scope, &s, "spans")? {
                    out.spans.push(read_span(d, &p, span));
                }
            }
        }
        for (r, resource) in array(src, d, v, "", "resourceLogs")? {
            schema(&mut out, resource);
            for (s, scope) in array(src, d, resource, &r, "scopeLogs")? {
                schema(&mut out, scope);
                for (p, record) in array(src, d, scope, &s, "logRecords")? {
                    out.logs.push(read_log(d, &p, record));
                }
            }
        }
    }
    Ok(out)
}

/// The elements of array `key` of `parent` (at `base`), with their pointers.
fn array<'v>(
    src: &Source,
    doc: usize,
    parent: &'v Value,
    base: &str,
    key: &str,
) -> Result<Vec<(String, &'v Value)>, InputError> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            Ok(items.iter().enumerate().map(|(i, item)| (format!("{base}/{key}/{i}"), item)).collect())
        }
        Some(_) => Err(src.error(doc, &format!("{base}/{key}"), format!("\"{key}\" must be an array"))),
    }
}

fn schema(out: &mut Otlp, holder: &Value) {
    if let Some(url) = str_field(holder, "schemaUrl").filter(|u| !u.is_empty())
        && !out.schema_urls.iter().any(|u| u == url)
    {
        out.schema_urls.push(url.to_string());
    }
}

fn read_span(doc: usize, pointer: &str, span: &Value) -> Span {
    let (attrs, attr_at) = attributes(span.get("attributes"), pointer);
    let events = span
        .get("events")
        .and_then(Value::as_array)
        .map(|events| {
            events
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let here = format!("{pointer}/events/{i}");
                    Record {
                        at: Ptr::new(doc, here.clone()),
                        name: str_field(e, "name").unwrap_or_default().to_string(),
                        time: e.get("timeUnixNano").and_then(as_u64_lenient).unwrap_or(0),
                        fields: attributes(e.get("attributes"), &here).0,
                        span_id: None,
                        trace_id: None,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let status = span.get("status");
    let code = status.and_then(|s| s.get("code"));
    let error = matches!(code, Some(Value::Number(n)) if n.as_u64() == Some(2))
        || code.and_then(Value::as_str) == Some("STATUS_CODE_ERROR");
    Span {
        at: Ptr::new(doc, pointer),
        trace_id: str_field(span, "traceId").unwrap_or_default().to_string(),
        span_id: str_field(span, "spanId").unwrap_or_default().to_string(),
        name: str_field(span, "name").unwrap_or_default().to_string(),
        start: span.get("startTimeUnixNano").and_then(as_u64_lenient).unwrap_or(0),
        end: span.get("endTimeUnixNano").and_then(as_u64_lenient).unwrap_or(0),
        attrs,
        attr_at,
        events,
        error,
        status_message: status.and_then(|s| str_field(s, "message")).filter(|m| !m.is_empty()).map(str::to_string),
    }
}

fn read_log(doc: usize, pointer: &str, record: &Value) -> Record {
    let (mut fields, _) = attributes(record.get("attributes"), pointer);
    let name = str_field(record, "eventName")
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .or_else(|| fields.get("event.name").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default();
    match record.get("body").map(any_value) {
        Some(Value::Object(body)) => fields.extend(body),
        // Semantic Kernel logs the event body as a JSON string (its Python logging record)
        Some(Value::String(text)) if !name.is_empty() => {
            if let Ok(Value::Object(body)) = serde_json::from_str::<Value>(&text) {
                fields.extend(body);
            }
        }
        _ => {}
    }
    let time = record
        .get("timeUnixNano")
        .and_then(as_u64_lenient)
        .filter(|t| *t > 0)
        .or_else(|| record.get("observedTimeUnixNano").and_then(as_u64_lenient))
        .unwrap_or(0);
    Record {
        at: Ptr::new(doc, pointer),
        name,
        time,
        fields,
        span_id: str_field(record, "spanId").filter(|s| !s.is_empty()).map(str::to_string),
        trace_id: str_field(record, "traceId").filter(|s| !s.is_empty()).map(str::to_string),
    }
}

/// `[{"key", "value": AnyValue}]` → a JSON object, and each value's pointer.
fn attributes(list: Option<&Value>, base: &str) -> (Map<String, Value>, Map<String, Value>) {
    let mut values = Map::new();
    let mut at = Map::new();
    for (i, kv) in list.and_then(Value::as_array).into_iter().flatten().enumerate() {
        if let Some(key) = str_field(kv, "key") {
            values.insert(key.to_string(), kv.get("value").map_or(Value::Null, any_value));
            at.insert(key.to_string(), Value::String(format!("{base}/attributes/{i}/value")));
        }
    }
    (values, at)
}

/// An OTLP `AnyValue` as plain JSON.
pub fn any_value(v: &Value) -> Value {
    let Some(obj) = v.as_object() else { return v.clone() };
    if let Some(s) = obj.get("stringValue") {
        return s.clone();
    }
    if let Some(b) = obj.get("boolValue") {
        return b.clone();
    }
    if let Some(i) = obj.get("intValue") {
        return match i {
            Value::String(s) => s.parse::<i64>().map(Value::from).unwrap_or_else(|_| i.clone()),
            other => other.clone(),
        };
    }
    if let Some(d) = obj.get("doubleValue") {
        return d.clone();
    }
    if let Some(bytes) = obj.get("bytesValue") {
        return bytes.clone();
    }
    if let Some(array) = obj.get("arrayValue") {
        return Value::Array(
            array
                .get("values")
                .and_then(Value::as_array)
                .map(|vs| vs.iter().map(any_value).collect())
                .unwrap_or_default(),
        );
    }
    if let Some(kvlist) = obj.get("kvlistValue") {
        return Value::Object(attributes_plain(kvlist.get("values")));
    }
    Value::Null
}

fn attributes_plain(list: Option<&Value>) -> Map<String, Value> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|kv| Some((str_field(kv, "key")?.to_string(), kv.get("value").map_or(Value::Null, any_value))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn any_values_become_plain_json() {
        let v = json!({"kvlistValue": {"values": [
            {"key": "n", "value": {"intValue": "42"}},
            {"key": "xs", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"boolValue": true}]}}}]}});
        assert_eq!(any_value(&v), json!({"n": 42, "xs": ["a", true]}));
        assert_eq!(any_value(&json!({})), Value::Null);
    }
}
