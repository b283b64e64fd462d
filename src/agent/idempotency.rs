//! Idempotent effects happen once per key.
//!
//! A tool marked `idempotent` in its manifest takes a key: the call's own
//! `idempotency_key` argument when it gives one (stripped before the fixture sees the
//! arguments), otherwise a digest of the case, run, turn, tool and canonical arguments —
//! so a retried call in the same turn is the same operation, and a client that means
//! "the same transfer" across turns says so with a key. A second execution with a key
//! already used returns the recorded result, marked `deduplicated`, with no effect.
//! Keys are written into `tool_executed`, so the store is a fold over the log.
//!
//! What counts as the same, because an attacker (or a flaky client) varies exactly these:
//!
//! - a given key is compared in its [`normalize::fold`] form: case, surrounding and
//!   repeated whitespace, Unicode hyphens and look-alike characters do not make a new
//!   key, and a number key `42` is the key `"42"`;
//! - canonical arguments keep only the arguments the tool's `input_schema` declares (an
//!   extra `memo` does not make a new transfer), compare strings folded (`ACME@example.com`
//!   is `acme@example.com`) and numbers by value whether sent as numbers or numeric
//!   strings (`75`, `75.0` and `"75"` are one amount); key order never matters;
//! - a call *without* a key whose tool and canonical arguments equal those of an earlier
//!   keyed call in the run is that keyed operation again, in any turn: a retry that lost
//!   its key is still a retry;
//! - and the other way round: a call *with* a key never used before, whose tool and
//!   canonical arguments equal those of an earlier keyless call in the run, is that
//!   keyless operation again — a keyless payment followed by a keyed retry is one effect.
//!
//! Two calls that differ in a declared argument's folded value are two operations.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::canon::{self, Context};
use crate::text::{normalize, switches};

/// The argument a caller may use to name its operation.
pub const KEY_ARGUMENT: &str = "idempotency_key";

#[derive(Default, Clone)]
pub struct IdempotencyStore {
    /// key → (result, seq of the execution that produced it)
    seen: BTreeMap<String, (Value, u64)>,
    /// operation (tool and canonical arguments) → the key a keyed call gave it
    keyed: BTreeMap<String, String>,
    /// operation within a turn → the derived key its first keyless call had
    in_turn: BTreeMap<String, String>,
    /// operation (across turns) → the derived key its first keyless call had
    keyless: BTreeMap<String, String>,
}

/// One call of an idempotent tool, as the store sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Keyed {
    /// The key the call was given (folded) or derived.
    pub key: String,
    /// Whether the caller gave the key.
    pub given: bool,
    /// The digest of the tool and canonical arguments, across turns.
    pub operation: String,
    /// The same within the call's turn: a keyless retry in one turn.
    pub turn_operation: String,
    /// The arguments the fixture should see (without the key).
    pub args: Value,
}

/// The key of a call of `tool` whose schema declares `declared` arguments (all, when
/// `None`), and the arguments the fixture should see.
pub fn key_and_args(scope: &str, turn: u32, tool: &str, args: &Value, declared: Option<&[String]>) -> Keyed {
    let mut rest = args.clone();
    let given = rest.as_object_mut().and_then(|m| m.remove(KEY_ARGUMENT)).and_then(|k| match k {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    });
    let canonical = canonical_args(&rest, declared);
    let operation = digest(&json!({"scope": scope, "tool": tool, "args": canonical}), &format!("{scope}/{tool}"));
    let turn_operation = digest(
        &json!({"scope": scope, "turn": turn, "tool": tool, "args": canonical}),
        &format!("{scope}/{turn}/{tool}"),
    );
    match given {
        Some(key) => Keyed {
            key: format!("given:{}", normalize::fold(&key)),
            given: true,
            operation,
            turn_operation,
            args: rest,
        },
        None => {
            // the logged key digests the arguments as sent (logs written before
            // normalisation keep their bytes); retries find it through `turn_operation`
            let material = json!({"scope": scope, "turn": turn, "tool": tool, "args": args});
            let key = format!("derived:{}", digest(&material, &format!("{scope}/{turn}/{tool}")));
            Keyed { key, given: false, operation, turn_operation, args: args.clone() }
        }
    }
}

fn digest(material: &Value, fallback: &str) -> String {
    canon::canonical_digest(Context::Content, material)
        .map(|d| d.to_hex()[..32].to_string())
        .unwrap_or_else(|_| fallback.to_string())
}

/// See the module doc: declared arguments only, strings folded, numbers by value.
fn canonical_args(args: &Value, declared: Option<&[String]>) -> Value {
    match args {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| declared.is_none_or(|d| d.iter().any(|n| n == *k)))
                .map(|(k, v)| (k.clone(), canonical_value(v)))
                .collect::<Map<String, Value>>(),
        ),
        other => canonical_value(other),
    }
}

fn canonical_value(value: &Value) -> Value {
    match value {
        Value::String(s) => match s.trim().parse::<f64>() {
            Ok(n) if n.is_finite() => json!(n),
            _ => Value::String(normalize::fold(s)),
        },
        Value::Number(n) => n.as_f64().map_or_else(|| value.clone(), |f| json!(f)),
        Value::Array(items) => Value::Array(items.iter().map(canonical_value).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), canonical_value(v))).collect()),
        other => other.clone(),
    }
}

