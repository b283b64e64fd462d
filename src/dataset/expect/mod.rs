//! What a case expects, as data: assertions (`{"target", "matcher", "description"?}`)
//! and the one matcher grammar, compiled when the case loads so that a bad regex or a
//! malformed JSON Schema is a load error with its place, never a silent pass at run time.
//!
//! Two matchers call out of the process: `custom` (the team's own grader program,
//! [`custom`]) and `judge` (a recorded LLM judge, [`judge`]). Their specs are parsed
//! here; applying any matcher to a value, and making those calls, is `grade`'s.

pub mod custom;
pub mod judge;

use std::fmt;
use std::sync::Arc;

use regex::Regex;
use serde_json::Value;

use custom::CustomSpec;
use judge::JudgeSpec;

/// A compiled assertion from a case's `expect`.
#[derive(Debug)]
pub struct Assertion {
    pub target: String,
    /// Shared between cases that write the same matcher (see the dataset loader).
    pub matcher: Arc<Matcher>,
    /// The matcher as written, for reports.
    pub spec: Value,
    pub description: Option<String>,
}

pub enum Matcher {
    /// Deep equality (key order and number spelling irrelevant).
    Exact(Value),
    /// Object subset / substring / multiset (see [`contains`]).
    Contains(Value),
    /// A regex search in a string value.
    Regex(Regex),
    /// JSON Schema validation; also the numeric gate: `{"schema": {"minimum": 0.5}}`.
    Schema(Box<jsonschema::Validator>, Value),
    Not(Box<Matcher>),
    AnyOf(Vec<Matcher>),
    AllOf(Vec<Matcher>),
    /// The team's own grader program (see [`custom`]).
    Custom(CustomSpec),
    /// A recorded LLM judge (see [`judge`]).
    Judge(Box<JudgeSpec>),
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// A compile error: where in the matcher (JSON Pointer relative to it) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatcherError {
    pub pointer: String,
    pub message: String,
}

/// Short rendering of a value for reasons: canonical, cut at 80 characters.
pub fn brief(value: &Value) -> String {
    let text = crate::canon::to_canonical_string(value).unwrap_or_else(|_| value.to_string());
    if text.chars().count() > 80 {
        let cut: String = text.chars().take(77).collect();
        format!("{cut}...")
    } else {
        text
    }
}

impl Matcher {
    pub fn compile(spec: &Value) -> Result<Matcher, MatcherError> {
        let err = |pointer: &str, message: String| MatcherError { pointer: pointer.to_string(), message };
        let Some(obj) = spec.as_object() else {
            return Err(err("", "a matcher is an object with exactly one key".into()));
        };
        if obj.len() != 1 {
            return Err(err("", format!("a matcher has exactly one key, found {}", obj.len())));
        }
        let (name, arg) = obj.iter().next().expect("one key");
        let nested = |key: &str, i: Option<usize>, e: MatcherError| MatcherError {
            pointer: match i {
                Some(i) => format!("/{key}/{i}{}", e.pointer),
                None => format!("/{key}{}", e.pointer),
            },
            message: e.message,
        };
        Ok(match name.as_str() {
            "exact" => Matcher::Exact(arg.clone()),
            "contains" => Matcher::Contains(arg.clone()),
            "regex" => {
                let pattern = arg.as_str().ok_or_else(|| err("/regex", "regex must be a string".into()))?;
                Matcher::Regex(Regex::new(pattern).map_err(|e| {
                    let detail = e.to_string().lines().last().unwrap_or_default().trim().to_string();
                    err("/regex", format!("invalid regex: {detail}"))
                })?)
            }
            "schema" => {
                if !arg.is_object() && !arg.is_boolean() {
                    return Err(err("/schema", "schema must be a JSON Schema object or boolean".into()));
                }
                if let Err(e) = jsonschema::meta::validate(arg) {
                    let at = e.instance_path().as_str().to_string();
                    return Err(err(&format!("/schema{at}"), format!("malformed JSON Schema: {e}")));
                }
                let validator = jsonschema::validator_for(arg)
                    .map_err(|e| err("/schema", format!("malformed JSON Schema: {e}")))?;
                Matcher::Schema(Box::new(validator), arg.clone())
            }
            "not" => Matcher::Not(Box::new(Matcher::compile(arg).map_err(|e| nested("not", None, e))?)),
            "any_of" | "all_of" => {
                let items = arg
                    .as_array()
                    .filter(|a| !a.is_empty())
                    .ok_or_else(|| err(&format!("/{name}"), format!("{name} takes a non-empty array of matchers")))?;
                let compiled = items
                    .iter()
                    .enumerate()
                    .map(|(i, m)| Matcher::compile(m).map_err(|e| nested(name, Some(i), e)))
                    .collect::<Result<Vec<_>, _>>()?;
                if name == "any_of" { Matcher::AnyOf(compiled) } else { Matcher::AllOf(compiled) }
            }
            "custom" => {
                Matcher::Custom(CustomSpec::parse(arg).map_err(|(at, message)| err(&format!("/custom{at}"), message))?)
            }
            "judge" => Matcher::Judge(Box::new(
                JudgeSpec::parse(arg).map_err(|(at, message)| err(&format!("/judge{at}"), message))?,
            )),
            other => {
                const NAMES: [&str; 9] =
                    ["exact", "contains", "regex", "schema", "not", "any_of", "all_of", "custom", "judge"];
                let hint = crate::diag::did_you_mean(other, NAMES)
                    .map(|s| format!(" (did you mean \"{s}\"?)"))
                    .unwrap_or_default();
                return Err(err(&format!("/{other}"), format!("unknown matcher \"{other}\"{hint}")));
            }
        })
    }

