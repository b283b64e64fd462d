//! The dialect-neutral model request: what the agent asked, whichever wire it spoke.
//!
//! Every dialect (`wire::*`) reads its request into one shape,
//!
//! ```json
//! {"system": "…" | null,
//!  "messages": [{"role": "user", "content": "…"},
//!               {"role": "assistant", "content": "…", "tool_calls": [{"id", "name", "args"}]},
//!               {"role": "tool", "call_id": "…", "content": …, "is_error": bool}],
//!  "tools": [{"name", "description", "input_schema"}],
//!  "params": {"model", "temperature", "max_tokens", "tool_choice", "reasoning", …}}
//! ```
//!
//! so a recording made through one dialect replays through another, and its digest
//! (member-wise over canonical JSON, `replay::digest`) says whether the agent asked the
//! same thing.
//! `params` holds every request parameter that can change what the model answers
//! ([`PARAMS`]), under one name whichever dialect sent it; a parameter the request does
//! not send is absent, so a request without any of them digests as it always has.
//! Transport fields (`stream`, `user`, `metadata`, `store`, wire ids) never enter it; a profile's
//! `normalize` rules remove or rewrite what legitimately varies in the agent's own
//! requests (today's date, a uuid).

use regex::Regex;
use serde_json::{Map, Value};

use crate::canon::{CanonError, Digest};
use crate::pipeline::NormalizeRule;

/// Request parameters that change what a model answers, by their neutral names; every
/// other member of a request body is transport. Each dialect maps its own spelling onto
/// these ([`params`]):
///
/// - `max_tokens`: Chat `max_tokens` / `max_completion_tokens`, Responses
///   `max_output_tokens`, Messages `max_tokens`;
/// - `stop`: Chat `stop`, Messages `stop_sequences`;
/// - `reasoning`: Responses `reasoning` (`{"effort", "summary"}`), Chat
///   `reasoning_effort: E` as `{"effort": E}`;
/// - `response_format`: Chat `response_format` (a `json_schema` one flattened to the
///   Responses shape, `{"type": "json_schema", "name", "schema", "strict"}`), Responses
///   `text.format`, Messages `output_format`;
/// - `verbosity`: Chat `verbosity`, Responses `text.verbosity`;
/// - the rest under their own names, where a dialect has them.
pub const PARAMS: &[&str] = &[
    "audio",
    "frequency_penalty",
    "logit_bias",
    "max_tokens",
    "max_tool_calls",
    "modalities",
    "model",
    "n",
    "output_config",
    "parallel_tool_calls",
    "presence_penalty",
    "prompt",
    "reasoning",
    "response_format",
    "seed",
    "stop",
    "temperature",
    "thinking",
    "tool_choice",
    "top_k",
    "top_p",
    "truncation",
    "verbosity",
    "web_search_options",
];

/// A normalisation rule, compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    segments: Vec<String>,
    action: Action,
}

#[derive(Debug, Clone)]
enum Action {
    Drop,
    Replace(Regex, String),
}

impl Rule {
    /// Compile a profile's rules (validated when the pipeline loaded).
    pub fn compile(rules: &[NormalizeRule]) -> Result<Vec<Rule>, String> {
        rules
            .iter()
            .map(|r| {
                let action = match &r.regex {
                    Some(p) => Action::Replace(
                        Regex::new(p).map_err(|e| e.to_string())?,
                        r.replace.clone().unwrap_or_default(),
                    ),
                    None => Action::Drop,
                };
                let segments = r.path.split('/').skip(1).map(|s| s.replace("~1", "/").replace("~0", "~")).collect();
                Ok(Rule { segments, action })
            })
            .collect()
    }
}

/// Apply `rules` in order.
pub fn normalize(request: &mut Value, rules: &[Rule]) {
    for rule in rules {
        apply(request, &rule.segments, &rule.action);
    }
}

