//! OpenAI Responses API items.
//!
//! Reads, per the public API reference of `POST /v1/responses`:
//! - a JSON array of items (a conversation's input items, as passed back to the API),
//!   an object with `input` (a string or items) and/or `output` items plus
//!   `instructions`, `tools`, `usage` (a request body, a `response` object, or both
//!   merged), or JSONL whose records are items or `response` objects;
//! - `message` items (`role` user / system / developer / assistant; `content` a string or
//!   `input_text` / `output_text` / `refusal` parts), `function_call` (`call_id`, `name`,
//!   `arguments` as a JSON string) and `function_call_output` (`call_id`, `output`),
//!   `custom_tool_call` / `custom_tool_call_output`, `reasoning` (kept as provenance),
//!   and `mcp_call` (a remote MCP tool call with its `output` or `error` inline).
//!
//! One response is one model call: consecutive assistant items (message, reasoning,
//! function calls) form one response, ended by the next input item; a `response` object
//! is one response by itself. Built-in tool items (web search, file search, computer
//! use, code interpreter, image generation, local shell) and item references are
//! imported as warnings: they ran on the provider's side and cannot be replayed.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Format;
use super::builder::Builder;
use super::openai::text_of;
use super::source::Source;
use super::trace::{Args, Call, CallResult, Content, DeclaredTool, ErrorKind, Ptr, Step, Trace, provenance, str_field};
use crate::dataset::recording::Usage;
use crate::diag::{InputError, did_you_mean};

const READS: &str = "OpenAI Responses API items (POST /v1/responses input and output items, response objects)";
const ROLES: [&str; 4] = ["user", "system", "developer", "assistant"];

struct Reader<'s, 'b, 'a> {
    b: &'b mut Builder<'s, 'a>,
    /// The response being assembled from consecutive assistant items.
    pending: Option<Step>,
    /// Item id → where it was first seen.
    ids: BTreeMap<String, String>,
}

pub fn parse(src: &Source) -> Result<Trace, InputError> {
    let mut b = Builder::new(src, Format::OpenAiResponses, READS);
    let mut r = Reader { b: &mut b, pending: None, ids: BTreeMap::new() };
    if let [doc] = src.docs.as_slice()
        && (doc.value.get("input").is_some() || doc.value.get("output").is_some())
    {
        r.request_or_response(&doc.value, &Ptr::new(0, ""))?;
    } else {
        for (doc, pointer, record) in src.records() {
            let at = Ptr::new(doc, pointer);
            if record.get("object").and_then(Value::as_str) == Some("response") {
                r.request_or_response(record, &at)?;
            } else {
                r.item(&at, record)?;
            }
        }
    }
    r.flush()?;
    b.finish()
}

