//! Fixture sandboxes: tools that answer from a manifest, never from anything live.
//!
//! A call is answered by the first response whose `args` equal the call's arguments
//! canonically (key order and number spelling never matter) and whose `when`
//! conditions (RFC 6902 `test` operations) hold in the current state, else the tool's
//! default, else an error result. Arguments that fail the tool's input schema get an error
//! result, as a real tool would return. Fixture state (a ledger, a file tree) changes
//! only through a response's `effect`, a JSON Patch recorded in `tool_executed`, so the
//! state is always the fold [`crate::event::fold::sandbox_at`] of the log.
//!
//! A response may be a protocol error instead ([`ProtocolError`], a JSON-RPC `error`
//! object): the call failed before it reached the tool, so it has no effect; its
//! result is the error object and the execution says so, for the runtime to log
//! `error_kind: "protocol"` and for MCP to answer with a JSON-RPC error.
//!
//! An effect that cannot apply (a patch whose path is not in the state, an `$arg` the
//! call did not pass) is the fixture's fault, not the tool's answer: the execution
//! carries a [`FixtureError`] naming the manifest, the tool and the effect, and the
//! runtime fails the case with it instead of showing the model an error it never
//! earned.
//!
//! Declared faults ([`fault`]) sit in front of the fixtures: a call may time out, answer
//! late or fail before (or instead of) reaching its fixture response. Their time is
//! virtual: an [`Execution`] says how long the call took, and the runtime advances its
//! clock by that much.

pub mod compute;
pub mod fault;
pub mod poisoning;

use serde_json::{Value, json};

use compute::Failure;

use crate::pipeline::fault::FaultDecl;
use crate::pipeline::manifest::{Manifest, ProtocolError, ToolSpec};
pub use fault::{FaultKind, Injection, Injector};

/// The result of executing one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    pub result: Value,
    pub is_error: bool,
    /// The patch that was applied (arguments substituted), or `None`.
    pub effect: Option<Value>,
    /// The fault that fired on this call, if any.
    pub fault: Option<Injection>,
    /// Virtual milliseconds the call took (0 unless a fault delayed it).
    pub duration_ms: u64,
    /// The fixture itself is wrong: the case fails with this (the state is unchanged).
    pub fixture_error: Option<FixtureError>,
    /// The fixture answers with a protocol error: `result` is its error object.
    pub protocol_error: Option<ProtocolError>,
    /// The canonical text of `result`, when the fixture had it written already (a
    /// result that is not computed); `None` says nothing about `result`.
    pub result_text: Option<std::sync::Arc<str>>,
}

/// A fixture effect that cannot be applied: a mistake in the manifest (or in the
/// arguments it expects), which fails the case rather than reach the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fixture error: {manifest}: {effect}: tool {tool}: {problem}")]
pub struct FixtureError {
    /// The manifest file, as shown to the user (`inline` when it has none).
    pub manifest: String,
    pub tool: String,
    /// JSON Pointer to the effect or result in the manifest (`/tools/2/default/effect`).
    pub effect: String,
    pub problem: String,
}

pub struct Sandbox<'m> {
    manifest: &'m Manifest,
    state: Value,
    faults: Injector,
    /// Tools downgraded to read-only (poisoned, under `poisoned_tools = "read_only"`):
    /// they answer, but their effects are not applied.
    read_only: std::collections::BTreeSet<String>,
}

impl<'m> Sandbox<'m> {
    /// Downgrade `tool` to read-only.
    pub fn set_read_only(&mut self, tool: &str) {
        self.read_only.insert(tool.to_string());
    }

    /// A sandbox without faults.
    pub fn new(manifest: &'m Manifest) -> Self {
        Sandbox { manifest, state: manifest.state.clone(), faults: Injector::default(), read_only: Default::default() }
    }

    /// A sandbox that injects the manifest's faults and `profile_faults` (consulted
    /// first), timing calls out after `timeout_ms` of virtual time.
    pub fn with_faults(manifest: &'m Manifest, profile_faults: &[FaultDecl], timeout_ms: u64) -> Self {
        Sandbox {
            manifest,
            state: manifest.state.clone(),
            faults: Injector::new(profile_faults, &manifest.faults, timeout_ms),
            read_only: Default::default(),
        }
    }

    pub fn state(&self) -> &Value {
        &self.state
    }

