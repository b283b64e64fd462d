//! What a dataset metric block returns: per-target values, pass/fail, and failure messages
//! that name the failing target, its value and its bound
//! (`stability.weakest_score = 0.42, below the bound 0.5`).
//!
//! Two kinds of block exist. *Per-run* blocks (`trajectory`, `trajectory_axes`,
//! `golden_path`, `recovery`, `narrative`) are gated over **every** run of a case, not only
//! the last: the block passes when every run passes. *Across-run* blocks (`stability`,
//! `reliability`) compute one set of targets from all runs together.
//!
//! Blocks that accept an `expect` list (`stability`, `reliability`) only check its shape
//! here; the assertions themselves belong to the one assertion grammar in `grade/`, so the
//! runner grades [`BlockOutcome::assertions`] against [`BlockOutcome::targets`].

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use super::{MetricError, expect_object, pointer_join, reject_unknown_keys, type_name};

/// One dataset metric block: parsed once at load, then graded over a case's runs.
pub trait CaseBlock: Sized {
    /// The block's key in a dataset case (`"trajectory"`, `"golden_path"`, …).
    const KEY: &'static str;

    /// Parse the block, applying docs/metrics.md defaults and load-time rules. Pointers in
    /// errors are relative to the block (use [`MetricError::under`] to place it).
    fn from_block(block: &Value) -> Result<Self, MetricError>;

    /// The fewest runs a case needs for this block to mean anything; the dataset loader
    /// refuses a case with fewer.
    fn min_runs(&self) -> usize {
        1
    }

    /// Grade the case's runs (trace envelopes, in run order; see each block's docs).
    fn evaluate(&self, runs: &[Value]) -> Result<BlockOutcome, MetricError>;
}

/// The bound a gate holds a target to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "op", content = "value", rename_all = "snake_case")]
pub enum Bound {
    /// value ≥ bound.
    AtLeast(f64),
    /// value ≤ bound.
    AtMost(f64),
}

impl Bound {
    /// Does `value` hold? A non-numeric value (e.g. `null` for an absent time) never does.
    pub fn holds(&self, value: &Value) -> bool {
        match (self, value.as_f64()) {
            (Bound::AtLeast(b), Some(v)) => v >= *b,
            (Bound::AtMost(b), Some(v)) => v <= *b,
            (_, None) => false,
        }
    }

    fn phrase(&self) -> String {
        match self {
            Bound::AtLeast(b) => format!("below the bound {b}"),
            Bound::AtMost(b) => format!("above the bound {b}"),
        }
    }
}

/// A target that did not hold its bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateFailure {
    /// The run (0-based) for a per-run block; `None` for an across-run target.
    pub run: Option<usize>,
    /// Full dot-path target name, e.g. `trajectory.passed`.
    pub target: String,
    /// The value that failed (`null` when the metric could not produce one).
    pub value: Value,
    pub bound: Bound,
    /// Why, in one line, when the metric knows more than the number (first mismatch, …).
    pub detail: Option<String>,
}

impl fmt::Display for GateFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(run) = self.run {
            write!(f, "run {run}: ")?;
        }
        write!(f, "{} = {}, {}", self.target, self.value, self.bound.phrase())?;
        if let Some(detail) = &self.detail {
            write!(f, " ({detail})")?;
        }
        Ok(())
    }
}

/// One run's targets under a per-run block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOutcome {
    pub run: usize,
    pub passed: bool,
    pub targets: BTreeMap<String, Value>,
    pub failures: Vec<GateFailure>,
}

/// Everything a block decided about one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockOutcome {
    /// The block key (`"stability"`, …).
    pub block: &'static str,
    /// Every gate this block grades itself held, in every run. Does not include
    /// [`BlockOutcome::assertions`], which the runner grades.
    pub passed: bool,
    /// Per-run blocks: one entry per run, in run order. Empty for across-run blocks.
    pub runs: Vec<RunOutcome>,
    /// Across-run blocks: the case's targets. Per-run blocks: empty (see `runs`).
    pub targets: BTreeMap<String, Value>,
    /// All failures, run order first, each renders as one line.
    pub failures: Vec<GateFailure>,
    /// The block's own `expect` assertions, shape-checked at load, for the runner to grade
    /// against `targets` with the assertion grammar. When non-empty they replace the
    /// block's default gate.
    pub assertions: Vec<Value>,
}

