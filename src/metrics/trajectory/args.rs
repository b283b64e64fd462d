//! Args shapes of an expected call (docs/metrics.md §3) and the JSON-Pointer diffs that explain
//! why recorded args do not fit one.
//!
//! | args | meaning |
//! |---|---|
//! | `"any"` (or absent) | anything, including absent |
//! | `"ignore"` | deliberately not checked |
//! | `{"exact": v}` | deep-equal as JCS sees it (key order irrelevant, `1 == 1.0`, extra keys fail) |
//! | `{"subset": v}` | the `contains` relation of `grade::contains` |
//! | `{"schema": doc}` | valid under a JSON Schema (2020-12 unless `$schema` says otherwise) |
//!
//! A schema is compiled once, when the expectation is read; a schema that does not compile
//! is an error then, never a silent pass later.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::canon::json_eq;
use crate::containment::contains;
use crate::metrics::{MetricError, pointer_join, type_name};

/// How an expected call constrains the recorded args.
#[derive(Clone)]
pub enum ArgsShape {
    Any,
    Ignore,
    Exact(Value),
    Subset(Value),
    Schema { doc: Value, validator: Arc<jsonschema::Validator> },
}

impl fmt::Debug for ArgsShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ArgsShape({})", self.to_value())
    }
}

impl PartialEq for ArgsShape {
    fn eq(&self, other: &Self) -> bool {
        self.to_value() == other.to_value()
    }
}

/// One difference between the expected and the recorded args. `path` is a JSON Pointer into
/// the args (`/id`); a side that is absent at that path is `null`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub path: String,
    pub expected: Value,
    pub actual: Value,
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() { "the args" } else { &self.path };
        write!(f, "{path}: expected {}, got {}", self.expected, self.actual)
    }
}

impl ArgsShape {
    /// Read an args shape (`None` = absent = `"any"`); `pointer` names the `args` value.
    pub fn parse(value: Option<&Value>, pointer: &str) -> Result<Self, MetricError> {
        let Some(value) = value else {
            return Ok(ArgsShape::Any);
        };
        match value {
            Value::String(s) if s == "any" => Ok(ArgsShape::Any),
            Value::String(s) if s == "ignore" => Ok(ArgsShape::Ignore),
            Value::String(s) => Err(MetricError::UnknownArgsShape { pointer: pointer.into(), shape: s.clone() }),
            Value::Object(map) if map.len() == 1 => {
                let (key, inner) = map.iter().next().map(|(k, v)| (k.as_str(), v)).unwrap_or(("", value));
                match key {
                    "exact" => Ok(ArgsShape::Exact(inner.clone())),
                    "subset" => Ok(ArgsShape::Subset(inner.clone())),
                    "schema" => {
                        let validator = jsonschema::validator_for(inner).map_err(|e| MetricError::InvalidSchema {
                            pointer: pointer_join(pointer, "schema"),
                            reason: e.to_string(),
                        })?;
                        Ok(ArgsShape::Schema { doc: inner.clone(), validator: Arc::new(validator) })
                    }
                    other => Err(MetricError::UnknownArgsShape { pointer: pointer.into(), shape: other.into() }),
                }
            }
            Value::Object(map) => Err(MetricError::UnknownArgsShape {
                pointer: pointer.into(),
                shape: format!(
                    "an object with keys {:?} (exactly one of exact, subset, schema)",
                    map.keys().collect::<Vec<_>>()
                ),
            }),
            other => Err(MetricError::WrongType {
                pointer: pointer.into(),
                expected: "\"any\", \"ignore\" or an object with one of exact, subset, schema",
                found: type_name(other),
            }),
        }
    }

    /// The shape as written (for reports).
    pub fn to_value(&self) -> Value {
        match self {
            ArgsShape::Any => Value::from("any"),
            ArgsShape::Ignore => Value::from("ignore"),
            ArgsShape::Exact(v) => serde_json::json!({"exact": v}),
            ArgsShape::Subset(v) => serde_json::json!({"subset": v}),
            ArgsShape::Schema { doc, .. } => serde_json::json!({"schema": doc}),
        }
    }

    /// Do the recorded `args` (missing args already read as `{}`) fit the shape?
    pub fn matches(&self, args: &Value) -> bool {
        match self {
            ArgsShape::Any | ArgsShape::Ignore => true,
            ArgsShape::Exact(v) => json_eq(v, args),
            ArgsShape::Subset(v) => contains(v, args),
            ArgsShape::Schema { validator, .. } => validator.is_valid(args),
        }
    }

    /// Why `args` do not fit; empty when they do.
    pub fn diffs(&self, args: &Value) -> Vec<Diff> {
        let mut out = Vec::new();
        match self {
            ArgsShape::Any | ArgsShape::Ignore => {}
            ArgsShape::Exact(v) => exact_diffs(v, args, String::new(), &mut out),
            ArgsShape::Subset(v) => subset_diffs(v, args, String::new(), &mut out),
            ArgsShape::Schema { validator, .. } => {
                for error in validator.iter_errors(args) {
                    let path = error.instance_path().to_string();
                    let actual = args.pointer(&path).cloned().unwrap_or(Value::Null);
                    out.push(Diff { path, expected: Value::String(error.to_string()), actual });
                }
            }
        }
        out
    }
}

