//! Golden path: how much waste a trace carries against an ideal call sequence
//! (docs/metrics.md §3, `golden_path`).
//!
//! Where a trajectory check says pass/fail, the golden path counts the kinds of waste an
//! agent adds to the ideal route: extra steps, the same tool twice in a row, returning to
//! a tool it had left (backtracking), and — our addition — golden steps it never took, so
//! a path of the right length with the wrong tools is not golden. The penalty
//! `1/(1 + 0.5·w)` falls smoothly with the enabled waste count w, as in mcptest-core's
//! golden-path metric.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

use super::gate::{BlockOutcome, Bound, CaseBlock, flag, float, optional_bool, run_outcome};
use super::sequence::BitLcs;
use super::trace::{TracedCall, bare_name, read_tool_calls};
use super::{MetricError, expect_object, pointer_join, reject_unknown_keys, type_name};

/// Each unit of waste costs half as much as the path itself: two wasted steps halve the
/// penalty score (`1/(1 + 0.5·2) = 0.5`).
const WASTE_WEIGHT: f64 = 0.5;

/// The `golden_path` block: `{"calls": ["search", …], "allow_extra_steps"?: false,
/// "penalize_backtracking"?: true, "penalize_repeated_tools"?: true,
/// "penalize_missing_steps"?: true}`. `calls` entries are tool names, or `{"name": …}`.
///
/// Input per run: a trace envelope; only `tool_calls` is read. Default gate
/// `golden_path.passed ≥ 1`, held in every run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoldenPath {
    pub calls: Vec<String>,
    pub allow_extra_steps: bool,
    pub penalize_backtracking: bool,
    pub penalize_repeated_tools: bool,
    pub penalize_missing_steps: bool,
}

/// Waste counted against the golden path. All four counts are always reported, enabled or not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GoldenPathReport {
    /// w = 0: no enabled waste (1/0 as a target).
    pub passed: bool,
    /// `1/(1 + 0.5·w)`, w = the sum of the enabled counts.
    pub penalty: f64,
    /// `max(0, recorded length − golden length)`; counted unless `allow_extra_steps`.
    pub extra_steps: usize,
    /// Positions whose tool appeared earlier but not immediately before.
    pub backtracks: usize,
    /// Positions i ≥ 1 whose tool equals the tool at i − 1.
    pub repeated_tools: usize,
    /// `golden length − LCS(golden names, recorded names)`.
    pub missing_steps: usize,
}

impl GoldenPathReport {
    /// `penalty 0.50: extra 1, backtracks 1, repeated 0, missing 0`.
    pub fn summary(&self) -> String {
        format!(
            "penalty {:.2}: extra {}, backtracks {}, repeated {}, missing {}",
            self.penalty, self.extra_steps, self.backtracks, self.repeated_tools, self.missing_steps
        )
    }

    /// `golden_path.*`.
    pub fn targets(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("golden_path.passed".into(), flag(self.passed)),
            ("golden_path.penalty".into(), float(self.penalty)),
            ("golden_path.extra_steps".into(), Value::from(self.extra_steps)),
            ("golden_path.backtracks".into(), Value::from(self.backtracks)),
            ("golden_path.repeated_tools".into(), Value::from(self.repeated_tools)),
            ("golden_path.missing_steps".into(), Value::from(self.missing_steps)),
        ])
    }
}

/// Count waste in recorded `calls` against `golden`.
pub fn score_golden_path(golden: &GoldenPath, calls: &[TracedCall]) -> GoldenPathReport {
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    score_names(golden, &names)
}

/// [`score_golden_path`] of calls given by their recorded names, in order (all it reads
/// of them), for a reader that borrows the names from its input.
pub(crate) fn score_names(golden: &GoldenPath, names: &[&str]) -> GoldenPathReport {
    let recorded = Interned::new(names);
    let ids = &recorded.ids;
    let extra_steps = names.len().saturating_sub(golden.calls.len());
    // equal names have equal ids: the counts compare ids
    let repeated_tools = ids.windows(2).filter(|w| w[0] == w[1]).count();
    let mut seen = vec![false; recorded.distinct.len()];
    let mut backtracks = 0;
    for (i, &id) in ids.iter().enumerate() {
        if i > 0 && ids[i - 1] != id && seen[id as usize] {
            backtracks += 1;
        }
        seen[id as usize] = true;
    }
    let missing_steps = golden.calls.len() - common_interned(&golden.calls, &recorded).0;
    let waste = [
        (!golden.allow_extra_steps, extra_steps),
        (golden.penalize_backtracking, backtracks),
        (golden.penalize_repeated_tools, repeated_tools),
        (golden.penalize_missing_steps, missing_steps),
    ]
    .iter()
    .filter(|(enabled, _)| *enabled)
    .map(|(_, count)| count)
    .sum::<usize>();
    GoldenPathReport {
        passed: waste == 0,
        penalty: 1.0 / (1.0 + WASTE_WEIGHT * waste as f64),
        extra_steps,
        backtracks,
        repeated_tools,
        missing_steps,
    }
}

