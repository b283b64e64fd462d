//! Trajectory validation: did the agent make the calls the case expects (docs/metrics.md §3)?
//!
//! An expected trace is a mode plus an ordered list of expected calls, each pinning a
//! tool name and an [`ArgsShape`]. The modes come from agent-evaluation practice
//! (mcptest-core's trajectory matchers, LangSmith's trajectory evaluators): `strict`
//! one-for-one, `subsequence` in order with extras allowed, `unordered`/`superset` as a
//! lower bound, `subset` as the over-call detector.
//!
//! Design choice: the three order-free modes use a **maximum bipartite matching**
//! ([`max_matching`], Hopcroft–Karp), so when any valid assignment of calls exists it is
//! found; only calls that answer to an expected name (looked up in a name index, each
//! recorded name split on `__` once) are compared, so 3,000 calls stay well under a second. A
//! first-fit scan false-fails as soon as argument shapes overlap (`any` grabbing the one
//! call an `exact` shape needed); that is a defect, not a convention. Every mismatch says
//! which expected call, which recorded call it was compared with, and JSON-Pointer diffs.

pub mod args;
pub mod canonical;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

pub use self::args::{ArgsShape, Diff};
use super::gate::{BlockOutcome, Bound, CaseBlock, flag, run_outcome};
use super::matching::max_matching;
use super::trace::{TracedCall, bare_name, read_tool_calls};
use super::{MetricError, expect_object, pointer_join, reject_unknown_keys, type_name};

/// How recorded calls must relate to the expected ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchMode {
    /// One-for-one, same length, every position matches (alias `exact_sequence`).
    Strict,
    /// Every expected call appears, in order, among the recorded calls.
    Subsequence,
    /// Every expected call matched to a distinct recorded call, any order; extras allowed.
    Unordered,
    /// Same outcome as `unordered`: the reference is a lower bound.
    Superset,
    /// Every recorded call matched to a distinct expected call; calling fewer is fine.
    Subset,
}

impl MatchMode {
    /// Read a mode name; `pointer` names the `mode` value.
    pub fn parse(value: &Value, pointer: &str) -> Result<Self, MetricError> {
        let name = value.as_str().ok_or_else(|| MetricError::WrongType {
            pointer: pointer.into(),
            expected: "a mode name",
            found: type_name(value),
        })?;
        match name {
            "strict" | "exact_sequence" => Ok(MatchMode::Strict),
            "subsequence" => Ok(MatchMode::Subsequence),
            "unordered" => Ok(MatchMode::Unordered),
            "superset" => Ok(MatchMode::Superset),
            "subset" => Ok(MatchMode::Subset),
            other => Err(MetricError::UnknownMode { pointer: pointer.into(), mode: other.into() }),
        }
    }
}

/// One expected call: a name (compared with the recorded name without its `<server>__`
/// wire prefix, or with the full recorded name) and an args shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedCall {
    pub name: String,
    pub args: ArgsShape,
}

impl ExpectedCall {
    /// Does `call` satisfy this expectation?
    pub fn matches(&self, call: &TracedCall) -> bool {
        call.is_named(&self.name) && self.args.matches(&call.args)
    }

    /// Read `{"name", "args"?}` or a bare name string (args `any`).
    pub fn parse(value: &Value, pointer: &str) -> Result<Self, MetricError> {
        if let Value::String(name) = value {
            return Ok(ExpectedCall { name: name.clone(), args: ArgsShape::Any });
        }
        let object = expect_object(value, pointer)?;
        reject_unknown_keys(object, pointer, &["name", "args"])?;
        let name = match object.get("name") {
            Some(Value::String(name)) => name.clone(),
            Some(other) => {
                return Err(MetricError::WrongType {
                    pointer: pointer_join(pointer, "name"),
                    expected: "a tool name",
                    found: type_name(other),
                });
            }
            None => {
                return Err(MetricError::Missing { pointer: pointer.into(), field: "name" });
            }
        };
        let args = ArgsShape::parse(object.get("args"), &pointer_join(pointer, "args"))?;
        Ok(ExpectedCall { name, args })
    }
}

