//! Recorded HTTP exchanges with a model API, turned into the conversation they carry.
//!
//! Proxies, logging middleware and SDK test suites record each model call as a request
//! and its response. Three containers are read:
//!
//! - `{"request": …, "response": …}` records (one JSON document, an array of them, or
//!   JSONL), the request and response each a body, or `{body, url|uri, method, …}`;
//! - HAR (`log.entries[].request.postData.text` / `response.content.text`);
//! - VCR cassettes serialised as JSON (`interactions[].request.body` /
//!   `response.body.string`).
//!
//! A body may be JSON, a JSON string, or a recorded stream (SSE text), which is
//! assembled by [`super::stream`]. The API is told by the URL (`/v1/messages`,
//! `/chat/completions`, `/responses`), else by the bodies' shape. Each request holds
//! the whole history the model saw, so the conversation is the **last** exchange's
//! request plus its response — after checking that every earlier request is a prefix
//! of it (a re-recording of the same request is allowed, with a warning). Exchanges
//! that are not one conversation are refused, never merged.

use serde_json::{Map, Value, json};

use super::Format;
use super::framing::unframe;
use super::source::Source;
use super::stream::{assemble, detect as detect_stream};
use super::trace::{Ptr, str_field};
use crate::diag::InputError;

/// One recorded exchange.
struct Exchange {
    at: Ptr,
    url: Option<String>,
    request: Value,
    response: Value,
}

