//! Fixture sandboxes: tools that answer from a manifest, never from anything live.
//!
//! A call is answered by the response whose `args` equal the call's arguments
//! canonically (key order and number spelling never matter), else the tool's default,
//! else an error result. Arguments that fail the tool's input schema get an error
//! result, as a real tool would return. Fixture state (a ledger, a file tree) changes
//! only through a response's `effect`, a JSON Patch recorded in `tool_executed`, so the
//! state is always the fold [`crate::event::fold::sandbox_at`] of the log.

pub mod manifest;

use serde_json::{Value, json};

use crate::canon::json_eq;
pub use manifest::{Manifest, Outcome, ToolSpec, Trust};

/// The result of executing one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    pub result: Value,
    pub is_error: bool,
    /// The patch that was applied (arguments substituted), or `None`.
    pub effect: Option<Value>,
}

pub struct Sandbox<'m> {
    manifest: &'m Manifest,
    state: Value,
}

impl<'m> Sandbox<'m> {
    pub fn new(manifest: &'m Manifest) -> Self {
        Sandbox { manifest, state: manifest.state.clone() }
    }

    pub fn state(&self) -> &Value {
        &self.state
    }

    pub fn manifest(&self) -> &'m Manifest {
        self.manifest
    }

    /// Execute a call against the fixtures.
    pub fn execute(&mut self, tool: &str, args: &Value) -> Execution {
        let Some(spec) = self.manifest.tool(tool) else {
            return error(format!("unknown tool \"{tool}\""));
        };
        if let Some(e) = spec.validator.as_ref().and_then(|v| v.iter_errors(args).next()) {
            return error(format!("invalid arguments for {tool}: {e}"));
        }
        let outcome =
            spec.responses.iter().find(|r| json_eq(&r.args, args)).map(|r| &r.outcome).or(spec.default.as_ref());
        let Some(outcome) = outcome else {
            return error(format!("no fixture response for {tool} with these arguments"));
        };
        let effect = outcome.effect.as_ref().map(|ops| substitute_args(&Value::Array(ops.clone()), args));
        if let Some(patch_value) = &effect {
            let applied = serde_json::from_value::<json_patch::Patch>(patch_value.clone())
                .map_err(|e| e.to_string())
                .and_then(|patch| {
                    let mut next = self.state.clone();
                    json_patch::patch(&mut next, &patch).map_err(|e| e.to_string()).map(|()| next)
                });
            match applied {
                Ok(next) => self.state = next,
                Err(e) => return error(format!("{tool}: fixture effect does not apply: {e}")),
            }
        }
        Execution { result: outcome.result.clone(), is_error: outcome.is_error, effect }
    }
}

fn error(message: String) -> Execution {
    Execution { result: json!({ "error": message }), is_error: true, effect: None }
}

/// Replace every `{"$arg": "/pointer"}` with that argument (null when absent).
fn substitute_args(template: &Value, args: &Value) -> Value {
    match template {
        Value::Object(map) if map.len() == 1 && map.get("$arg").is_some_and(Value::is_string) => {
            let pointer = map["$arg"].as_str().unwrap_or_default();
            args.pointer(pointer).cloned().unwrap_or(Value::Null)
        }
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), substitute_args(v, args))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute_args(v, args)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        serde_json::from_value(json!({
            "state": {"ledger": []},
            "tools": [{
                "name": "transfer", "description": "Send money", "safety_class": "financial",
                "input_schema": {"type": "object", "required": ["to", "amount"]},
                "responses": [{"args": {"amount": 5, "to": "bob"}, "result": {"ok": "special"}}],
                "default": {"result": {"ok": true},
                            "effect": [{"op": "add", "path": "/ledger/-", "value": {"to": {"$arg": "/to"}, "amount": {"$arg": "/amount"}}}]}
            }]
        }))
        .map(|mut m: Manifest| {
            m.compile().unwrap();
            m
        })
        .unwrap()
    }

    #[test]
    fn responses_are_keyed_by_canonical_args_with_a_default() {
        let m = manifest();
        let mut s = Sandbox::new(&m);
        assert_eq!(s.execute("transfer", &json!({"to": "bob", "amount": 5.0})).result, json!({"ok": "special"}));
        assert_eq!(s.execute("transfer", &json!({"to": "al", "amount": 1})).result, json!({"ok": true}));
    }

    #[test]
    fn effects_change_state_with_arguments_substituted() {
        let m = manifest();
        let mut s = Sandbox::new(&m);
        let e = s.execute("transfer", &json!({"to": "al", "amount": 100}));
        assert_eq!(s.state(), &json!({"ledger": [{"to": "al", "amount": 100}]}));
        assert_eq!(e.effect.unwrap()[0]["value"], json!({"to": "al", "amount": 100}));
    }

    #[test]
    fn bad_args_and_unknown_tools_are_error_results() {
        let m = manifest();
        let mut s = Sandbox::new(&m);
        assert!(s.execute("transfer", &json!({"to": "al"})).is_error);
        assert!(s.execute("nope", &json!({})).is_error);
        assert_eq!(s.state(), &json!({"ledger": []}));
    }
}