    pub fn manifest(&self) -> &'m Manifest {
        self.manifest
    }

    /// What a call withheld at the boundary would have done: executed against a
    /// throwaway copy of the state, with no fault (a fault is the transport's, not the
    /// call's) and the same read-only downgrades. The state is left as it is.
    pub fn would(&self, tool: &str, args: &Value) -> Execution {
        self.would_in(None, tool, args)
    }

    /// [`Sandbox::would`] against `state` (the counterfactual state, where earlier
    /// withheld calls took effect) rather than the sandbox's own.
    pub fn would_in(&self, state: Option<&Value>, tool: &str, args: &Value) -> Execution {
        let mut copy = Sandbox {
            manifest: self.manifest,
            state: state.unwrap_or(&self.state).clone(),
            faults: Injector::default(),
            read_only: self.read_only.clone(),
        };
        copy.execute(tool, args)
    }

    /// Whether `tool` is downgraded to read-only.
    pub fn is_read_only(&self, tool: &str) -> bool {
        self.read_only.contains(tool)
    }

    /// What a call of a read-only tool would have done without the downgrade (see
    /// [`Sandbox::would`]).
    pub fn would_unrestricted(&self, tool: &str, args: &Value) -> Execution {
        let mut copy = Sandbox {
            manifest: self.manifest,
            state: self.state.clone(),
            faults: Injector::default(),
            read_only: Default::default(),
        };
        copy.execute(tool, args)
    }

    /// Make a call: faults first, then the fixtures. A timeout or an injected error never
    /// reaches the fixture, so it has no effect on the state.
    pub fn call(&mut self, tool: &str, args: &Value) -> Execution {
        let served = self.manifest.tool(tool).is_some();
        let injection = if served { self.faults.inject(tool, self.manifest.server.as_deref()) } else { None };
        let Some(injection) = injection else {
            return self.execute(tool, args);
        };
        let mut execution = match injection.kind {
            FaultKind::Timeout => error(format!("timed out after {} ms", injection.duration_ms)),
            FaultKind::Error => error(format!("{tool} failed (injected fault)")),
            FaultKind::Slow => self.execute(tool, args),
        };
        execution.duration_ms = injection.duration_ms;
        execution.fault = Some(injection);
        execution
    }

    /// Execute a call against the fixtures, with no fault.
    pub fn execute(&mut self, tool: &str, args: &Value) -> Execution {
        let Some(spec) = self.manifest.tool(tool) else {
            return error(format!("unknown tool \"{tool}\""));
        };
        if let Some(e) = spec.validator.as_ref().and_then(|v| v.iter_errors(args).next()) {
            return error(format!("invalid arguments for {tool}: {e}"));
        }
        let (outcome, place) = match spec.response_index_for(args, &self.state) {
            Some(j) => (&spec.responses[j].outcome, format!("responses/{j}")),
            None => match &spec.default {
                Some(outcome) => (outcome, "default".to_string()),
                None => return error(format!("no fixture response for {tool} with these arguments")),
            },
        };
        let place = place.as_str();
        if let Some(protocol) = &outcome.protocol_error {
            // the call never reached the tool: no effect, the error object as the result
            let mut execution = error(String::new());
            execution.result = protocol.to_value();
            execution.protocol_error = Some(protocol.clone());
            return execution;
        }
        let index = self.manifest.tools.iter().position(|t| t.name == tool).unwrap_or_default();
        let fixture_error = |member: &str, problem: String| {
            let mut execution = error(format!("{tool}: the fixture cannot answer this call"));
            execution.fixture_error = Some(FixtureError {
                manifest: self.manifest.source.clone().unwrap_or_else(|| "inline".into()),
                tool: tool.to_string(),
                effect: format!("/tools/{index}/{place}/{member}"),
                problem,
            });
            execution
        };
        // the target is not in the state: the declared answer, computed from the
        // unchanged state, and no effect; undeclared, the fixture's fault
        let absent = |member: &str, problem: String| match &outcome.absent {
            Some(declared) => match compute::evaluate(&declared.result, args, &self.state) {
                Ok(result) => Execution { is_error: declared.is_error, ..answer(result, None) },
                Err(Failure::Absent(p) | Failure::Fixture(p)) => fixture_error("absent/result", p),
            },
            None => fixture_error(member, problem),
        };
        let ops = outcome.effect.as_ref().filter(|_| !self.read_only.contains(tool));
        let mut applied = None;
        if let Some(ops) = ops {
            let patch_value = match substitute_args(ops, args) {
                Ok(value) => value,
                Err(Failure::Absent(problem)) => return absent("effect", problem),
                Err(Failure::Fixture(problem)) => return fixture_error("effect", problem),
            };
            let next = serde_json::from_value::<json_patch::Patch>(patch_value.clone())
                .map_err(|e| (false, e.to_string()))
                .and_then(|patch| {
                    let mut next = self.state.clone();
                    json_patch::patch(&mut next, &patch).map_err(|e| (true, e.to_string())).map(|()| next)
                });
            match next {
                Ok(next) => applied = Some((next, patch_value)),
                Err((true, e)) if outcome.absent.is_some() => return absent("effect", e),
                Err((_, e)) => {
                    return fixture_error("effect", format!("the effect does not apply to the fixture state: {e}"));
                }
            }
        }
        // a computed result reads the state the call leaves (a read sees every write
        // before it; a write may answer with what it wrote)
        let result = if outcome.computed {
            let after = applied.as_ref().map_or(&self.state, |(next, _)| next);
            match compute::evaluate(&outcome.result, args, after) {
                Ok(result) => result,
                Err(Failure::Absent(problem)) => return absent("result", problem),
                Err(Failure::Fixture(problem)) => return fixture_error("result", problem),
            }
        } else {
            outcome.result.clone()
        };
        let result_text = outcome.result_text.clone();
        let effect = applied.map(|(next, patch)| {
            self.state = next;
            patch
        });
        Execution { is_error: outcome.is_error, result_text, ..answer(result, effect) }
    }
}

