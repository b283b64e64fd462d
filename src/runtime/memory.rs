//! Built-in memory tools: `memory_write` and `memory_read`.
//!
//! Memory is written only through these tools, so every write is a proposal that passes
//! policy like any other call. The runtime's view of memory is the fold
//! ([`crate::event::fold`]) of the events it has emitted, never a second copy.

use serde_json::{Value, json};

use crate::pipeline::SafetyClass;

/// The memory tools' names, which the pipeline's load checks know too (a policy rule may
/// name them): defined there, below this stage.
pub const WRITE: &str = crate::pipeline::reach::MEMORY_TOOLS[0];
pub const READ: &str = crate::pipeline::reach::MEMORY_TOOLS[1];

/// Memory tiers, from most to least volatile (defined below this stage: a dataset's
/// memory targets are checked against them when it loads).
pub const TIERS: [&str; 4] = crate::dataset::target::MEMORY_TIERS;

pub fn is_builtin(tool: &str) -> bool {
    tool == WRITE || tool == READ
}

/// Policy class of a built-in: writes change state, reads do not.
pub fn class(tool: &str) -> SafetyClass {
    if tool == WRITE { SafetyClass::Write } else { SafetyClass::Read }
}

/// Tool descriptions the model sees beside the manifest's tools.
pub fn tool_descriptions() -> Value {
    json!([
        {"name": WRITE, "description": "Store a value in memory.",
         "input_schema": {"type": "object", "required": ["tier", "key", "value"],
                          "properties": {"tier": {"enum": TIERS}, "key": {"type": "string"},
                                         "value": {}, "confidence": {"type": "number"}}}},
        {"name": READ, "description": "Read a value from memory.",
         "input_schema": {"type": "object", "required": ["tier", "key"],
                          "properties": {"tier": {"enum": TIERS}, "key": {"type": "string"}}}}
    ])
}

/// A parsed memory call.
pub enum MemoryCall<'a> {
    Write { tier: &'a str, key: &'a str, value: &'a Value, confidence: Option<f64> },
    Read { tier: &'a str, key: &'a str },
}

/// Parse a call's arguments; an error is returned to the model as an error result.
///
/// The tier is the `tier` argument, or qualifies the key (`"semantic:user.email"`);
/// giving both, they must agree.
pub fn parse<'a>(tool: &str, args: &'a Value) -> Result<MemoryCall<'a>, String> {
    let raw_key = args
        .get("key")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .ok_or("missing non-empty string argument \"key\"")?;
    let qualified = raw_key.split_once(':').filter(|(t, _)| TIERS.contains(t));
    let (tier, key) = match (args.get("tier").and_then(Value::as_str), qualified) {
        (Some(t), Some((q, _))) if t != q => {
            return Err(format!("tier \"{t}\" disagrees with the key's tier \"{q}\""));
        }
        (_, Some((q, k))) => (q, k),
        (Some(t), None) => (t, raw_key),
        (None, None) => {
            return Err("missing the tier: a \"tier\" argument or a qualified key (\"semantic:name\")".into());
        }
    };
    if !TIERS.contains(&tier) {
        return Err(format!("unknown memory tier \"{tier}\" (expected one of {})", TIERS.join(", ")));
    }
    if key.is_empty() {
        return Err("empty key after the tier".into());
    }
    if tool == WRITE {
        let value = args.get("value").ok_or("missing argument \"value\"")?;
        let confidence = match args.get("confidence") {
            None | Some(Value::Null) => None,
            Some(c) => {
                Some(c.as_f64().filter(|c| (0.0..=1.0).contains(c)).ok_or("confidence must be a number in 0..=1")?)
            }
        };
        Ok(MemoryCall::Write { tier, key, value, confidence })
    } else {
        Ok(MemoryCall::Read { tier, key })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tier_qualified_key_names_its_tier() {
        let args = json!({"key": "semantic:user.email", "value": "a@x"});
        let Ok(MemoryCall::Write { tier, key, .. }) = parse(WRITE, &args) else { panic!("parses") };
        assert_eq!((tier, key), ("semantic", "user.email"));
        assert!(parse(WRITE, &json!({"tier": "episodic", "key": "semantic:k", "value": 1})).is_err());
        assert!(parse(READ, &json!({"key": "plain"})).is_err(), "no tier at all");
        // a colon that is not a tier is part of the key
        let args = json!({"tier": "working", "key": "url:https"});
        let Ok(MemoryCall::Read { key, .. }) = parse(READ, &args) else { panic!("parses") };
        assert_eq!(key, "url:https");
    }
}
