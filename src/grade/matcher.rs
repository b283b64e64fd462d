//! Matchers: the one assertion grammar (`{"target": …, "matcher": {…}}`).
//!
//! A matcher is compiled once at load time, so a bad regex or a malformed JSON Schema
//! is a load error with its place, never a silent pass at run time.
//!
//! Two matchers call out of the process: `custom` (the team's own grader program) and
//! `judge` (a recorded LLM judge). They are applied through a [`Caller`], which the
//! runner provides while a run's log is still open, so what they were asked and what
//! they answered goes into that log; everywhere else ([`Matcher::apply`]) they fail.

use std::fmt;

use regex::Regex;
use serde_json::Value;

use super::custom::CustomSpec;
use super::judge::JudgeSpec;
use crate::canon::json_eq;
use crate::containment::contains;

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
    /// The team's own grader program (see [`super::custom`]).
    Custom(CustomSpec),
    /// A recorded LLM judge (see [`super::judge`]).
    Judge(Box<JudgeSpec>),
}

/// What a matcher that calls out is served by: the runner while a run's log is open.
/// Each method returns the matcher's outcome; a call that could not be made or read is a
/// failed outcome, and the caller also keeps it as the run's error.
pub trait Caller {
    /// The assertion about to be applied targets `target` (named in what is logged).
    fn begin(&mut self, _target: &str) {}
    fn custom(&mut self, spec: &CustomSpec, value: &Value) -> Outcome;
    fn judge(&mut self, spec: &JudgeSpec, value: &Value) -> Outcome;
}

/// Outside a run's log there is nothing to call: custom graders and judges fail.
pub struct NoCalls;

impl Caller for NoCalls {
    fn custom(&mut self, spec: &CustomSpec, _: &Value) -> Outcome {
        Outcome::fail(format!("{} grades one run's log and cannot be applied here", spec.describe()))
    }
    fn judge(&mut self, spec: &JudgeSpec, _: &Value) -> Outcome {
        Outcome::fail(format!("judge {} grades one run's log and cannot be applied here", spec.profile))
    }
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

/// Result of applying a matcher: whether it held, and one line saying why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub passed: bool,
    pub reason: String,
}

impl Outcome {
    pub fn pass(reason: impl Into<String>) -> Self {
        Outcome { passed: true, reason: reason.into() }
    }
    pub fn fail(reason: impl Into<String>) -> Self {
        Outcome { passed: false, reason: reason.into() }
    }
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

    /// Apply to an extracted value; `None` means the target had no value, which only a
    /// `not` (of a positive matcher) accepts. Custom graders and judges fail here: they
    /// are applied with [`Matcher::apply_with`] while a run's log is open.
    pub fn apply(&self, actual: Option<&Value>) -> Outcome {
        self.apply_with(actual, &mut NoCalls)
    }

