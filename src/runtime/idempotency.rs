//! Idempotent effects happen once per key.
//!
//! A tool marked `idempotent` in its manifest takes a key: the call's own
//! `idempotency_key` argument when it gives one (stripped before the fixture sees the
//! arguments), otherwise a digest of the case, run, turn, tool and canonical arguments —
//! so a retried call in the same turn is the same operation, and a client that means
//! "the same transfer" across turns says so with a key. A second execution with a key
//! already used returns the recorded result, marked `deduplicated`, with no effect.
//! Keys are written into `tool_executed`, so the store is a fold over the log.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::canon::{self, Context};

/// The argument a caller may use to name its operation.
pub const KEY_ARGUMENT: &str = "idempotency_key";

#[derive(Default)]
pub struct IdempotencyStore {
    /// key → (result, seq of the execution that produced it)
    seen: BTreeMap<String, (Value, u64)>,
}

/// The key of a call and the arguments the fixture should see.
pub fn key_and_args(scope: &str, turn: u32, tool: &str, args: &Value) -> (String, Value) {
    if let Some(given) = args.get(KEY_ARGUMENT).and_then(Value::as_str) {
        let mut rest = args.clone();
        if let Some(map) = rest.as_object_mut() {
            map.remove(KEY_ARGUMENT);
        }
        return (format!("given:{given}"), rest);
    }
    let material = serde_json::json!({"scope": scope, "turn": turn, "tool": tool, "args": args});
    let digest = canon::canonical_digest(Context::Content, &material)
        .map(|d| d.to_hex()[..32].to_string())
        .unwrap_or_else(|_| format!("{scope}/{turn}/{tool}"));
    (format!("derived:{digest}"), args.clone())
}

impl IdempotencyStore {
    /// The earlier result for `key`, if the operation already happened.
    pub fn replay(&self, key: &str) -> Option<&(Value, u64)> {
        self.seen.get(key)
    }

    /// Remember a successful execution (failed ones may be retried).
    pub fn record(&mut self, key: String, result: Value, seq: u64) {
        self.seen.entry(key).or_insert((result, seq));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_given_key_names_the_operation_whatever_the_turn_and_is_not_passed_on() {
        let (a, args) = key_and_args("c/0", 1, "transfer", &json!({"to": "bob", "idempotency_key": "inv-42"}));
        let (b, _) = key_and_args("c/0", 7, "transfer", &json!({"idempotency_key": "inv-42", "to": "bob"}));
        assert_eq!(a, b);
        assert_eq!(args, json!({"to": "bob"}));
    }

    #[test]
    fn a_derived_key_is_the_same_for_a_retry_in_the_same_turn_and_differs_across_turns() {
        let (a, _) = key_and_args("c/0", 1, "transfer", &json!({"to": "bob", "amount": 5}));
        let (b, _) = key_and_args("c/0", 1, "transfer", &json!({"amount": 5.0, "to": "bob"}));
        let (c, _) = key_and_args("c/0", 2, "transfer", &json!({"to": "bob", "amount": 5}));
        assert_eq!(a, b, "canonical arguments: key order and number spelling do not matter");
        assert_ne!(a, c);
    }
}