impl Reader<'_, '_, '_> {
    /// A request body, a response object or both: instructions, input, then output as
    /// one response with the object's usage.
    fn request_or_response(&mut self, obj: &Value, at: &Ptr) -> Result<(), InputError> {
        if let Some(text) = str_field(obj, "instructions") {
            self.b.system(text.to_string());
        }
        self.b.meta("model", obj.get("model").cloned().unwrap_or(Value::Null));
        if let Some(Value::Array(tools)) = obj.get("tools") {
            for t in tools {
                if let Some(name) = str_field(t, "name") {
                    self.b.tool(
                        DeclaredTool {
                            name: name.to_string(),
                            description: str_field(t, "description").map(str::to_string),
                            input_schema: t.get("parameters").cloned(),
                            ..DeclaredTool::default()
                        }
                        .classify(t),
                    );
                }
            }
        }
        match obj.get("input") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => {
                self.flush()?;
                self.b.user(Content::Text(text.clone()), Map::new(), None, &at.join("/input"));
            }
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    self.item(&at.join(format!("/input/{i}")), item)?;
                }
            }
            Some(_) => return Err(self.b.error(&at.join("/input"), "\"input\" must be a string or an array of items")),
        }
        if let Some(output) = obj.get("output") {
            let Value::Array(items) = output else {
                return Err(self.b.error(&at.join("/output"), "\"output\" must be an array of items"));
            };
            self.flush()?;
            for (i, item) in items.iter().enumerate() {
                self.item(&at.join(format!("/output/{i}")), item)?;
            }
            if let Some(step) = self.pending.as_mut() {
                if let Some(id) = obj.get("id").filter(|v| v.is_string()) {
                    step.source.insert("response_id".into(), id.clone());
                }
                if let Some(usage) = obj.get("usage") {
                    step.usage = Some(Usage {
                        input_tokens: usage.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
                        output_tokens: usage.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
                    });
                }
            }
            self.flush()?;
        }
        Ok(())
    }

    fn item(&mut self, at: &Ptr, item: &Value) -> Result<(), InputError> {
        if !item.is_object() {
            return Err(self.b.error(at, "expected a Responses API item object"));
        }
        if let Some(id) = str_field(item, "id") {
            let here = self.b.src().at(at.doc, &at.pointer);
            if let Some(first) = self.ids.insert(id.to_string(), here.clone()) {
                return Err(self.b.error(&at.join("/id"), format!("duplicate item id \"{id}\" (first at {first})")));
            }
        }
        let kind = match str_field(item, "type") {
            Some(k) => k,
            None if item.get("role").is_some() => "message",
            None => return Err(self.b.error(at, "item has neither \"type\" nor \"role\"")),
        };
        match kind {
            "message" => self.message(at, item),
            "function_call" | "custom_tool_call" => {
                let call_id = str_field(item, "call_id").or_else(|| str_field(item, "id")).map(str::to_string);
                let name = str_field(item, "name").ok_or_else(|| self.b.error(at, "function call has no \"name\""))?;
                let key = if kind == "function_call" { "arguments" } else { "input" };
                let args = item.get(key).map_or(Args::Absent, Args::from_value);
                let mut call = Call::new(call_id, name, args, at.clone());
                call.source = provenance([("item_id", item.get("id").cloned())]);
                self.open(at).calls.push(call);
                Ok(())
            }
            "function_call_output" | "custom_tool_call_output" => {
                self.flush()?;
                let id = str_field(item, "call_id").ok_or_else(|| {
                    self.b.error(at, "function_call_output has no \"call_id\": its result cannot be attributed")
                })?;
                let outcome = CallResult {
                    result: item.get("output").cloned().filter(|v| !v.is_null()),
                    source: provenance([("result_item_id", item.get("id").cloned())]),
                    ..CallResult::default()
                };
                self.b.result(id, outcome, &at.join("/call_id"))
            }
            "reasoning" => {
                let summary: Vec<&str> = item
                    .get("summary")
                    .and_then(Value::as_array)
                    .map(|parts| parts.iter().filter_map(|p| str_field(p, "text")).collect())
                    .unwrap_or_default();
                let step = self.open(at);
                let list = step.source.entry("reasoning").or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(list) = list {
                    list.push(json!({"id": item.get("id"), "summary": summary.join("\n")}));
                }
                Ok(())
            }
            "mcp_call" => self.mcp_call(at, item),
            other => {
                let what = if other.ends_with("_call") || other.ends_with("_call_output") {
                    "a provider-side tool item"
                } else {
                    "an item type stateval does not model"
                };
                let w = self.b.warning(
                    "unsupported_item",
                    at,
                    format!("\"{other}\" is {what}: it is not imported and a replay cannot reproduce it"),
                );
                match self.pending.as_mut() {
                    Some(step) => step.warnings.push(w),
                    None => self.b.warn(w),
                }
                Ok(())
            }
        }
    }

    fn message(&mut self, at: &Ptr, item: &Value) -> Result<(), InputError> {
        let role = str_field(item, "role").ok_or_else(|| self.b.error(at, "message item has no \"role\""))?;
        match role {
            "assistant" => {
                let text = text_of(self.b, at, item.get("content"))?.unwrap_or_default();
                let status = item.get("status").cloned();
                let step = self.open(at);
                if let Content::Text(existing) = &mut step.content {
                    existing.push_str(&text);
                }
                if let Some(id) = item.get("id").filter(|v| v.is_string()) {
                    step.source.insert("message_id".into(), id.clone());
                }
                if let Some(status) = status.filter(|s| s.as_str() != Some("completed")) {
                    step.source.insert("status".into(), status);
                }
                Ok(())
            }
            "user" | "system" | "developer" => {
                self.flush()?;
                let text = text_of(self.b, at, item.get("content"))?.unwrap_or_default();
                if role == "user" {
                    let source =
                        provenance([("item", Some(json!(at.pointer))), ("message_id", item.get("id").cloned())]);
                    self.b.user(Content::Text(text), source, None, at);
                } else {
                    self.b.system(text);
                }
                Ok(())
            }
            other => {
                let hint = did_you_mean(other, ROLES).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
                Err(self.b.error(
                    &at.join("/role"),
                    format!("unknown role \"{other}\"{hint}; Responses message roles are {}", ROLES.join(", ")),
                ))
            }
        }
    }

    /// A remote MCP call the provider ran: the call and its outcome in one item.
    fn mcp_call(&mut self, at: &Ptr, item: &Value) -> Result<(), InputError> {
        let name = str_field(item, "name").ok_or_else(|| self.b.error(at, "mcp_call has no \"name\""))?;
        let id = str_field(item, "id").map(str::to_string);
        let args = item.get("arguments").map_or(Args::Absent, Args::from_value);
        let mut call = Call::new(id, name, args, at.clone());
        call.source = provenance([("server_label", item.get("server_label").cloned())]);
        let error = item.get("error").filter(|e| !e.is_null());
        call.outcome = Some(CallResult {
            result: error.or(item.get("output")).cloned().filter(|v| !v.is_null()),
            is_error: Some(error.is_some()),
            error_kind: error.map(|_| ErrorKind::Tool),
            ..CallResult::default()
        });
        self.open(at).calls.push(call);
        Ok(())
    }

    /// The response being assembled, opened at `at` if there is none.
    fn open(&mut self, at: &Ptr) -> &mut Step {
        self.pending.get_or_insert_with(|| Step::new(Content::Text(String::new()), at.clone()))
    }

    /// Hand the assembled response to the builder.
    fn flush(&mut self) -> Result<(), InputError> {
        match self.pending.take() {
            Some(step) => self.b.step(step),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse_text(text: &str) -> Result<Trace, InputError> {
        let src = Source::parse(Path::new("resp.json"), text)?;
        parse(&src)
    }

    #[test]
    fn consecutive_assistant_items_are_one_response_and_outputs_attach_by_call_id() {
        let trace = parse_text(
            r#"[{"role":"user","content":"find order 7"},
                {"type":"reasoning","id":"rs_1","summary":[]},
                {"type":"function_call","id":"fc_1","call_id":"call_a","name":"get_order","arguments":"{\"id\":7}"},
                {"type":"function_call_output","call_id":"call_a","output":"{\"status\":\"shipped\"}"},
                {"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Shipped."}]}]"#,
        )
        .unwrap();
        let steps = &trace.turns[0].steps;
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].calls[0].args, Args::Json { value: json!({"id": 7}), raw: Some("{\"id\":7}".into()) });
        assert_eq!(steps[0].calls[0].outcome.as_ref().unwrap().result, Some(json!("{\"status\":\"shipped\"}")));
        assert_eq!(steps[1].content, Content::Text("Shipped.".into()));
    }

    #[test]
    fn a_duplicate_item_id_is_an_error() {
        let err = parse_text(
            r#"[{"role":"user","content":"x"},{"type":"message","id":"m","role":"assistant","content":"a"},
                {"type":"message","id":"m","role":"assistant","content":"a"}]"#,
        )
        .unwrap_err();
        assert!(err.message.contains("duplicate item id \"m\""), "{err}");
    }
}