impl BlockOutcome {
    /// Fold per-run outcomes: the block passes when every run does.
    pub fn per_run(block: &'static str, runs: Vec<RunOutcome>) -> Self {
        let failures: Vec<GateFailure> = runs.iter().flat_map(|r| r.failures.clone()).collect();
        BlockOutcome {
            block,
            passed: failures.is_empty(),
            runs,
            targets: BTreeMap::new(),
            failures,
            assertions: Vec::new(),
        }
    }

    /// An across-run outcome from its targets and the gates it was held to.
    pub fn across(
        block: &'static str,
        targets: BTreeMap<String, Value>,
        gates: &[(&str, Bound)],
        assertions: Vec<Value>,
    ) -> Self {
        let failures = check(None, &targets, gates, None);
        BlockOutcome { block, passed: failures.is_empty(), runs: Vec::new(), targets, failures, assertions }
    }

    /// One line per failure, for reporters.
    pub fn messages(&self) -> Vec<String> {
        self.failures.iter().map(ToString::to_string).collect()
    }
}

/// Hold `targets` to `gates`; a gate whose target is missing fails with `null`.
pub fn check(
    run: Option<usize>,
    targets: &BTreeMap<String, Value>,
    gates: &[(&str, Bound)],
    detail: Option<&str>,
) -> Vec<GateFailure> {
    gates
        .iter()
        .filter_map(|(target, bound)| {
            let value = targets.get(*target).cloned().unwrap_or(Value::Null);
            (!bound.holds(&value)).then(|| GateFailure {
                run,
                target: (*target).to_string(),
                value,
                bound: *bound,
                detail: detail.map(str::to_string),
            })
        })
        .collect()
}

/// Build a [`RunOutcome`] from a run's targets and gates.
pub fn run_outcome(
    run: usize,
    targets: BTreeMap<String, Value>,
    gates: &[(&str, Bound)],
    detail: Option<&str>,
) -> RunOutcome {
    let failures = check(Some(run), &targets, gates, detail);
    RunOutcome { run, passed: failures.is_empty(), targets, failures }
}

/// Matcher keys that call a model. They may never gate a deterministic metric block.
pub const LLM_MATCHER_KEYS: &[&str] = &["llm", "llm_judge", "judge"];

/// Shape-check a block's `expect` list: each entry `{"target", "matcher"}` with a target
/// among `known` and no LLM matcher anywhere inside the matcher (`not`, `any_of`,
/// `all_of` are searched too). The matcher grammar itself is validated by `grade/`.
pub fn parse_block_assertions(
    value: &Value,
    pointer: &str,
    block: &'static str,
    known: &[String],
) -> Result<Vec<Value>, MetricError> {
    let items = value.as_array().ok_or_else(|| MetricError::WrongType {
        pointer: pointer.to_string(),
        expected: "an array of assertions",
        found: type_name(value),
    })?;
    for (i, item) in items.iter().enumerate() {
        let at = pointer_join(pointer, i);
        let object = expect_object(item, &at)?;
        reject_unknown_keys(object, &at, &["target", "matcher"])?;
        let target = match object.get("target") {
            Some(Value::String(t)) => t,
            Some(other) => {
                return Err(MetricError::WrongType {
                    pointer: pointer_join(&at, "target"),
                    expected: "a target name",
                    found: type_name(other),
                });
            }
            None => {
                return Err(MetricError::Missing { pointer: at, field: "target" });
            }
        };
        if !known.iter().any(|k| k == target) {
            return Err(MetricError::UnknownTarget {
                pointer: pointer_join(&at, "target"),
                block,
                target: target.clone(),
                known: known.to_vec(),
            });
        }
        let matcher =
            object.get("matcher").ok_or_else(|| MetricError::Missing { pointer: at.clone(), field: "matcher" })?;
        reject_llm_matcher(matcher, &pointer_join(&at, "matcher"), block)?;
    }
    Ok(items.clone())
}