/// An expected trace: the `trajectory` block, `{"mode"?, "calls": [...]}`. The mode
/// defaults to `strict`, the least permissive reading of "these calls".
///
/// Input per run: a trace envelope; only `tool_calls` (or `trace.tool_calls`) is read.
/// Default gate `trajectory.passed ≥ 1`, held in every run.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedTrace {
    pub mode: MatchMode,
    pub calls: Vec<ExpectedCall>,
}

/// The dataset `trajectory` block is an expected trace.
pub type TrajectoryBlock = ExpectedTrace;

const TRAJECTORY_KEYS: &[&str] = &["mode", "calls"];

impl ExpectedTrace {
    /// Read `{"mode"?, "calls"}`; `pointer` names the object.
    pub fn parse(value: &Value, pointer: &str) -> Result<Self, MetricError> {
        let object = expect_object(value, pointer)?;
        reject_unknown_keys(object, pointer, TRAJECTORY_KEYS)?;
        let mode = match object.get("mode") {
            None => MatchMode::Strict,
            Some(m) => MatchMode::parse(m, &pointer_join(pointer, "mode"))?,
        };
        let calls_at = pointer_join(pointer, "calls");
        let calls = match object.get("calls") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, c)| ExpectedCall::parse(c, &pointer_join(&calls_at, i)))
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(MetricError::WrongType {
                    pointer: calls_at,
                    expected: "an array of expected calls",
                    found: type_name(other),
                });
            }
            None => {
                return Err(MetricError::Missing { pointer: pointer.into(), field: "calls" });
            }
        };
        Ok(ExpectedTrace { mode, calls })
    }
}

/// Why one expected (or recorded) call was not accounted for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mismatch {
    /// Index into the expected calls; the number of expected calls for a strict extra call
    /// or a subset over-call.
    pub expected_index: usize,
    /// Index into the recorded `tool_calls` of the call it was compared with; `None` when
    /// the trace ran out or no recorded call has the expected name.
    pub actual_index: Option<usize>,
    pub expected_name: Option<String>,
    pub actual_name: Option<String>,
    /// Args differences against the compared call (empty when the names differ).
    pub diffs: Vec<Diff>,
    /// One line.
    pub reason: String,
}

/// The outcome of validating one trace against an expected trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrajectoryReport {
    pub mode: MatchMode,
    /// Every expected call is accounted for as the mode requires (1/0 as a target).
    pub passed: bool,
    /// `mismatches.len()`.
    pub mismatch_count: usize,
    pub mismatches: Vec<Mismatch>,
}

impl TrajectoryReport {
    /// `passed (strict)` or `1 mismatch (strict): expected call 1 (open) …`.
    pub fn summary(&self) -> String {
        let mode =
            serde_json::to_value(self.mode).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        match self.mismatches.first() {
            None => format!("passed ({mode})"),
            Some(first) => format!("{} mismatch(es) ({mode}): {}", self.mismatch_count, first.reason),
        }
    }

    /// `trajectory.passed` (1/0) and `trajectory.mismatch_count`.
    pub fn targets(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("trajectory.passed".into(), flag(self.passed)),
            ("trajectory.mismatch_count".into(), Value::from(self.mismatch_count)),
        ])
    }
}

/// What validation reads of the recorded calls: their positions and names, whether an
/// expected call's args shape fits a call, and why not. [`TracedCall`]s answer from their
/// args trees; the batch reader answers from canonical text
/// ([`canonical::CanonicalCalls`]) and builds a tree only for a diff.
pub trait Recorded {
    /// The number of recorded calls.
    fn count(&self) -> usize;
    /// Call `j`'s position in the input `tool_calls` array.
    fn index(&self, j: usize) -> usize;
    /// Call `j`'s recorded name, wire prefix included.
    fn name(&self, j: usize) -> &str;
    /// Do call `j`'s args fit the shape of expected call `i`?
    fn fits(&self, i: usize, e: &ExpectedCall, j: usize) -> bool;
    /// Why call `j`'s args do not fit the shape of expected call `i` (empty when they do).
    fn diffs(&self, i: usize, e: &ExpectedCall, j: usize) -> Vec<Diff>;