    /// Does this matcher (or one inside it) call a custom grader or a judge?
    pub fn calls_out(&self) -> bool {
        match self {
            Matcher::Custom(_) | Matcher::Judge(_) => true,
            Matcher::Not(m) => m.calls_out(),
            Matcher::AnyOf(ms) | Matcher::AllOf(ms) => ms.iter().any(Matcher::calls_out),
            _ => false,
        }
    }

    /// Does this matcher (or one inside it) ask a judge? A security verdict must rest on
    /// at least one assertion that does not.
    pub fn uses_judge(&self) -> bool {
        match self {
            Matcher::Judge(_) => true,
            Matcher::Not(m) => m.uses_judge(),
            Matcher::AnyOf(ms) | Matcher::AllOf(ms) => ms.iter().any(Matcher::uses_judge),
            _ => false,
        }
    }

    /// Every custom grader and judge inside this matcher, in the order written.
    pub fn callers(&self) -> Vec<&Matcher> {
        match self {
            Matcher::Custom(_) | Matcher::Judge(_) => vec![self],
            Matcher::Not(m) => m.callers(),
            Matcher::AnyOf(ms) | Matcher::AllOf(ms) => ms.iter().flat_map(Matcher::callers).collect(),
            _ => Vec::new(),
        }
    }

    /// One-line rendering of the matcher for reports.
    pub fn describe(&self) -> String {
        match self {
            Matcher::Exact(v) => format!("exact {}", brief(v)),
            Matcher::Contains(v) => format!("contains {}", brief(v)),
            Matcher::Regex(r) => format!("regex /{}/", r.as_str()),
            Matcher::Schema(_, s) => format!("schema {}", brief(s)),
            Matcher::Not(m) => format!("not ({})", m.describe()),
            Matcher::AnyOf(ms) => {
                format!("any_of [{}]", ms.iter().map(Matcher::describe).collect::<Vec<_>>().join(", "))
            }
            Matcher::AllOf(ms) => {
                format!("all_of [{}]", ms.iter().map(Matcher::describe).collect::<Vec<_>>().join(", "))
            }
            Matcher::Custom(spec) => spec.describe(),
            Matcher::Judge(spec) => spec.describe(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bad_matchers_are_compile_errors_with_their_place() {
        let e = Matcher::compile(&json!({"all_of": [{"exact": 1}, {"regex": "("}]})).unwrap_err();
        assert_eq!(e.pointer, "/all_of/1/regex");
        assert!(e.message.starts_with("invalid regex"), "{}", e.message);
        let e = Matcher::compile(&json!({"schema": {"type": "intger"}})).unwrap_err();
        assert!(e.pointer.starts_with("/schema"), "{}", e.pointer);
        assert!(e.message.contains("malformed JSON Schema"));
        let e = Matcher::compile(&json!({"contain": "x"})).unwrap_err();
        assert_eq!(e.message, "unknown matcher \"contain\" (did you mean \"contains\"?)");
    }
}