impl IdempotencyStore {
    /// The key this call runs under: its own, or — for a keyless call of an operation an
    /// earlier call named — that call's key.
    pub fn key_for(&self, call: &Keyed) -> String {
        if call.given {
            if !self.seen.contains_key(&call.key)
                && !switches::off("keyless-dedup")
                && let Some(key) = self.keyless.get(&call.operation)
            {
                return key.clone();
            }
            return call.key.clone();
        }
        if !switches::off("keyless-dedup")
            && let Some(key) = self.keyed.get(&call.operation)
        {
            return key.clone();
        }
        self.in_turn.get(&call.turn_operation).cloned().unwrap_or_else(|| call.key.clone())
    }

    /// The earlier result for `key`, if the operation already happened.
    pub fn replay(&self, key: &str) -> Option<&(Value, u64)> {
        self.seen.get(key)
    }

    /// Remember a successful execution (failed ones may be retried).
    pub fn record(&mut self, call: &Keyed, key: String, result: Value, seq: u64) {
        if call.given {
            self.keyed.entry(call.operation.clone()).or_insert_with(|| key.clone());
        } else {
            self.in_turn.entry(call.turn_operation.clone()).or_insert_with(|| key.clone());
            self.keyless.entry(call.operation.clone()).or_insert_with(|| key.clone());
        }
        self.seen.entry(key).or_insert((result, seq));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared() -> Vec<String> {
        vec!["to".into(), "amount_usd".into()]
    }

    fn key(turn: u32, args: Value) -> Keyed {
        key_and_args("c/0", turn, "transfer", &args, Some(&declared()))
    }

    #[test]
    fn a_given_key_names_the_operation_whatever_the_turn_and_is_not_passed_on() {
        let a = key(1, json!({"to": "bob", "idempotency_key": "inv-42"}));
        let b = key(7, json!({"idempotency_key": "inv-42", "to": "bob"}));
        assert_eq!(a.key, b.key);
        assert_eq!(a.args, json!({"to": "bob"}));
    }

    #[test]
    fn a_given_key_is_compared_after_normalisation() {
        let base = key(0, json!({"idempotency_key": "PO-17"})).key;
        for variant in [json!("po-17"), json!(" PO-17 "), json!("PO\u{2010}17"), json!("PO\u{2011}17")] {
            assert_eq!(key(0, json!({"idempotency_key": variant})).key, base, "{variant}");
        }
        assert_eq!(key(0, json!({"idempotency_key": 42})).key, key(0, json!({"idempotency_key": "42"})).key);
        assert_ne!(key(0, json!({"idempotency_key": "PO-18"})).key, base);
    }

    /// The key `call` runs under after `first` executed.
    fn after(first: &Keyed, call: &Keyed) -> String {
        let mut store = IdempotencyStore::default();
        let k = store.key_for(first);
        store.record(first, k, json!({"status": "sent"}), 1);
        store.key_for(call)
    }

    #[test]
    fn a_derived_key_is_the_same_for_a_retry_in_the_same_turn_and_differs_across_turns() {
        let a = key(1, json!({"to": "bob", "amount_usd": 5}));
        let b = key(1, json!({"amount_usd": 5.0, "to": "bob"}));
        let c = key(2, json!({"to": "bob", "amount_usd": 5}));
        assert_eq!(a.key, b.key, "canonical arguments: key order and number spelling do not matter");
        assert_eq!(after(&a, &b), a.key);
        assert_ne!(after(&a, &c), a.key);
    }

    #[test]
    fn case_an_extra_argument_and_a_numeric_string_do_not_make_a_new_operation() {
        let a = key(1, json!({"to": "acme@example.com", "amount_usd": 75}));
        let b = key(1, json!({"to": "ACME@Example.com", "amount_usd": "75", "memo": "retry"}));
        assert_eq!(after(&a, &b), a.key);
        // a different amount is a different operation
        assert_ne!(after(&a, &key(1, json!({"to": "acme@example.com", "amount_usd": 76}))), a.key);
    }

    #[test]
    fn a_keyless_retry_of_a_keyed_operation_takes_its_key_in_any_turn() {
        let mut store = IdempotencyStore::default();
        let first = key(0, json!({"to": "acme@example.com", "amount_usd": 300, "idempotency_key": "po-17"}));
        let k = store.key_for(&first);
        store.record(&first, k.clone(), json!({"status": "sent"}), 5);
        let retry = key(3, json!({"to": "acme@example.com", "amount_usd": 300}));
        assert_eq!(store.key_for(&retry), k);
        assert_eq!(store.replay(&k).map(|(_, seq)| *seq), Some(5));
        // another payment is not swallowed
        let other = key(3, json!({"to": "acme@example.com", "amount_usd": 301}));
        assert_ne!(store.key_for(&other), k);
    }

    #[test]
    fn a_keyed_retry_of_a_keyless_operation_is_that_operation_again() {
        let mut store = IdempotencyStore::default();
        let first = key(0, json!({"to": "acme@example.com", "amount_usd": 300}));
        let k = store.key_for(&first);
        store.record(&first, k.clone(), json!({"status": "sent"}), 5);
        let retry = key(2, json!({"to": "ACME@example.com", "amount_usd": "300", "idempotency_key": "po-17"}));
        assert_eq!(store.key_for(&retry), k);
        // another payment with a key of its own is not swallowed
        let other = key(2, json!({"to": "acme@example.com", "amount_usd": 301, "idempotency_key": "po-18"}));
        assert_ne!(store.key_for(&other), k);
    }
}
