//! Trajectory axes: ordering constraints that do not pin whole calls (docs/metrics.md §3,
//! `trajectory_axes`).
//!
//! A full expected trace is brittle when only a few orderings matter: "fetch a page only
//! after a search produced its URL", "authenticate before any search". Dependencies
//! (data flows from an earlier producer) and order constraints (a gate precedes every use)
//! state exactly that, and score the share of declarations that hold.
//!
//! Names are matched like trajectory names: the recorded name without its `<server>__`
//! wire prefix, or the full recorded name.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::gate::{BlockOutcome, Bound, CaseBlock, run_outcome};
use super::trace::{TracedCall, read_tool_calls};
use super::{MetricError, expect_object, pointer_join, reject_unknown_keys, type_name};

/// Percent reported when nothing is declared: no constraint can be broken.
const ALL_HELD: u32 = 100;

/// `consumer` calls need an earlier `producer` call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dependency {
    pub producer: String,
    pub consumer: String,
}

/// No `second` call may happen before the first `first` call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Order {
    pub first: String,
    pub second: String,
}

/// The `trajectory_axes` block: `{"dependencies"?: [{producer, consumer}], "order"?: [{first, second}]}`.
///
/// Input per run: a trace envelope; only `tool_calls` is read. Default gate: both
/// satisfactions = 100, held in every run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AxesBlock {
    pub dependencies: Vec<Dependency>,
    pub order: Vec<Order>,
}

/// Satisfaction of one trace's declared constraints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AxesReport {
    /// `floor(100 · held / declared)` over dependencies; 100 when none are declared. A
    /// dependency holds when every `consumer` call has a `producer` call before it
    /// (vacuously with no consumer call).
    pub dependency_satisfaction: u32,
    /// `floor(100 · held / declared)` over order constraints; 100 when none are declared.
    /// An order holds when no `second` call happens before the first `first` call
    /// (vacuously with no `second` call; a `second` call with no `first` call at all breaks it).
    pub order_satisfaction: u32,
    /// One line per constraint that did not hold.
    pub violations: Vec<String>,
}

impl AxesReport {
    /// `dependencies 100, order 0; search at 0 before the first authenticate`.
    pub fn summary(&self) -> String {
        let mut line = format!("dependencies {}, order {}", self.dependency_satisfaction, self.order_satisfaction);
        if !self.violations.is_empty() {
            line.push_str("; ");
            line.push_str(&self.violations.join("; "));
        }
        line
    }

    /// `trajectory.dependency_satisfaction`, `trajectory.order_satisfaction`.
    pub fn targets(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("trajectory.dependency_satisfaction".into(), Value::from(self.dependency_satisfaction)),
            ("trajectory.order_satisfaction".into(), Value::from(self.order_satisfaction)),
        ])
    }
}

fn first_index(calls: &[TracedCall], name: &str) -> Option<usize> {
    calls.iter().position(|c| c.is_named(name))
}

fn percent(held: usize, declared: usize) -> u32 {
    (100 * held).checked_div(declared).map_or(ALL_HELD, |p| u32::try_from(p).unwrap_or(ALL_HELD))
}

/// Score recorded `calls` against the declared constraints.
pub fn score_axes(block: &AxesBlock, calls: &[TracedCall]) -> AxesReport {
    let mut violations = Vec::new();
    let mut held_dependencies = 0;
    for d in &block.dependencies {
        // Every consumer call has an earlier producer call ⇔ the first producer precedes
        // the first consumer.
        match (first_index(calls, &d.consumer), first_index(calls, &d.producer)) {
            (None, _) => held_dependencies += 1,
            (Some(c), Some(p)) if p < c => held_dependencies += 1,
            (Some(c), _) => {
                violations.push(format!("{} at {} has no earlier {}", d.consumer, calls[c].index, d.producer))
            }
        }
    }
    let mut held_order = 0;
    for o in &block.order {
        match (first_index(calls, &o.second), first_index(calls, &o.first)) {
            (None, _) => held_order += 1,
            (Some(s), Some(f)) if f < s => held_order += 1,
            (Some(s), Some(f)) => violations
                .push(format!("{} at {} before the first {} at {}", o.second, calls[s].index, o.first, calls[f].index)),
            (Some(s), None) => {
                violations.push(format!("{} at {} but {} was never called", o.second, calls[s].index, o.first))
            }
        }
    }
    AxesReport {
        dependency_satisfaction: percent(held_dependencies, block.dependencies.len()),
        order_satisfaction: percent(held_order, block.order.len()),
        violations,
    }
}