/// The conversation the exchanges carry, as one body of `format`.
pub struct Unwrapped {
    pub format: Format,
    pub body: Value,
    /// Where the exchange the body comes from is.
    pub at: Ptr,
    pub warnings: Vec<(Ptr, &'static str, String)>,
    pub container: &'static str,
}

/// Does `src` hold recorded exchanges?
pub fn detect(src: &Source) -> bool {
    let records = src.records();
    let first = src.docs.first().map(|d| &d.value);
    first.is_some_and(|d| d.pointer("/log/entries").is_some_and(Value::is_array))
        || first.is_some_and(|d| d.get("interactions").is_some_and(Value::is_array))
        || (!records.is_empty()
            && records.iter().all(|(_, _, r)| r.get("request").is_some() && r.get("response").is_some()))
}

pub fn unwrap(src: &Source) -> Result<Unwrapped, InputError> {
    let (container, list) = exchanges(src)?;
    let Some(last) = list.iter().rposition(|x| x.request.get("messages").is_some() || x.request.get("input").is_some())
    else {
        return Err(src.error(0, "", format!("{container} with no model request (messages or input) in it")));
    };
    let x = &list[last];
    let mut warnings = Vec::new();
    let history = |r: &Value| r.get("messages").or(r.get("input")).cloned().unwrap_or(Value::Null);
    let full = history(&x.request);
    for (k, earlier) in list[..last].iter().enumerate() {
        let h = history(&earlier.request);
        if h.is_null() {
            continue;
        }
        if h == full {
            warnings.push((
                earlier.at.clone(),
                "exchange_repeated",
                format!("exchange {k} sends the same request as exchange {last}: the last recording is imported"),
            ));
            continue;
        }
        let prefix = match (&h, &full) {
            (Value::Array(a), Value::Array(b)) => a.len() <= b.len() && b[..a.len()] == a[..],
            _ => false,
        };
        if !prefix {
            return Err(src.error(
                earlier.at.doc,
                &earlier.at.pointer,
                format!(
                    "exchange {k}'s messages are not the start of exchange {last}'s: these exchanges are not one \
                     conversation, and reading them as one would merge them; split the file, one conversation each"
                ),
            ));
        }
    }
    let format = api(x);
    let r = &x.request;
    let body = match format {
        Format::OpenAiResponses => {
            let mut b = match &x.response {
                Value::Object(m) => m.clone(),
                _ => Map::new(),
            };
            for key in ["input", "instructions", "tools", "model"] {
                if let Some(v) = r.get(key) {
                    b.entry(key).or_insert(v.clone());
                }
            }
            b.insert("input".into(), r.get("input").cloned().unwrap_or(Value::Null));
            Value::Object(b)
        }
        _ => {
            let mut messages = r.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
            if !x.response.is_null() {
                messages.push(x.response.clone());
            }
            let mut b = json!({"messages": messages});
            for key in ["model", "tools", "system"] {
                if let Some(v) = r.get(key) {
                    b[key] = v.clone();
                }
            }
            b
        }
    };
    Ok(Unwrapped { format, body, at: x.at.clone(), warnings, container })
}

/// The exchanges of the file and what contained them.
fn exchanges(src: &Source) -> Result<(&'static str, Vec<Exchange>), InputError> {
    let first = src.docs.first().map(|d| &d.value).unwrap_or(&Value::Null);
    let mut out = Vec::new();
    if let Some(Value::Array(entries)) = first.pointer("/log/entries") {
        for (i, e) in entries.iter().enumerate() {
            out.push(exchange(src, Ptr::new(0, format!("/log/entries/{i}")), e)?);
        }
        return Ok(("a HAR file", out));
    }
    if let Some(Value::Array(items)) = first.get("interactions") {
        for (i, e) in items.iter().enumerate() {
            out.push(exchange(src, Ptr::new(0, format!("/interactions/{i}")), e)?);
        }
        return Ok(("a VCR cassette", out));
    }
    for (doc, pointer, record) in src.records() {
        out.push(exchange(src, Ptr::new(doc, pointer), record)?);
    }
    Ok(("recorded {request, response} exchanges", out))
}

fn exchange(src: &Source, at: Ptr, e: &Value) -> Result<Exchange, InputError> {
    let request = e.get("request").unwrap_or(&Value::Null);
    let response = e.get("response").unwrap_or(&Value::Null);
    let url = ["url", "uri", "path"].iter().find_map(|k| str_field(request, k)).map(str::to_string);
    Ok(Exchange {
        request: body(src, &at.join("/request"), request)?,
        response: body(src, &at.join("/response"), response)?,
        url,
        at,
    })
}

/// A request's or response's body, wherever the container keeps it.
fn body(src: &Source, at: &Ptr, v: &Value) -> Result<Value, InputError> {
    let inner = v
        .pointer("/postData/text")
        .or(v.pointer("/content/text"))
        .or(v.pointer("/body/string"))
        .or(v.get("body"))
        .or(v.get("json"));
    if let Some(inner) = inner {
        return body(src, at, inner);
    }
    match v {
        Value::String(text) => text_body(src, at, text),
        other => Ok(other.clone()),
    }
}

/// A body recorded as text: JSON, or a stream.
fn text_body(src: &Source, at: &Ptr, text: &str) -> Result<Value, InputError> {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Ok(v);
    }
    let (unframed, _) = unframe(text);
    let stream = Source::parse(&src.path, &unframed).ok().and_then(|s| detect_stream(&s).map(|k| (s, k)));
    match stream {
        Some((s, kind)) => {
            let assembled = assemble(&s, kind);
            match assembled.bodies.as_slice() {
                [one] => Ok(one.clone()),
                _ => Err(src.error(
                    at.doc,
                    &at.pointer,
                    format!("a recorded stream body holding {} responses, not one", assembled.bodies.len()),
                )),
            }
        }
        None => Err(src.error(at.doc, &at.pointer, "a body that is neither JSON nor a recorded stream")),
    }
}

/// The API an exchange went to: by URL, else by the bodies' shape.
fn api(x: &Exchange) -> Format {
    let url = x.url.as_deref().unwrap_or("");
    if url.contains("/messages") && !url.contains("/chat/") {
        return Format::Anthropic;
    }
    if url.contains("/chat/completions") {
        return Format::OpenAi;
    }
    if url.contains("/responses") || x.request.get("input").is_some() {
        return Format::OpenAiResponses;
    }
    let anthropic = str_field(&x.response, "type") == Some("message")
        || x.request.get("system").is_some_and(|s| !s.is_null())
        || str_field(&x.request, "model").is_some_and(|m| m.starts_with("claude"));
    if anthropic { Format::Anthropic } else { Format::OpenAi }
}