    /// [`Matcher::apply`], with custom graders and judges served by `caller`. Each
    /// matcher is applied at most once (combinators stop at the first deciding member),
    /// so every call out is made once and in the order the matcher is written.
    pub fn apply_with(&self, actual: Option<&Value>, caller: &mut dyn Caller) -> Outcome {
        let Some(value) = actual else {
            return match self {
                Matcher::Not(_) => Outcome::pass("no value, so the negated matcher cannot hold"),
                Matcher::AnyOf(ms) => ms
                    .iter()
                    .map(|m| m.apply_with(None, caller))
                    .find(|o| o.passed)
                    .unwrap_or_else(|| Outcome::fail("no value at this target")),
                _ => Outcome::fail("no value at this target"),
            };
        };
        match self {
            Matcher::Exact(want) => {
                if json_eq(want, value) {
                    Outcome::pass(format!("equals {}", brief(want)))
                } else {
                    Outcome::fail(format!("expected exactly {}, got {}", brief(want), brief(value)))
                }
            }
            Matcher::Contains(want) => {
                if contains(want, value) {
                    Outcome::pass(format!("contains {}", brief(want)))
                } else {
                    Outcome::fail(format!("expected to contain {}, got {}", brief(want), brief(value)))
                }
            }
            Matcher::Regex(re) => match value.as_str() {
                Some(s) if re.is_match(s) => Outcome::pass(format!("matches /{}/", re.as_str())),
                Some(_) => Outcome::fail(format!("expected a match for /{}/, got {}", re.as_str(), brief(value))),
                None => Outcome::fail(format!("regex needs a string, got {}", brief(value))),
            },
            Matcher::Schema(validator, schema) => match validator.iter_errors(value).next() {
                None => Outcome::pass(format!("satisfies {}", brief(schema))),
                Some(e) => Outcome::fail(format!("{} does not satisfy {}: {e}", brief(value), brief(schema))),
            },
            Matcher::Not(inner) => {
                let o = inner.apply_with(Some(value), caller);
                if o.passed {
                    Outcome::fail(format!("expected not: {}", o.reason))
                } else {
                    Outcome::pass(format!("not: {}", o.reason))
                }
            }
            Matcher::AnyOf(ms) => {
                let mut reasons = Vec::new();
                for m in ms {
                    let o = m.apply_with(Some(value), caller);
                    if o.passed {
                        return o;
                    }
                    reasons.push(o.reason);
                }
                Outcome::fail(format!("none of {} matchers held: {}", ms.len(), reasons.join("; ")))
            }
            Matcher::AllOf(ms) => {
                for m in ms {
                    let o = m.apply_with(Some(value), caller);
                    if !o.passed {
                        return Outcome::fail(o.reason);
                    }
                }
                Outcome::pass(format!("all {} matchers held", ms.len()))
            }
            Matcher::Custom(spec) => caller.custom(spec, value),
            Matcher::Judge(spec) => caller.judge(spec, value),
        }
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

    fn check(spec: Value, actual: Value) -> bool {
        Matcher::compile(&spec).unwrap().apply(Some(&actual)).passed
    }

    #[test]
    fn exact_ignores_key_order_but_not_extra_keys() {
        assert!(check(json!({"exact": {"a": 1, "b": 2}}), json!({"b": 2, "a": 1.0})));
        assert!(!check(json!({"exact": {"a": 1}}), json!({"a": 1, "b": 2})));
    }

    #[test]
    fn schema_is_the_numeric_gate() {
        assert!(check(json!({"schema": {"minimum": 1}}), json!(2)));
        assert!(!check(json!({"schema": {"minimum": 1}}), json!(0)));
    }

    #[test]
    fn regex_searches_strings_and_refuses_other_types() {
        assert!(check(json!({"regex": "^tr.*r$"}), json!("transfer")));
        let o = Matcher::compile(&json!({"regex": "x"})).unwrap().apply(Some(&json!(5)));
        assert!(!o.passed && o.reason.contains("needs a string"));
    }

    #[test]
    fn combinators_compose() {
        assert!(check(json!({"not": {"contains": "mallory"}}), json!("alice@example.com")));
        assert!(check(json!({"any_of": [{"exact": 1}, {"exact": 2}]}), json!(2)));
        assert!(!check(json!({"all_of": [{"schema": {"type": "integer"}}, {"exact": 3}]}), json!(2)));
    }

    #[test]
    fn an_absent_value_fails_everything_but_a_negation() {
        let m = Matcher::compile(&json!({"schema": {"minimum": 1}})).unwrap();
        assert!(!m.apply(None).passed);
        let n = Matcher::compile(&json!({"not": {"contains": "x"}})).unwrap();
        assert!(n.apply(None).passed);
    }

    #[test]
    fn custom_graders_and_judges_fail_where_no_run_can_serve_them() {
        let custom = Matcher::compile(&json!({"custom": {"command": ["g"]}})).unwrap();
        let o = custom.apply(Some(&json!(1)));
        assert!(!o.passed && o.reason.contains("cannot be applied here"), "{}", o.reason);
        assert!(custom.calls_out() && !custom.uses_judge());
        let judge = json!({"judge": {"rubric": "r.md", "profile": "p", "pass": {"exact": 5}}});
        let nested = Matcher::compile(&json!({"any_of": [{"exact": 1}, {"not": judge}]})).unwrap();
        assert!(nested.calls_out() && nested.uses_judge());
        assert_eq!(nested.callers().len(), 1);
        assert!(!Matcher::compile(&json!({"exact": 1})).unwrap().calls_out());
    }

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