pub(crate) const AXES_KEYS: &[&str] = &["dependencies", "order"];

impl AxesBlock {
    /// Read the block (or the CLI input, whose other keys are the trace: pass
    /// `strict = false` to ignore keys other than the two lists).
    pub fn parse(value: &Value, pointer: &str, strict: bool) -> Result<Self, MetricError> {
        let object = expect_object(value, pointer)?;
        if strict {
            reject_unknown_keys(object, pointer, AXES_KEYS)?;
        }
        // Each list holds objects with exactly the two named fields.
        let pairs = |key: &str, fields: &'static [&'static str]| -> Result<Vec<(String, String)>, MetricError> {
            let at = pointer_join(pointer, key);
            let items = match object.get(key) {
                None | Some(Value::Null) => return Ok(Vec::new()),
                Some(Value::Array(items)) => items,
                Some(other) => {
                    return Err(MetricError::WrongType { pointer: at, expected: "an array", found: type_name(other) });
                }
            };
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let item_at = pointer_join(&at, i);
                    let entry = expect_object(item, &item_at)?;
                    reject_unknown_keys(entry, &item_at, fields)?;
                    let name = |field: &'static str| match entry.get(field) {
                        Some(Value::String(s)) => Ok(s.clone()),
                        Some(other) => Err(MetricError::WrongType {
                            pointer: pointer_join(&item_at, field),
                            expected: "a tool name",
                            found: type_name(other),
                        }),
                        None => Err(MetricError::Missing { pointer: item_at.clone(), field }),
                    };
                    let (a, b) = (name(fields[0])?, name(fields[1])?);
                    // "x before x" holds of any trace: a constraint that can never fail
                    // is a mistake in the case, not a check
                    if a == b {
                        return Err(MetricError::SelfConstraint { pointer: item_at, tool: a });
                    }
                    Ok((a, b))
                })
                .collect()
        };
        let dependencies = pairs("dependencies", &["producer", "consumer"])?
            .into_iter()
            .map(|(producer, consumer)| Dependency { producer, consumer })
            .collect();
        let order =
            pairs("order", &["first", "second"])?.into_iter().map(|(first, second)| Order { first, second }).collect();
        Ok(AxesBlock { dependencies, order })
    }
}

impl CaseBlock for AxesBlock {
    const KEY: &'static str = "trajectory_axes";

    fn from_block(block: &Value) -> Result<Self, MetricError> {
        AxesBlock::parse(block, "", true)
    }