/// Recorded names, each distinct one given an id (in order of first appearance).
struct Interned<'a> {
    /// The id of each recorded name, in order.
    ids: Vec<u32>,
    /// The name of each id.
    distinct: Vec<&'a str>,
}

impl<'a> Interned<'a> {
    fn new(names: &[&'a str]) -> Self {
        let mut index: HashMap<&str, u32, foldhash::fast::FixedState> = HashMap::default();
        let mut distinct = Vec::new();
        let ids = names
            .iter()
            .map(|&name| {
                *index.entry(name).or_insert_with(|| {
                    distinct.push(name);
                    u32::try_from(distinct.len() - 1).unwrap_or(u32::MAX)
                })
            })
            .collect();
        Interned { ids, distinct }
    }
}

/// LCS of the golden names and the recorded calls, a call answering to a golden name by
/// its bare or its full name ([`TracedCall::is_named`]); and the word steps it took. Each
/// distinct recorded name is split on `__` once here, not on every comparison.
pub fn common_steps(golden: &[String], calls: &[TracedCall]) -> (usize, u64) {
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    common_interned(golden, &Interned::new(&names))
}

fn common_interned(golden: &[String], recorded: &Interned<'_>) -> (usize, u64) {
    let mut ids: HashMap<&str, u32, foldhash::fast::FixedState> = HashMap::default();
    let golden_ids: Vec<u32> = golden
        .iter()
        .map(|name| {
            let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
            *ids.entry(name.as_str()).or_insert(next)
        })
        .collect();
    // the golden ids each distinct recorded name answers to: by its bare name, by its full name
    let answers: Vec<(Option<u32>, Option<u32>)> = recorded
        .distinct
        .iter()
        .map(|&name| {
            let bare = bare_name(name);
            let by_full = if bare == name { None } else { ids.get(name).copied() };
            (ids.get(bare).copied(), by_full)
        })
        .collect();
    let pairs = recorded.ids.iter().enumerate().flat_map(|(j, &id)| {
        let (by_bare, by_full) = answers[id as usize];
        by_bare.map(|s| (s, j)).into_iter().chain(by_full.map(|s| (s, j)))
    });
    BitLcs::new(recorded.ids.len(), ids.len(), pairs).len_against(&golden_ids)
}

const GOLDEN_KEYS: &[&str] =
    &["calls", "allow_extra_steps", "penalize_backtracking", "penalize_repeated_tools", "penalize_missing_steps"];

impl GoldenPath {
    /// Read the block; `pointer` names it.
    pub fn parse(value: &Value, pointer: &str) -> Result<Self, MetricError> {
        let object = expect_object(value, pointer)?;
        reject_unknown_keys(object, pointer, GOLDEN_KEYS)?;
        let calls_at = pointer_join(pointer, "calls");
        let calls = match object.get("calls") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let at = pointer_join(&calls_at, i);
                    match item {
                        Value::String(name) => Ok(name.clone()),
                        Value::Object(call) => {
                            reject_unknown_keys(call, &at, &["name"])?;
                            match call.get("name") {
                                Some(Value::String(name)) => Ok(name.clone()),
                                Some(other) => Err(MetricError::WrongType {
                                    pointer: pointer_join(&at, "name"),
                                    expected: "a tool name",
                                    found: type_name(other),
                                }),
                                None => Err(MetricError::Missing { pointer: at, field: "name" }),
                            }
                        }
                        other => Err(MetricError::WrongType {
                            pointer: at,
                            expected: "a tool name",
                            found: type_name(other),
                        }),
                    }
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(MetricError::WrongType {
                    pointer: calls_at,
                    expected: "an array of tool names",
                    found: type_name(other),
                });
            }
            None => {
                return Err(MetricError::Missing { pointer: pointer.into(), field: "calls" });
            }
        };
        let option = |key: &str, default: bool| optional_bool(object, key, pointer).map(|b| b.unwrap_or(default));
        Ok(GoldenPath {
            calls,
            allow_extra_steps: option("allow_extra_steps", false)?,
            penalize_backtracking: option("penalize_backtracking", true)?,
            penalize_repeated_tools: option("penalize_repeated_tools", true)?,
            penalize_missing_steps: option("penalize_missing_steps", true)?,
        })
    }
}

impl CaseBlock for GoldenPath {
    const KEY: &'static str = "golden_path";