    /// Does an expectation's `name` designate call `j` ([`TracedCall::is_named`])?
    fn is_named(&self, j: usize, expected: &str) -> bool {
        let name = self.name(j);
        bare_name(name) == expected || name == expected
    }
}

impl Recorded for [TracedCall] {
    fn count(&self) -> usize {
        self.len()
    }
    fn index(&self, j: usize) -> usize {
        self[j].index
    }
    fn name(&self, j: usize) -> &str {
        &self[j].name
    }
    fn fits(&self, _: usize, e: &ExpectedCall, j: usize) -> bool {
        e.args.matches(&self[j].args)
    }
    fn diffs(&self, _: usize, e: &ExpectedCall, j: usize) -> Vec<Diff> {
        e.args.diffs(&self[j].args)
    }
}

/// Validate recorded `calls` against `expected`.
pub fn validate(expected: &ExpectedTrace, calls: &[TracedCall]) -> TrajectoryReport {
    validate_recorded(expected, calls)
}

/// [`validate`] of calls read any way.
pub fn validate_recorded<R: Recorded + ?Sized>(expected: &ExpectedTrace, calls: &R) -> TrajectoryReport {
    let exp = &expected.calls;
    let mismatches = match expected.mode {
        // An empty reference pins nothing, even in strict mode; subset is the exception.
        _ if exp.is_empty() && expected.mode != MatchMode::Subset => Vec::new(),
        MatchMode::Strict => strict(exp, calls),
        MatchMode::Subsequence => subsequence(exp, calls),
        MatchMode::Unordered | MatchMode::Superset => unordered(exp, calls),
        MatchMode::Subset => subset(exp, calls),
    };
    TrajectoryReport {
        mode: expected.mode,
        passed: mismatches.is_empty(),
        mismatch_count: mismatches.len(),
        mismatches,
    }
}

/// `expected call 1 (open) vs recorded call 1 (open): /id: expected 8, got 7`.
fn compared<R: Recorded + ?Sized>(i: usize, e: &ExpectedCall, calls: &R, j: usize) -> Mismatch {
    let (index, name) = (calls.index(j), calls.name(j));
    let names_agree = calls.is_named(j, &e.name);
    let diffs = if names_agree { calls.diffs(i, e, j) } else { Vec::new() };
    let why = if !names_agree {
        format!("expected a call to {}, recorded {name}", e.name)
    } else {
        let more = if diffs.len() > 1 { format!(" (+{} more)", diffs.len() - 1) } else { String::new() };
        match diffs.first() {
            Some(d) => format!("args differ at {d}{more}"),
            None => "args do not fit the expected shape".to_string(),
        }
    };
    Mismatch {
        expected_index: i,
        actual_index: Some(index),
        expected_name: Some(e.name.clone()),
        actual_name: Some(name.to_string()),
        diffs,
        reason: format!("expected call {i} ({}) vs recorded call {index} ({name}): {why}", e.name),
    }
}

fn missing(i: usize, e: &ExpectedCall, why: &str) -> Mismatch {
    Mismatch {
        expected_index: i,
        actual_index: None,
        expected_name: Some(e.name.clone()),
        actual_name: None,
        diffs: Vec::new(),
        reason: format!("expected call {i} ({}): {why}", e.name),
    }
}

fn strict<R: Recorded + ?Sized>(exp: &[ExpectedCall], calls: &R) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for (i, e) in exp.iter().enumerate() {
        if i >= calls.count() {
            out.push(missing(i, e, "the trace ran out"));
        } else if !(calls.is_named(i, &e.name) && calls.fits(i, e, i)) {
            out.push(compared(i, e, calls, i));
        }
    }
    for j in exp.len()..calls.count() {
        let (index, name) = (calls.index(j), calls.name(j));
        out.push(Mismatch {
            expected_index: exp.len(),
            actual_index: Some(index),
            expected_name: None,
            actual_name: Some(name.to_string()),
            diffs: Vec::new(),
            reason: format!("recorded call {index} ({name}) is an extra call after the {} expected", exp.len()),
        });
    }
    out
}