    fn evaluate(&self, runs: &[Value]) -> Result<BlockOutcome, MetricError> {
        let gates = [
            ("trajectory.dependency_satisfaction", Bound::AtLeast(f64::from(ALL_HELD))),
            ("trajectory.order_satisfaction", Bound::AtLeast(f64::from(ALL_HELD))),
        ];
        let outcomes = runs
            .iter()
            .enumerate()
            .map(|(run, envelope)| {
                let report = score_axes(self, &read_tool_calls(envelope));
                let detail = (!report.violations.is_empty()).then(|| report.violations.join("; "));
                run_outcome(run, report.targets(), &gates, detail.as_deref())
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

    fn score(block: Value, calls: Value) -> AxesReport {
        score_axes(&AxesBlock::from_block(&block).unwrap(), &read_call_list(&calls))
    }

    #[test]
    fn a_dependency_holds_when_every_consumer_call_follows_a_producer_call() {
        // fetch_page at 3 after search at 0 -> 1/1
        let r = score(
            json!({"dependencies": [{"producer": "search", "consumer": "fetch_page"}]}),
            json!(["search", "authenticate", "search", "fetch_page"]),
        );
        assert_eq!(r.dependency_satisfaction, 100);
        // fetch_page at 0 has no producer before it -> 0/1
        let r = score(
            json!({"dependencies": [{"producer": "search", "consumer": "fetch_page"}]}),
            json!(["fetch_page", "search", "fetch_page"]),
        );
        assert_eq!(r.dependency_satisfaction, 0);
    }

    #[test]
    fn a_constraint_from_a_tool_to_itself_is_an_input_error_at_its_place() {
        // "search before search" holds of every trace: it would pass whatever happened
        for (block, at) in [
            (json!({"order": [{"first": "a", "second": "b"}, {"first": "search", "second": "search"}]}), "/order/1"),
            (json!({"dependencies": [{"producer": "fetch", "consumer": "fetch"}]}), "/dependencies/0"),
        ] {
            let err = AxesBlock::from_block(&block).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.starts_with(&format!("{at}: a constraint from \"")), "{err}");
            assert!(err.ends_with("to itself checks nothing; name two different tools"), "{err}");
        }
    }

    #[test]
    fn a_dependency_without_a_consumer_call_holds() {
        let r = score(json!({"dependencies": [{"producer": "search", "consumer": "fetch_page"}]}), json!(["open"]));
        assert_eq!(r.dependency_satisfaction, 100);
    }

    #[test]
    fn an_order_breaks_when_a_second_call_precedes_the_first_call_of_first() {
        // search at 0 before authenticate at 1 -> 0/1
        let r = score(
            json!({"order": [{"first": "authenticate", "second": "search"}]}),
            json!(["search", "authenticate", "search"]),
        );
        assert_eq!(r.order_satisfaction, 0);
        assert_eq!(r.violations, ["search at 0 before the first authenticate at 1"]);
        // second never called -> holds; first never called but second is -> breaks
        assert_eq!(
            score(json!({"order": [{"first": "auth", "second": "search"}]}), json!(["open"])).order_satisfaction,
            100
        );
        assert_eq!(
            score(json!({"order": [{"first": "auth", "second": "search"}]}), json!(["search"])).order_satisfaction,
            0
        );
    }

    #[test]
    fn satisfaction_floors_the_held_share_and_is_full_when_nothing_is_declared() {
        // 2 of 3 held -> floor(66.67) = 66
        let block = json!({"order": [{"first": "a", "second": "b"}, {"first": "a", "second": "c"}, {"first": "d", "second": "a"}]});
        assert_eq!(score(block, json!(["a", "b", "c"])).order_satisfaction, 66);
        let r = score(json!({}), json!(["x"]));
        assert_eq!((r.dependency_satisfaction, r.order_satisfaction), (100, 100));
    }

    #[test]
    fn malformed_constraints_are_errors_with_their_place() {
        let err = AxesBlock::from_block(&json!({"order": [{"first": "a", "secnd": "b"}]})).unwrap_err();
        assert_eq!(err.pointer(), Some("/order/0"));
        let err = AxesBlock::from_block(&json!({"dependencies": [{"producer": "a"}]})).unwrap_err();
        assert!(matches!(err, MetricError::Missing { field: "consumer", .. }));
        assert!(AxesBlock::from_block(&json!({"orders": []})).is_err());
    }

    #[test]
    fn the_block_requires_both_satisfactions_at_one_hundred_in_every_run() {
        let block = AxesBlock::from_block(&json!({"order": [{"first": "auth", "second": "search"}]})).unwrap();
        let outcome =
            block.evaluate(&[json!({"tool_calls": ["auth", "search"]}), json!({"tool_calls": ["search"]})]).unwrap();
        assert!(!outcome.passed);
        assert_eq!(outcome.failures.len(), 1);
        assert_eq!(outcome.failures[0].run, Some(1));
        assert_eq!(
            outcome.messages()[0],
            "run 1: trajectory.order_satisfaction = 0, below the bound 100 (search at 0 but auth was never called)"
        );
    }
}