fn exact_diffs(expected: &Value, actual: &Value, path: String, out: &mut Vec<Diff>) {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            let mut keys: Vec<&String> = want.keys().chain(have.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let at = pointer_join(&path, key);
                match (want.get(key), have.get(key)) {
                    (Some(w), Some(h)) => exact_diffs(w, h, at, out),
                    (w, h) => out.push(Diff {
                        path: at,
                        expected: w.cloned().unwrap_or(Value::Null),
                        actual: h.cloned().unwrap_or(Value::Null),
                    }),
                }
            }
        }
        (Value::Array(want), Value::Array(have)) => {
            for i in 0..want.len().max(have.len()) {
                let at = pointer_join(&path, i);
                match (want.get(i), have.get(i)) {
                    (Some(w), Some(h)) => exact_diffs(w, h, at, out),
                    (w, h) => out.push(Diff {
                        path: at,
                        expected: w.cloned().unwrap_or(Value::Null),
                        actual: h.cloned().unwrap_or(Value::Null),
                    }),
                }
            }
        }
        _ if json_eq(expected, actual) => {}
        _ => out.push(Diff { path, expected: expected.clone(), actual: actual.clone() }),
    }
}

fn subset_diffs(expected: &Value, actual: &Value, path: String, out: &mut Vec<Diff>) {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, w) in want {
                let at = pointer_join(&path, key);
                match have.get(key) {
                    Some(h) if contains(w, h) => {}
                    Some(h) => subset_diffs(w, h, at, out),
                    None => out.push(Diff { path: at, expected: w.clone(), actual: Value::Null }),
                }
            }
        }
        // Strings, arrays (multisets) and scalars are reported whole: there is no finer place.
        _ if contains(expected, actual) => {}
        _ => out.push(Diff { path, expected: expected.clone(), actual: actual.clone() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shape(v: Value) -> ArgsShape {
        ArgsShape::parse(Some(&v), "/args").unwrap()
    }

    #[test]
    fn any_and_ignore_accept_everything_including_absent_args() {
        assert!(shape(json!("any")).matches(&json!({})));
        assert!(shape(json!("ignore")).matches(&json!({"x": 1})));
        assert_eq!(ArgsShape::parse(None, "/args").unwrap(), ArgsShape::Any);
    }

    #[test]
    fn exact_ignores_key_order_and_number_spelling_but_not_extra_keys() {
        let s = shape(json!({"exact": {"a": 1, "b": [1, 2]}}));
        assert!(s.matches(&json!({"b": [1.0, 2], "a": 1.0})));
        assert!(!s.matches(&json!({"a": 1, "b": [1, 2], "c": 0})));
        assert!(shape(json!({"exact": {}})).matches(&json!({})));
    }

    #[test]
    fn exact_diffs_point_at_each_differing_leaf() {
        let s = shape(json!({"exact": {"id": 8, "tags": ["a"], "gone": 1}}));
        let diffs = s.diffs(&json!({"id": 7, "tags": ["a", "b"], "extra": true}));
        let paths: Vec<&str> = diffs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["/extra", "/gone", "/id", "/tags/1"]);
        assert_eq!(diffs[2], Diff { path: "/id".into(), expected: json!(8), actual: json!(7) });
    }

    #[test]
    fn subset_uses_the_contains_relation() {
        let s = shape(json!({"subset": {"q": "rust", "opts": {"n": 1}}}));
        assert!(s.matches(&json!({"q": "rust lang", "opts": {"n": 1, "m": 2}, "x": 0})));
        let diffs = s.diffs(&json!({"q": "go", "opts": {"n": 2}}));
        assert_eq!(diffs.iter().map(|d| d.path.as_str()).collect::<Vec<_>>(), ["/opts/n", "/q"]);
    }

    #[test]
    fn schema_defaults_to_draft_2020_12() {
        // prefixItems exists only in 2020-12: ["x"] must fail {"prefixItems": [{"type": "integer"}]}
        let s = shape(json!({"schema": {"properties": {"p": {"prefixItems": [{"type": "integer"}]}}}}));
        assert!(!s.matches(&json!({"p": ["x"]})));
        assert!(s.matches(&json!({"p": [1, "x"]})));
    }

    #[test]
    fn schema_diffs_carry_the_instance_path_and_the_reason() {
        let s = shape(json!({"schema": {"properties": {"id": {"minimum": 8}}}}));
        let diffs = s.diffs(&json!({"id": 7}));
        assert_eq!(diffs.len(), 1);
        assert_eq!((diffs[0].path.as_str(), &diffs[0].actual), ("/id", &json!(7)));
    }

    #[test]
    fn a_malformed_schema_is_an_error_where_it_is_read() {
        let err = ArgsShape::parse(Some(&json!({"schema": {"type": "nope"}})), "/calls/0/args").unwrap_err();
        assert_eq!(err.pointer(), Some("/calls/0/args/schema"));
        assert!(ArgsShape::parse(Some(&json!({"schema": {"$ref": "http://example.com/s"}})), "").is_err());
        assert!(ArgsShape::parse(Some(&json!({"schema": {"pattern": "("}})), "").is_err());
    }

    #[test]
    fn unknown_shapes_are_errors_naming_the_shape() {
        let err = ArgsShape::parse(Some(&json!({"exactt": {}})), "/calls/2/args").unwrap_err();
        assert!(err.to_string().starts_with("/calls/2/args: unknown args shape \"exactt\""), "{err}");
        assert!(ArgsShape::parse(Some(&json!("anything")), "").is_err());
        assert!(ArgsShape::parse(Some(&json!({"exact": 1, "subset": 1})), "").is_err());
        assert!(ArgsShape::parse(Some(&json!(null)), "").is_err());
    }
}