    fn from_block(block: &Value) -> Result<Self, MetricError> {
        GoldenPath::parse(block, "")
    }

    fn evaluate(&self, runs: &[Value]) -> Result<BlockOutcome, MetricError> {
        let outcomes = runs
            .iter()
            .enumerate()
            .map(|(run, envelope)| {
                let report = score_golden_path(self, &read_tool_calls(envelope));
                run_outcome(
                    run,
                    report.targets(),
                    &[("golden_path.passed", Bound::AtLeast(1.0))],
                    Some(&report.summary()),
                )
            })
            .collect();
        Ok(BlockOutcome::per_run(Self::KEY, outcomes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::trace::read_call_list;
    use serde_json::json;

    fn score(golden: Value, calls: Value) -> GoldenPathReport {
        score_golden_path(&GoldenPath::parse(&golden, "").unwrap(), &read_call_list(&calls))
    }

    #[test]
    fn the_golden_path_itself_is_golden() {
        let r = score(json!({"calls": ["search", "open"]}), json!(["search", "open"]));
        assert_eq!((r.passed, r.penalty), (true, 1.0));
    }

    #[test]
    fn an_extra_step_and_a_backtrack_halve_the_penalty() {
        // 4 vs 3 -> 1 extra; search again after open -> 1 backtrack; w = 2 -> 1/(1+1) = 0.5
        let r =
            score(json!({"calls": ["search", "open", "summarize"]}), json!(["search", "open", "search", "summarize"]));
        assert_eq!((r.extra_steps, r.backtracks, r.repeated_tools, r.missing_steps, r.penalty), (1, 1, 0, 0, 0.5));
    }

    #[test]
    fn the_same_tool_twice_in_a_row_is_a_repeat_not_a_backtrack() {
        // a a b a: position 1 repeats; position 3 returns to a after b -> 1 backtrack
        let r = score(json!({"calls": ["a", "b"], "allow_extra_steps": true}), json!(["a", "a", "b", "a"]));
        assert_eq!((r.repeated_tools, r.backtracks), (1, 1));
        // w = 2 (extra steps allowed) -> 0.5
        assert_eq!(r.penalty, 0.5);
    }

    #[test]
    fn a_golden_step_never_taken_is_missing() {
        // LCS(search open summarize, search summarize) = 2 -> 1 missing; w = 1 -> 1/1.5
        let r = score(json!({"calls": ["search", "open", "summarize"]}), json!(["search", "summarize"]));
        assert_eq!(r.missing_steps, 1);
        assert!((r.penalty - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn a_path_of_the_right_length_with_the_wrong_tools_is_not_golden() {
        // LCS(a b, c d) = 0 -> 2 missing
        let r = score(json!({"calls": ["a", "b"]}), json!(["c", "d"]));
        assert_eq!((r.missing_steps, r.passed), (2, false));
    }

    #[test]
    fn disabled_penalties_are_still_reported_but_do_not_count() {
        let golden = json!({"calls": ["a"], "allow_extra_steps": true, "penalize_backtracking": false, "penalize_repeated_tools": false, "penalize_missing_steps": false});
        // extra 3, repeat 1, backtrack 1, missing 0 -> reported; w = 0
        let r = score(golden, json!(["a", "a", "b", "a"]));
        assert_eq!((r.extra_steps, r.repeated_tools, r.backtracks, r.passed, r.penalty), (3, 1, 1, true, 1.0));
    }

    #[test]
    fn golden_names_match_recorded_names_without_the_wire_prefix() {
        assert!(score(json!({"calls": ["search"]}), json!(["docs__search"])).passed);
    }

    #[test]
    fn a_malformed_golden_block_is_an_error() {
        assert!(GoldenPath::parse(&json!({}), "").is_err());
        assert!(GoldenPath::parse(&json!({"calls": [1]}), "").is_err());
        let err = GoldenPath::parse(&json!({"calls": [], "allow_extra_step": true}), "/golden").unwrap_err();
        assert!(err.to_string().contains("did you mean \"allow_extra_steps\""), "{err}");
        assert!(GoldenPath::parse(&json!({"calls": [], "allow_extra_steps": "yes"}), "").is_err());
    }

    #[test]
    fn the_block_fails_any_run_with_waste() {
        let block = GoldenPath::from_block(&json!({"calls": ["a"]})).unwrap();
        let outcome = block.evaluate(&[json!({"tool_calls": ["a"]}), json!({"tool_calls": ["a", "a"]})]).unwrap();
        assert!(!outcome.passed);
        assert_eq!(
            outcome.messages(),
            [
                "run 1: golden_path.passed = 0, below the bound 1 (penalty 0.50: extra 1, backtracks 0, repeated 1, missing 0)"
            ]
        );
    }
}