fn apply(value: &mut Value, segments: &[String], action: &Action) {
    let Some((first, rest)) = segments.split_first() else {
        if let Action::Replace(re, with) = action {
            rewrite(value, re, with);
        }
        return;
    };
    if rest.is_empty() && matches!(action, Action::Drop) {
        match value {
            Value::Object(map) if first == "*" => map.clear(),
            Value::Object(map) => {
                map.remove(first);
            }
            Value::Array(items) if first == "*" => items.clear(),
            Value::Array(items) => {
                if let Ok(i) = first.parse::<usize>()
                    && i < items.len()
                {
                    items.remove(i);
                }
            }
            _ => {}
        }
        return;
    }
    match value {
        Value::Object(map) if first == "*" => map.values_mut().for_each(|v| apply(v, rest, action)),
        Value::Object(map) => {
            if let Some(v) = map.get_mut(first) {
                apply(v, rest, action);
            }
        }
        Value::Array(items) if first == "*" => items.iter_mut().for_each(|v| apply(v, rest, action)),
        Value::Array(items) => {
            if let Some(v) = first.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                apply(v, rest, action);
            }
        }
        _ => {}
    }
}

fn rewrite(value: &mut Value, re: &Regex, with: &str) {
    match value {
        Value::String(s) => {
            if let std::borrow::Cow::Owned(new) = re.replace_all(s, with) {
                *s = new;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite(v, re, with)),
        Value::Object(map) => map.values_mut().for_each(|v| rewrite(v, re, with)),
        _ => {}
    }
}

/// The digest replay compares with a recording's `request_hash`.
pub fn digest(request: &Value) -> Result<Digest, CanonError> {
    crate::replay::digest::of(request)
}

/// The kept parameters of a request body, under their neutral names (`renames`: the
/// dialect's spelling → the neutral name). A null value counts as not sent.
pub fn params(body: &Map<String, Value>, renames: &[(&str, &str)]) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in body {
        let name = renames.iter().find(|(from, _)| from == key).map_or(key.as_str(), |(_, to)| to);
        if PARAMS.contains(&name) && !value.is_null() {
            out.insert(name.to_string(), value.clone());
        }
    }
    out
}

/// A Chat `response_format` in the Responses shape: `{"type": "json_schema",
/// "json_schema": {name, schema, strict}}` becomes `{"type": "json_schema", name,
/// schema, strict}`, so the same schema reads the same through either API.
pub fn flat_response_format(format: &Value) -> Value {
    match (format.get("type").and_then(Value::as_str), format.get("json_schema").and_then(Value::as_object)) {
        (Some("json_schema"), Some(inner)) => {
            let mut flat = inner.clone();
            flat.insert("type".into(), Value::String("json_schema".into()));
            Value::Object(flat)
        }
        _ => format.clone(),
    }
}

/// Tool results the agent sends back to the model in this request (`tool` messages):
/// `(call_id, content, is_error)`.
pub fn tool_results(request: &Value) -> Vec<(String, Value, bool)> {
    request
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .filter_map(|m| {
            let id = m.get("call_id")?.as_str()?.to_string();
            let content = m.get("content").cloned().unwrap_or(Value::Null);
            let is_error = m.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            Some((id, content, is_error))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(path: &str, drop: bool, regex: Option<&str>, replace: Option<&str>) -> NormalizeRule {
        NormalizeRule { path: path.into(), drop, regex: regex.map(Into::into), replace: replace.map(Into::into) }
    }

    #[test]
    fn rules_drop_values_and_rewrite_strings_below_a_path() {
        let mut request = json!({"system": "Today is 2026-11-23.", "params": {"model": "m", "seed": 7},
                                 "messages": [{"role": "user", "content": "id 4f1c"}, {"role": "user", "content": "id 99aa"}]});
        let rules = Rule::compile(&[
            rule("/system", false, Some(r"\d{4}-\d{2}-\d{2}"), Some("<date>")),
            rule("/params/seed", true, None, None),
            rule("/messages/*/content", false, Some("[0-9a-f]{4}"), None),
        ])
        .unwrap();
        normalize(&mut request, &rules);
        assert_eq!(
            request,
            json!({"system": "Today is <date>.", "params": {"model": "m"},
                   "messages": [{"role": "user", "content": "id "}, {"role": "user", "content": "id "}]})
        );
    }

    #[test]
    fn only_parameters_that_change_an_answer_are_kept() {
        let body = json!({"model": "m", "stream": true, "user": "u", "max_completion_tokens": 5, "temperature": null});
        let kept = params(body.as_object().unwrap(), &[("max_completion_tokens", "max_tokens")]);
        assert_eq!(Value::Object(kept), json!({"model": "m", "max_tokens": 5}));
    }
}