/// Positions of the calls each name designates (bare and full recorded name,
/// [`TracedCall::is_named`]), ascending. Each recorded name is split on `__` once, here.
fn calls_by_name<R: Recorded + ?Sized>(calls: &R) -> HashMap<&str, Vec<usize>> {
    let mut index: HashMap<&str, Vec<usize>> = HashMap::new();
    for j in 0..calls.count() {
        let name = calls.name(j);
        let bare = bare_name(name);
        index.entry(bare).or_default().push(j);
        if bare != name {
            index.entry(name).or_default().push(j);
        }
    }
    index
}

/// The largest order-preserving matching of expected to recorded calls — a longest
/// common subsequence under the argument predicates — so `mismatch_count` is the number
/// of expected calls no in-order assignment can place, whichever calls fit several
/// (a greedy scan that places an expected call at the first recorded call it fits can
/// strand the calls after it, and over-count).
///
/// `table[i][j]` is the largest matching of expected calls `i..` into recorded calls
/// `j..`; only name-sharing pairs are tested (the name index), so building it costs
/// O(n·m) cell steps plus one predicate test per fitting pair. Of the largest
/// matchings, the one taken places each expected call, in order, whenever some largest
/// matching does, at the earliest recorded call that still allows it: the mismatches
/// named are the same on every run.
fn subsequence<R: Recorded + ?Sized>(exp: &[ExpectedCall], calls: &R) -> Vec<Mismatch> {
    let index = calls_by_name(calls);
    let fits = expected_adjacency(exp, calls, &index);
    let (n, m) = (exp.len(), calls.count());
    let width = m + 1;
    let mut table = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        let mut fitting = fits[i].iter().rev().peekable();
        for j in (0..m).rev() {
            let mut best = table[(i + 1) * width + j].max(table[i * width + j + 1]);
            if fitting.next_if_eq(&&j).is_some() {
                best = best.max(1 + table[(i + 1) * width + j + 1]);
            }
            table[i * width + j] = best;
        }
    }
    let mut out = Vec::new();
    let mut cursor = 0;
    for (i, e) in exp.iter().enumerate() {
        let here = table[i * width + cursor];
        let later = &fits[i][fits[i].partition_point(|&j| j < cursor)..];
        match later.iter().find(|&&j| 1 + table[(i + 1) * width + j + 1] == here) {
            Some(&j) => cursor = j + 1,
            None if !later.is_empty() => {
                let at = calls.index(later[0]);
                out.push(Mismatch {
                    actual_index: Some(at),
                    actual_name: Some(calls.name(later[0]).to_string()),
                    ..missing(
                        i,
                        e,
                        &format!(
                            "recorded call {at} fits, but no in-order placement keeps it with as many of the other \
                             expected calls"
                        ),
                    )
                });
            }
            None => {
                let named = index.get(e.name.as_str()).map_or(&[][..], Vec::as_slice);
                match named[named.partition_point(|&j| j < cursor)..].first() {
                    Some(&nearest) => {
                        let mut m = compared(i, e, calls, nearest);
                        m.reason = format!("not found in order; nearest {}", m.reason);
                        out.push(m);
                    }
                    None => out.push(missing(i, e, "no later recorded call has this name")),
                }
            }
        }
    }
    out
}

/// The work of an order-free validation of `calls`: (expected, recorded) pairs compared plus edges
/// the matching examined. The scaling tests count it instead of timing.
pub fn unordered_work(expected: &ExpectedTrace, calls: &[TracedCall]) -> u64 {
    let index = calls_by_name(calls);
    let compared: usize = expected.calls.iter().map(|e| index.get(e.name.as_str()).map_or(0, Vec::len)).sum();
    let adjacency = expected_adjacency(&expected.calls, calls, &index);
    compared as u64 + max_matching(&adjacency, calls.count()).1
}

/// For each expected call, the recorded calls it fits, ascending.
fn expected_adjacency<R: Recorded + ?Sized>(
    exp: &[ExpectedCall],
    calls: &R,
    index: &HashMap<&str, Vec<usize>>,
) -> Vec<Vec<usize>> {
    exp.iter()
        .enumerate()
        .map(|(i, e)| {
            let named = index.get(e.name.as_str()).map_or(&[][..], Vec::as_slice);
            named.iter().copied().filter(|&j| calls.fits(i, e, j)).collect()
        })
        .collect()
}