fn answer(result: Value, effect: Option<Value>) -> Execution {
    Execution {
        result,
        is_error: false,
        effect,
        fault: None,
        duration_ms: 0,
        fixture_error: None,
        protocol_error: None,
        result_text: None,
    }
}

fn error(message: String) -> Execution {
    Execution {
        result: json!({ "error": message }),
        is_error: true,
        effect: None,
        fault: None,
        duration_ms: 0,
        fixture_error: None,
        protocol_error: None,
        result_text: None,
    }
}

/// Replace every `{"$arg": "/pointer"}` with that argument, and every `path` or
/// `from` spelt as tokens with its pointer. A pointer the call's arguments do not have
/// is an error: a silent `null` would write a wrong state.
fn substitute_args(ops: &[Value], args: &Value) -> Result<Value, Failure> {
    ops.iter()
        .map(|op| match op {
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("path" | "from", Value::Array(_)) => Ok((k.clone(), Value::String(compute::pointer(v, args)?))),
                    _ => Ok((k.clone(), substitute(v, args)?)),
                })
                .collect::<Result<_, _>>()
                .map(Value::Object),
            other => substitute(other, args),
        })
        .collect::<Result<_, _>>()
        .map(Value::Array)
}

/// `{"$arg": …}` substituted in an effect's value; nothing else in it is a form.
fn substitute(template: &Value, args: &Value) -> Result<Value, Failure> {
    Ok(match template {
        Value::Object(map) if map.len() == 1 && map.get("$arg").is_some_and(Value::is_string) => {
            let pointer = map["$arg"].as_str().unwrap_or_default();
            args.pointer(pointer).cloned().ok_or_else(|| {
                Failure::Fixture(format!("{{\"$arg\": \"{pointer}\"}}: the call has no argument at {pointer:?}"))
            })?
        }
        Value::Object(map) => Value::Object(
            map.iter().map(|(k, v)| Ok((k.clone(), substitute(v, args)?))).collect::<Result<_, Failure>>()?,
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, args)).collect::<Result<_, _>>()?),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon;

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

    /// The text written with the manifest is the text of the result the call answers
    /// with, exactly; a computed result has none, and one a fault replaced has none.
    #[test]
    fn a_result_written_with_the_manifest_is_the_canonical_text_of_the_answer() {
        let m: Manifest = serde_json::from_value(json!({
            "state": {"n": 2},
            "tools": [
                {"name": "fixed", "description": "", "default":
                    {"result": {"z": [1.50, "é\u{1}"], "a": {"y": 1e3, "b": null}}}},
                {"name": "computed", "description": "", "default": {"result": {"n": {"$state": "/n"}}}}
            ]
        }))
        .unwrap();
        let mut compiled = m.clone();
        compiled.compile().unwrap();
        let mut s = Sandbox::new(&compiled);
        let fixed = s.execute("fixed", &json!({}));
        let text = fixed.result_text.as_deref().expect("a result as written has its text");
        assert_eq!(text, canon::to_canonical_string(&fixed.result).unwrap());
        assert_eq!(text, r#"{"a":{"b":null,"y":1000},"z":[1.5,"é\u0001"]}"#);
        let computed = s.execute("computed", &json!({}));
        assert_eq!((computed.result, computed.result_text), (json!({"n": 2}), None));
        // a manifest never compiled has no text: the caller writes it, as before
        assert!(Sandbox::new(&m).execute("fixed", &json!({})).result_text.is_none());
        // an injected error answers with its own text, not the fixture's
        let mut faulted = compiled.clone();
        faulted.faults = serde_json::from_value(json!([{"tool": "fixed", "fault": "error"}])).unwrap();
        let e = Sandbox::with_faults(&faulted, &[], 5000).call("fixed", &json!({}));
        assert!(e.fault.is_some() && e.result_text.is_none(), "{e:?}");
    }

    #[test]
    fn effects_change_state_with_arguments_substituted() {
        let m = manifest();
        let mut s = Sandbox::new(&m);
        let e = s.execute("transfer", &json!({"to": "al", "amount": 100}));
        assert_eq!(s.state(), &json!({"ledger": [{"to": "al", "amount": 100}]}));
        assert_eq!(e.effect.unwrap()[0]["value"], json!({"to": "al", "amount": 100}));
    }

    fn faulty(faults: Value) -> Manifest {
        let mut m = manifest();
        m.server = Some("bank".into());
        m.faults = serde_json::from_value(faults).unwrap();
        m
    }

    #[test]
    fn a_timed_out_call_never_reaches_its_fixture_so_the_state_is_unchanged() {
        let m = faulty(json!([{"tool": "transfer", "fault": "hang"}]));
        let mut s = Sandbox::with_faults(&m, &[], 5000);
        let e = s.call("transfer", &json!({"to": "al", "amount": 100}));
        assert_eq!((e.result, e.is_error, e.duration_ms), (json!({"error": "timed out after 5000 ms"}), true, 5000));
        assert_eq!(e.fault.map(|f| (f.kind, f.timeout_ms)), Some((FaultKind::Timeout, 5000)));
        assert_eq!((e.effect, s.state()), (None, &json!({"ledger": []})));
    }

    #[test]
    fn a_slow_call_answers_from_its_fixture_late_with_its_effect() {
        let m = faulty(json!([{"server": "bank", "fault": "slow:1200"}]));
        let mut s = Sandbox::with_faults(&m, &[], 5000);
        let e = s.call("transfer", &json!({"to": "al", "amount": 1}));
        assert_eq!((e.result, e.is_error, e.duration_ms), (json!({"ok": true}), false, 1200));
        assert_eq!(e.fault.map(|f| f.kind), Some(FaultKind::Slow));
        assert_eq!(s.state(), &json!({"ledger": [{"to": "al", "amount": 1}]}));
    }

    #[test]
    fn an_injected_error_fails_at_once_without_effect() {
        let m = faulty(json!([]));
        let profile: Vec<FaultDecl> = serde_json::from_value(json!([{"tool": "transfer", "fault": "error"}])).unwrap();
        let mut s = Sandbox::with_faults(&m, &profile, 5000);
        let e = s.call("transfer", &json!({"to": "al", "amount": 1}));
        assert_eq!(
            (e.result, e.is_error, e.duration_ms),
            (json!({"error": "transfer failed (injected fault)"}), true, 0)
        );
        assert_eq!(s.state(), &json!({"ledger": []}));
    }

    #[test]
    fn a_server_fault_leaves_calls_to_tools_the_manifest_does_not_serve_alone() {
        let m = faulty(json!([{"server": "bank", "fault": "hang"}]));
        let mut s = Sandbox::with_faults(&m, &[], 5000);
        let e = s.call("nope", &json!({}));
        assert_eq!((e.fault, e.result), (None, json!({"error": "unknown tool \"nope\""})));
    }

    #[test]
    fn an_arg_the_call_did_not_pass_is_a_fixture_error_not_a_null() {
        let m = manifest();
        let mut s = Sandbox::new(&m);
        // the schema requires to and amount; the effect also reads /memo
        let mut m2 = m.clone();
        if let Some(effect) = m2.tools[0].default.as_mut().and_then(|d| d.effect.as_mut()) {
            effect[0]["value"]["memo"] = json!({"$arg": "/memo"});
        }
        let mut s2 = Sandbox::new(&m2);
        let e = s2.execute("transfer", &json!({"to": "al", "amount": 1}));
        let err = e.fixture_error.map(|f| f.to_string()).unwrap_or_default();
        assert_eq!(
            err,
            "fixture error: inline: /tools/0/default/effect: tool transfer: \
             {\"$arg\": \"/memo\"}: the call has no argument at \"/memo\""
        );
        assert_eq!((e.is_error, s2.state()), (true, &json!({"ledger": []})));
        // the same call against the unchanged fixture applies
        assert_eq!(s.execute("transfer", &json!({"to": "al", "amount": 1})).fixture_error, None);
    }

    #[test]
    fn an_effect_that_cannot_apply_is_a_fixture_error_naming_manifest_tool_and_effect() {
        let mut m = manifest();
        m.source = Some("fixtures/tools/t.json".into());
        m.state = json!({});
        let mut s = Sandbox::new(&m);
        let e = s.execute("transfer", &json!({"to": "al", "amount": 1}));
        let err = e.fixture_error.map(|f| f.to_string()).unwrap_or_default();
        assert!(
            err.starts_with(
                "fixture error: fixtures/tools/t.json: /tools/0/default/effect: tool transfer: \
                 the effect does not apply to the fixture state: "
            ),
            "{err}"
        );
        assert_eq!((e.is_error, e.effect, s.state()), (true, None, &json!({})));
    }

    #[test]
    fn bad_args_and_unknown_tools_are_error_results() {
        let m = manifest();
        let mut s = Sandbox::new(&m);
        assert!(s.execute("transfer", &json!({"to": "al"})).is_error);
        assert!(s.execute("nope", &json!({})).is_error);
        assert_eq!(s.state(), &json!({"ledger": []}));
    }

    /// A file store whose reads are computed from the state: the writes' effects
    /// change it, the reads answer what it holds now.
    fn files() -> Manifest {
        let mut m: Manifest = serde_json::from_value(json!({
            "state": {"files": {"a": {"id": "a", "owner": "ann", "text": "one"}}},
            "tools": [
                {"name": "list_files", "description": "d",
                 "default": {"result": {"$filter": "/files", "where": {}}}},
                {"name": "files_of", "description": "d",
                 "default": {"result": {"$filter": "/files", "where": {"owner": {"$arg": "/owner"}}}}},
                {"name": "read_file", "description": "d",
                 "default": {"result": {"$state": ["files", {"$arg": "/id"}, "text"]},
                             "absent": {"result": {"error": "no file", "id": {"$arg": "/id"}}}}},
                {"name": "write_file", "description": "d", "safety_class": "write",
                 "default": {"result": {"$state": ["files", {"$arg": "/id"}]},
                             "effect": [{"op": "add", "path": ["files", {"$arg": "/id"}],
                                         "value": {"id": {"$arg": "/id"}, "owner": {"$arg": "/owner"}, "text": {"$arg": "/text"}}}]}},
                {"name": "delete_file", "description": "d", "safety_class": "write",
                 "default": {"result": "deleted",
                             "effect": [{"op": "remove", "path": ["files", {"$arg": "/id"}]}],
                             "absent": {"result": "no such file"}}}
            ]
        }))
        .unwrap();
        m.compile().unwrap();
        m
    }

    #[test]
    fn a_read_after_a_write_answers_what_the_write_left() {
        let m = files();
        let mut s = Sandbox::new(&m);
        assert_eq!(s.execute("read_file", &json!({"id": "a"})).result, json!("one"));
        let w = s.execute("write_file", &json!({"id": "a", "owner": "ann", "text": "two"}));
        // a write's computed result reads the state it leaves
        assert_eq!(w.result, json!({"id": "a", "owner": "ann", "text": "two"}));
        assert_eq!(s.execute("read_file", &json!({"id": "a"})).result, json!("two"));
        s.execute("write_file", &json!({"id": "b", "owner": "bo", "text": "three"}));
        assert_eq!(s.execute("list_files", &json!({})).result.as_array().map(Vec::len), Some(2));
        assert_eq!(
            s.execute("files_of", &json!({"owner": "bo"})).result,
            json!([{"id": "b", "owner": "bo", "text": "three"}])
        );
        let d = s.execute("delete_file", &json!({"id": "a"}));
        assert_eq!(
            (d.result, d.is_error, d.effect),
            (json!("deleted"), false, Some(json!([{"op": "remove", "path": "/files/a"}])))
        );
        assert_eq!(s.execute("list_files", &json!({})).result, json!([{"id": "b", "owner": "bo", "text": "three"}]));
    }

    #[test]
    fn a_call_whose_target_is_gone_answers_the_declared_error_without_effect() {
        let m = files();
        let mut s = Sandbox::new(&m);
        s.execute("delete_file", &json!({"id": "a"}));
        let before = s.state().clone();
        // the read of a deleted file, and the second delete: the declared answers, errors by default
        let r = s.execute("read_file", &json!({"id": "a"}));
        assert_eq!((r.result, r.is_error, r.fixture_error), (json!({"error": "no file", "id": "a"}), true, None));
        let d = s.execute("delete_file", &json!({"id": "a"}));
        assert_eq!((d.result, d.is_error, d.effect), (json!("no such file"), true, None));
        assert_eq!(s.state(), &before);
    }

    #[test]
    fn an_absent_target_without_a_declared_answer_is_a_fixture_error_naming_the_result() {
        let mut m = files();
        m.tools[2].default.as_mut().unwrap().absent = None;
        let mut s = Sandbox::new(&m);
        let e = s.execute("read_file", &json!({"id": "zz"}));
        assert_eq!(
            e.fixture_error.map(|f| f.to_string()).unwrap_or_default(),
            "fixture error: inline: /tools/2/default/result: tool read_file: the state has nothing at /files/zz"
        );
    }

    /// Three equal payments, each answered with the state it is made in: the first
    /// response whose conditions hold answers, and one made in a state none was
    /// recorded in gets the default.
    #[test]
    fn equal_calls_answer_by_the_state_they_are_made_in() {
        let mut m: Manifest = serde_json::from_value(json!({
            "state": {"ledger": [{"id": 1}]},
            "tools": [{"name": "pay", "description": "d", "safety_class": "financial",
                "responses": [
                    {"args": {"to": "bo"}, "when": [{"op": "test", "path": "/ledger", "value": [{"id": 1}, {"id": 2.0}]}],
                     "result": "sent 3", "effect": [{"op": "add", "path": "/ledger/-", "value": {"id": 3}}]},
                    {"args": {"to": "bo"}, "when": [{"op": "test", "path": "/ledger", "value": [{"id": 1}]}],
                     "result": "sent 2", "effect": [{"op": "add", "path": "/ledger/-", "value": {"id": 2}}]}],
                "default": {"result": "no answer recorded", "is_error": true}}]
        }))
        .unwrap();
        m.compile().unwrap();
        let mut s = Sandbox::new(&m);
        let answers: Vec<_> = (0..3).map(|_| s.execute("pay", &json!({"to": "bo"}))).collect();
        let got: Vec<_> = answers.iter().map(|e| (e.result.clone(), e.is_error)).collect();
        assert_eq!(
            got,
            [(json!("sent 2"), false), (json!("sent 3"), false), (json!("no answer recorded"), true)],
            "the third call's state ({}) is none the responses were recorded in",
            s.state()
        );
        assert_eq!(s.state(), &json!({"ledger": [{"id": 1}, {"id": 2}, {"id": 3}]}));
        // the same manifest uncompiled (no index) chooses the same way
        let mut raw = m.clone();
        raw.tools[0].by_args = Default::default();
        let mut s = Sandbox::new(&raw);
        assert_eq!(s.execute("pay", &json!({"to": "bo"})).result, json!("sent 2"));
        assert_eq!(s.execute("pay", &json!({"to": "bo"})).result, json!("sent 3"));
        // a response without conditions answers in any state; the first that holds wins
        let mut open = m.clone();
        let mut fallback = open.tools[0].responses[1].clone();
        (fallback.when, fallback.outcome.result) = (None, json!("sent, unguarded"));
        open.tools[0].responses.push(fallback);
        open.compile().unwrap();
        let mut s = Sandbox::new(&open);
        let got: Vec<_> = (0..3).map(|_| s.execute("pay", &json!({"to": "bo"})).result).collect();
        assert_eq!(got, [json!("sent 2"), json!("sent 3"), json!("sent, unguarded")]);
    }
}
