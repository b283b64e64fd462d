//! Applying matchers: the one assertion grammar (`{"target": …, "matcher": {…}}`) is
//! compiled when a case loads (`dataset::expect`); here a compiled matcher judges a value.
//!
//! Two matchers call out of the process: `custom` (the team's own grader program) and
//! `judge` (a recorded LLM judge). They are applied through a [`Caller`], which the
//! runner provides while a run's log is still open, so what they were asked and what
//! they answered goes into that log; everywhere else ([`Matcher::apply`]) they fail.

use serde_json::Value;

use crate::canon::json_eq;
use crate::containment::contains;
use crate::dataset::expect::custom::CustomSpec;
use crate::dataset::expect::judge::JudgeSpec;
use crate::dataset::expect::{Matcher, brief};

/// What a matcher that calls out is served by: the runner while a run's log is open.
/// Each method returns the matcher's outcome; a call that could not be made or read is a
/// failed outcome, and the caller also keeps it as the run's error.
pub trait Caller {
    /// The assertion about to be applied targets `target` (named in what is logged).
    fn begin(&mut self, _target: &str) {}
    fn custom(&mut self, spec: &CustomSpec, value: &Value) -> Matched;
    fn judge(&mut self, spec: &JudgeSpec, value: &Value) -> Matched;
}

/// Outside a run's log there is nothing to call: custom graders and judges fail.
pub struct NoCalls;

impl Caller for NoCalls {
    fn custom(&mut self, spec: &CustomSpec, _: &Value) -> Matched {
        Matched::fail(format!("{} grades one run's log and cannot be applied here", spec.describe()))
    }
    fn judge(&mut self, spec: &JudgeSpec, _: &Value) -> Matched {
        Matched::fail(format!("judge {} grades one run's log and cannot be applied here", spec.profile))
    }
}

/// Result of applying a matcher: whether it held, and one line saying why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub passed: bool,
    pub reason: String,
}

impl Matched {
    pub fn pass(reason: impl Into<String>) -> Self {
        Matched { passed: true, reason: reason.into() }
    }
    pub fn fail(reason: impl Into<String>) -> Self {
        Matched { passed: false, reason: reason.into() }
    }
}

impl Matcher {
    /// Apply to an extracted value; `None` means the target had no value, which only a
    /// `not` (of a positive matcher) accepts. Custom graders and judges fail here: they
    /// are applied with [`Matcher::apply_with`] while a run's log is open.
    pub fn apply(&self, actual: Option<&Value>) -> Matched {
        self.apply_with(actual, &mut NoCalls)
    }

    /// [`Matcher::apply`], with custom graders and judges served by `caller`. Each
    /// matcher is applied at most once (combinators stop at the first deciding member),
    /// so every call out is made once and in the order the matcher is written.
    pub fn apply_with(&self, actual: Option<&Value>, caller: &mut dyn Caller) -> Matched {
        let Some(value) = actual else {
            return match self {
                Matcher::Not(_) => Matched::pass("no value, so the negated matcher cannot hold"),
                Matcher::AnyOf(ms) => ms
                    .iter()
                    .map(|m| m.apply_with(None, caller))
                    .find(|o| o.passed)
                    .unwrap_or_else(|| Matched::fail("no value at this target")),
                _ => Matched::fail("no value at this target"),
            };
        };
        match self {
            Matcher::Exact(want) => {
                if json_eq(want, value) {
                    Matched::pass(format!("equals {}", brief(want)))
                } else {
                    Matched::fail(format!("expected exactly {}, got {}", brief(want), brief(value)))
                }
            }
            Matcher::Contains(want) => {
                if contains(want, value) {
                    Matched::pass(format!("contains {}", brief(want)))
                } else {
                    Matched::fail(format!("expected to contain {}, got {}", brief(want), brief(value)))
                }
            }
            Matcher::Regex(re) => match value.as_str() {
                Some(s) if re.is_match(s) => Matched::pass(format!("matches /{}/", re.as_str())),
                Some(_) => Matched::fail(format!("expected a match for /{}/, got {}", re.as_str(), brief(value))),
                None => Matched::fail(format!("regex needs a string, got {}", brief(value))),
            },
            Matcher::Schema(validator, schema) => match validator.iter_errors(value).next() {
                None => Matched::pass(format!("satisfies {}", brief(schema))),
                Some(e) => Matched::fail(format!("{} does not satisfy {}: {e}", brief(value), brief(schema))),
            },
            Matcher::Not(inner) => {
                let o = inner.apply_with(Some(value), caller);
                if o.passed {
                    Matched::fail(format!("expected not: {}", o.reason))
                } else {
                    Matched::pass(format!("not: {}", o.reason))
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
                Matched::fail(format!("none of {} matchers held: {}", ms.len(), reasons.join("; ")))
            }
            Matcher::AllOf(ms) => {
                for m in ms {
                    let o = m.apply_with(Some(value), caller);
                    if !o.passed {
                        return Matched::fail(o.reason);
                    }
                }
                Matched::pass(format!("all {} matchers held", ms.len()))
            }
            Matcher::Custom(spec) => caller.custom(spec, value),
            Matcher::Judge(spec) => caller.judge(spec, value),
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
}