fn reject_llm_matcher(matcher: &Value, pointer: &str, block: &'static str) -> Result<(), MetricError> {
    match matcher {
        Value::Object(map) => {
            for (key, inner) in map {
                let at = pointer_join(pointer, key);
                if LLM_MATCHER_KEYS.contains(&key.as_str()) {
                    return Err(MetricError::LlmMatcher { pointer: at, block, matcher: key.clone() });
                }
                // Only combinators hold further matchers; other values are operands.
                if matches!(key.as_str(), "not" | "any_of" | "all_of") {
                    reject_llm_matcher(inner, &at, block)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, m)| reject_llm_matcher(m, &pointer_join(pointer, i), block))
        }
        _ => Ok(()),
    }
}

/// `true`/`false` as the 0/1 docs/metrics.md exposes booleans as.
pub fn flag(b: bool) -> Value {
    Value::from(u8::from(b))
}

/// A finite float as JSON (NaN and infinities, which no metric should produce, become null).
pub fn float(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// Read an optional number bound from a block key.
pub(crate) fn optional_number(
    object: &serde_json::Map<String, Value>,
    key: &str,
    pointer: &str,
) -> Result<Option<f64>, MetricError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().filter(|x| x.is_finite()).map(Some).ok_or_else(|| MetricError::WrongType {
            pointer: pointer_join(pointer, key),
            expected: "a number",
            found: type_name(v),
        }),
    }
}

/// Read an optional boolean option from a block key.
pub(crate) fn optional_bool(
    object: &serde_json::Map<String, Value>,
    key: &str,
    pointer: &str,
) -> Result<Option<bool>, MetricError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(MetricError::WrongType {
            pointer: pointer_join(pointer, key),
            expected: "a boolean",
            found: type_name(v),
        }),
    }
}

/// Read an optional list of strings (tool names) from a block key.
pub(crate) fn optional_strings(
    object: &serde_json::Map<String, Value>,
    key: &str,
    pointer: &str,
) -> Result<Vec<String>, MetricError> {
    let at = pointer_join(pointer, key);
    match object.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str().map(str::to_string).ok_or_else(|| MetricError::WrongType {
                    pointer: pointer_join(&at, i),
                    expected: "a string",
                    found: type_name(v),
                })
            })
            .collect(),
        Some(v) => Err(MetricError::WrongType { pointer: at, expected: "an array of strings", found: type_name(v) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failure_names_the_target_its_value_and_its_bound() {
        // 0.42 < 0.5
        let targets = BTreeMap::from([("stability.weakest_score".to_string(), json!(0.42))]);
        let failures = check(None, &targets, &[("stability.weakest_score", Bound::AtLeast(0.5))], None);
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].to_string(), "stability.weakest_score = 0.42, below the bound 0.5");
    }

    #[test]
    fn a_missing_target_fails_its_gate_as_null() {
        let failures = check(Some(2), &BTreeMap::new(), &[("recovery.time_to_recovery_ms", Bound::AtMost(10.0))], None);
        assert_eq!(failures[0].to_string(), "run 2: recovery.time_to_recovery_ms = null, above the bound 10");
    }

    #[test]
    fn an_llm_matcher_nested_in_a_combinator_is_refused() {
        let known = vec!["stability.score".to_string()];
        let expect =
            json!([{"target": "stability.score", "matcher": {"any_of": [{"schema": {}}, {"llm_judge": "ok?"}]}}]);
        let err = parse_block_assertions(&expect, "/expect", "stability", &known).unwrap_err();
        assert_eq!(err.pointer(), Some("/expect/0/matcher/any_of/1/llm_judge"));
        let fine = json!([{"target": "stability.score", "matcher": {"schema": {"minimum": 0.5}}}]);
        assert_eq!(parse_block_assertions(&fine, "/expect", "stability", &known).unwrap().len(), 1);
    }

    #[test]
    fn an_assertion_on_another_blocks_target_is_refused() {
        let known = vec!["stability.score".to_string()];
        let expect = json!([{"target": "trajectory.passed", "matcher": {"exact": 1}}]);
        let err = parse_block_assertions(&expect, "/expect", "stability", &known).unwrap_err();
        assert!(matches!(err, MetricError::UnknownTarget { .. }), "{err}");
    }
}