fn unordered<R: Recorded + ?Sized>(exp: &[ExpectedCall], calls: &R) -> Vec<Mismatch> {
    let index = calls_by_name(calls);
    let (assignment, _) = max_matching(&expected_adjacency(exp, calls, &index), calls.count());
    let mut taken = vec![false; calls.count()];
    for j in assignment.iter().flatten() {
        taken[*j] = true;
    }
    let mut out = Vec::new();
    for (i, e) in exp.iter().enumerate().filter(|(i, _)| assignment[*i].is_none()) {
        // Compare with a free call of that name when there is one: it is the likely intent.
        let named = index.get(e.name.as_str()).map_or(&[][..], Vec::as_slice);
        let nearest = named.iter().find(|&&j| !taken[j]).or(named.first());
        match nearest {
            Some(&j) => {
                let mut m = compared(i, e, calls, j);
                m.reason = format!("no distinct recorded call fits; nearest {}", m.reason);
                out.push(m);
            }
            None => out.push(missing(i, e, "no recorded call has this name")),
        }
    }
    out
}

fn subset<R: Recorded + ?Sized>(exp: &[ExpectedCall], calls: &R) -> Vec<Mismatch> {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, e) in exp.iter().enumerate() {
        by_name.entry(e.name.as_str()).or_default().push(i);
    }
    let none: &[usize] = &[];
    // The expected calls recorded call `j` may answer to: by its bare or its full name.
    let named = |j: usize| -> (&[usize], &[usize]) {
        let name = calls.name(j);
        let bare = bare_name(name);
        let by_bare = by_name.get(bare).map_or(none, Vec::as_slice);
        let by_full = if bare == name { none } else { by_name.get(name).map_or(none, Vec::as_slice) };
        (by_bare, by_full)
    };
    let adjacency: Vec<Vec<usize>> = (0..calls.count())
        .map(|j| {
            let (by_bare, by_full) = named(j);
            let mut fits: Vec<usize> =
                by_bare.iter().chain(by_full).copied().filter(|&i| calls.fits(i, &exp[i], j)).collect();
            fits.sort_unstable();
            fits
        })
        .collect();
    let (assignment, _) = max_matching(&adjacency, exp.len());
    (0..calls.count())
        .zip(&assignment)
        .filter(|(_, a)| a.is_none())
        .map(|(j, _)| {
            let (by_bare, by_full) = named(j);
            let nearest = by_bare.first().into_iter().chain(by_full.first()).min().map(|&i| (i, &exp[i]));
            let (diffs, hint) = match nearest {
                Some((i, e)) => {
                    let m = compared(i, e, calls, j);
                    (m.diffs, format!("; nearest {}", m.reason))
                }
                None => (Vec::new(), String::new()),
            };
            let (index, name) = (calls.index(j), calls.name(j));
            Mismatch {
                expected_index: exp.len(),
                actual_index: Some(index),
                expected_name: None,
                actual_name: Some(name.to_string()),
                diffs,
                reason: format!(
                    "recorded call {index} ({name}) is an over-call: no distinct expected call fits it{hint}"
                ),
            }
        })
        .collect()
}

impl CaseBlock for ExpectedTrace {
    const KEY: &'static str = "trajectory";

    fn from_block(block: &Value) -> Result<Self, MetricError> {
        ExpectedTrace::parse(block, "")
    }

    fn evaluate(&self, runs: &[Value]) -> Result<BlockOutcome, MetricError> {
        let outcomes = runs
            .iter()
            .enumerate()
            .map(|(run, envelope)| {
                let report = validate(self, &read_tool_calls(envelope));
                let detail = report.mismatches.first().map(|m| m.reason.clone());
                run_outcome(run, report.targets(), &[("trajectory.passed", Bound::AtLeast(1.0))], detail.as_deref())
            })
            .collect();
        Ok(BlockOutcome::per_run(Self::KEY, outcomes))
    }
}

#[cfg(test)]
mod tests;
